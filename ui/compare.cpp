// Compare mode: the run pinned as the baseline, its report beside the current one, and what
// became of it in another module that shares its parameters (core/experiments/compare.h).
#include <imgui.h>

#include "core/base/clock.h"
#include "core/experiments/report.h"
#include "ui/app.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

void App::set_baseline(Pin pin, Report report) {
    baseline_params_ = pin.params;
    pin_ = std::move(pin);
    baseline_ = std::move(report);
    has_baseline_ = true;
    baseline_run_.reset();
    refresh_baseline();  // the report stands when it is the module's on screen, else it is run there
    publish_hash();
}

void App::pin_current() {
    if (!exp_ || !has_report_ || report_stale_) return;
    set_baseline({exp_, params_}, report_);
    notify("Pinned as the baseline: change parameters to compare");
}

void App::unpin() {
    pin_ = {};
    has_baseline_ = false;
    baseline_run_.reset();
    baseline_why_.clear();
    publish_hash();
}

void App::refresh_baseline() {
    baseline_why_.clear();
    if (!pin_.module || !exp_) {
        baseline_run_.reset();
        return;
    }
    const std::optional<Params> p = baseline_params(pin_, *exp_, baseline_why_);
    if (!p) {
        has_baseline_ = false;
        baseline_run_.reset();
        return;
    }
    const bool have = has_baseline_ && baseline_.module == exp_->id && baseline_params_ == *p;
    if (have) return;
    baseline_params_ = *p;
    has_baseline_ = false;
    baseline_run_ = exp_->start(baseline_params_);
}

void App::step_baseline(double budget_ms) {
    if (!baseline_run_) return;
    progress_ = baseline_run_->step(budget_ms);
    stage_ = "baseline: " + baseline_run_->stage();
    if (progress_ < 1.0) return;
    baseline_ = baseline_run_->report();
    has_baseline_ = true;
    baseline_run_.reset();
}

const Report* App::baseline_shown() const {
    return has_baseline_ && exp_ && baseline_.module == exp_->id ? &baseline_ : nullptr;
}

std::string App::baseline_json() const {
    const Report* b = baseline_shown();
    return b ? k3::report_json(*b) : std::string();
}

// Under the toolbar while a baseline is pinned: what it is, how the current run differs, and why
// there is none in a module that does not share its parameters.
void App::draw_compare_bar() {
    if (!pin_.module || !exp_) return;
    const Theme& t = theme();
    std::string text;
    if (!baseline_why_.empty()) {
        text = "No baseline here: " + baseline_why_ + ".";
    } else {
        const std::string where =
            pin_.module == exp_
                ? ""
                : " (pinned in module " + std::to_string(pin_.module->number) + " " + pin_.module->id + ")";
        const std::string diff = parameter_differences(params_, baseline_params_);
        text = "Compared with the baseline" + where + ": " + (diff.empty() ? "the same parameters" : diff) +
               ". Dashed lines and \"baseline\" columns are the baseline's.";
    }
    ImGui::PushFont(fonts().small);
    text_wrapped_colored(baseline_why_.empty() ? t.accent : t.warn, text);
    ImGui::PopFont();
    if (!baseline_why_.empty()) shown_messages_.push_back(text);
}

}  // namespace k3::ui
