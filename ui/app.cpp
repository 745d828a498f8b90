// App state transitions: opening views, parameter changes, runs in slices, links, toasts.
// Drawing lives in shell.cpp, module_page.cpp and overview.cpp.
#include "ui/app.h"

#include <imgui.h>

#include "core/base/clock.h"
#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/experiments/url_state.h"
#include "ui/anim.h"
#include "ui/platform.h"

namespace k3::ui {

// Non-live modules wait until the sliders have been still this long before they rerun.
static constexpr double kDebounceMs = 350;

App::App() {}

void App::notify(std::string message) {
    toast_ = std::move(message);
    toast_until_ = now_ms() + 4000;
}

void App::select(const Experiment* e) {
    if (exp_) saved_params_[exp_->id] = params_;
    run_.reset();
    pending_start_ = false;
    waiting_data_.clear();
    data_error_.clear();
    has_report_ = false;
    report_stale_ = false;
    validation_.clear();
    exp_ = e;
    tab_.clear();
    tab_request_ = 0;
    if (!e) {
        publish_hash();
        return;
    }
    auto it = saved_params_.find(e->id);
    params_ = it != saved_params_.end() ? it->second : e->defaults();
    params_changed(true);
    refresh_baseline();
}

void App::open_link(const std::string& hash) {
    const UrlState st = parse_url_hash(hash);
    show(resolve_url(st), st.tab);
}

// --module and --set of the desktop app take the same path as a link: "overview" opens the Overview,
// values are clamped with a warning, problems are listed on screen.
void App::open_module(const std::string& id, const std::vector<std::pair<std::string, std::string>>& kv) {
    UrlState st;
    st.module = id;
    st.kv = kv;
    show(resolve_url(st), "");
}

void App::show(const ResolvedView& v, const std::string& tab) {
    link_issues_ = v.issues;
    link_applied_ = v.applied;
    // A link to the module on screen keeps its report: if the link's parameters are refused, the last
    // result stays (marked as for other parameters) beside the refusal.
    pin_ = v.pin;  // a link holds both parameter sets: without a pin it shows no baseline
    if (!v.experiment || v.experiment != exp_) select(v.experiment);
    if (v.experiment) {
        params_ = v.params;
        params_changed(true);
    }
    refresh_baseline();
    if (!tab.empty() && tab != "how" && tab != "limits" && v.applied)
        link_issues_.push_back(
            {ParamIssue::warning, "tab", "unknown tab '" + tab + "'; the results are shown"});
    tab_ = tab == "how" || tab == "limits" ? tab : "";
    tab_request_ = tab_ == "how" ? 1 : tab_ == "limits" ? 2 : 0;
    publish_hash();
}

void App::params_changed(bool immediate) {
    if (!exp_) return;
    validation_ = exp_->check(params_);
    data_error_.clear();
    publish_hash();
    run_.reset();
    waiting_data_.clear();
    for (const auto& i : validation_)
        if (i.level == ParamIssue::error) {
            pending_start_ = false;
            report_stale_ = has_report_;
            return;
        }
    if (immediate || exp_->live) {
        start_run();
    } else {
        pending_start_ = true;
        start_at_ms_ = now_ms() + kDebounceMs;
        report_stale_ = has_report_;
    }
}

void App::start_run() {
    pending_start_ = false;
    waiting_data_.clear();
    data_error_.clear();
    if (exp_->data_files)
        for (const auto& name : exp_->data_files(params_)) {
            if (platform::fetch_data_file(name)) waiting_data_.push_back(name);
            const std::string err = platform::data_file_error(name);
            if (!err.empty())
                data_error_ += "Could not load " + name + " from the page's server: " + err + ". ";
        }
    if (!data_error_.empty()) {
        waiting_data_.clear();
        return;
    }
    if (!waiting_data_.empty()) {
        stage_ = "loading " + waiting_data_.front();
        return;
    }
    progress_ = 0;
    stage_.clear();
    run_ms_ = 0;
    run_desc_ = run_description();
    // Told before the run allocates anything: if it exhausts memory the page can say what ran.
    told_running_ = run_desc_;
    platform::run_state(told_running_, result_link_);
    run_ = exp_->start(params_);
}

std::string App::run_description() const {
    if (!exp_) return {};
    std::string s = "module " + std::to_string(exp_->number) + " " + exp_->id;
    std::string set;
    for (const auto& spec : params_.specs())
        if (!params_.is_default(spec.key)) {
            std::string v = params_.text(spec.key);
            if (v.size() > 60) v = v.substr(0, 57) + "...";  // a text parameter can hold 4,096 characters
            set += (set.empty() ? "" : ", ") + spec.key + "=" + v;
        }
    return s + (set.empty() ? " with its defaults" : " with " + set);
}

void App::update(double budget_ms) {
    if (!exp_) overview_step(budget_ms);
    if (pending_start_ && now_ms() >= start_at_ms_) start_run();
    if (!waiting_data_.empty()) {
        bool all = true;
        for (const auto& n : waiting_data_) all &= !platform::fetch_data_file(n);
        if (all) start_run();
    }
    if (!run_ && !told_running_.empty()) {  // cancelled or replaced: nothing runs any more
        told_running_.clear();
        platform::run_state("", result_link_);
    }
    if (!run_) {
        if (!pending_start_ && waiting_data_.empty()) step_baseline(budget_ms);  // after the current run
        return;
    }
    const Stopwatch sw;
    progress_ = run_->step(budget_ms);
    run_ms_ += sw.ms();
    stage_ = run_->stage();
    if (progress_ >= 1.0) {
        report_ = run_->report();
        has_report_ = true;
        report_stale_ = false;
        run_.reset();
        result_link_ = format_url_hash(exp_->id, &params_, "", &pin_);
        told_running_.clear();
        platform::run_state("", result_link_);
    }
}

bool App::needs_frames() const {
    return busy() || animating_ || (toast_until_ > 0 && now_ms() < toast_until_ + 100);
}

void App::publish_hash() {
    const std::string h =
        format_url_hash(exp_ ? exp_->id : "overview", exp_ ? &params_ : nullptr, tab_, &pin_);
    if (h == last_hash_) return;
    last_hash_ = h;
    platform::set_url_hash(h);
}

void App::remember_rect(const std::string& key) {
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    widget_rects_[key] = {a.x, a.y, b.x - a.x, b.y - a.y};
}

std::string App::widget_rect(const std::string& key) const {
    const auto it = widget_rects_.find(key);
    if (it == widget_rects_.end()) return {};
    const auto& r = it->second;
    return format_number(r[0]) + "," + format_number(r[1]) + "," + format_number(r[2]) + "," +
           format_number(r[3]);
}

std::string App::report_json() const { return has_report_ ? k3::report_json(report_) : std::string(); }

std::string App::view_state_json() const {
    JsonWriter w;
    w.begin_object().field("module", module_id()).field("busy", busy());
    w.field("stage", run_ ? stage_ : std::string()).field("progress", run_ ? progress_ : 0.0);
    w.field("report", has_report_ && exp_ && report_.module == exp_->id).field("stale", report_stale_);
    w.field("baseline", baseline_shown() != nullptr).field("pinned", pin_.module ? pin_.module->id : "");
    w.key("messages").begin_array();
    for (const auto& m : shown_messages_) w.value(m);
    w.end_array().end_object();
    return w.take();
}

}  // namespace k3::ui
