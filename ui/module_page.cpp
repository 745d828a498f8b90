// A module's page: title and purpose, toolbar (link, exports), tabs (results, how it works, where
// it doesn't pay), parameter panel next to the report, run progress with cancel.
#include <imgui.h>

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/experiments/url_state.h"
#include "ui/app.h"
#include "ui/doc_view.h"
#include "ui/param_panel.h"
#include "ui/platform.h"
#include "ui/report_view.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

void App::draw_toolbar(const Experiment& e) {
    const std::string hash = format_url_hash(e.id, &params_, tab_, &pin_);
    const bool copy = ImGui::Button("Copy link");
    remember_rect("copy_link");
    if (copy) {
        const std::string link = platform::share_link(hash);
        notify(platform::copy_to_clipboard(link) ? "Link copied: " + link : "Link: " + link);
    }
    if (ImGui::IsItemHovered())
        tooltip_wrapped("A link that restores this module with these parameters:\n" +
                        platform::share_link(hash));
    ImGui::SameLine();
    // With a baseline on screen the exports hold both reports, as k3cli run --import REPORT writes them.
    const Report* base = baseline_shown();
    const std::string both = base ? " and the baseline's (k3cli run ... --import)" : "";
    ImGui::BeginDisabled(!has_report_);
    if (ImGui::Button("JSON")) {
        const std::string json = base ? report_pair_json(report_, *base) : report_json();
        notify(platform::save_file("k3-" + e.id + ".json", "application/json", json + "\n"));
    }
    remember_rect("export_json");
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        tooltip_wrapped("Export the report" + both + " as JSON (the schema of k3cli run --json)");
    ImGui::SameLine();
    if (ImGui::Button("CSV"))
        notify(platform::save_file("k3-" + e.id + ".csv", "text/csv",
                                   base ? report_pair_csv(report_, *base) : report_csv(report_)));
    remember_rect("export_csv");
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        tooltip_wrapped("Export the report" + both + " as CSV (k3cli run --csv)");
    ImGui::EndDisabled();
    ImGui::SameLine();
    const bool import = ImGui::Button("Import");
    remember_rect("import");
    if (import)
        if (const std::string how = platform::pick_import_file(); !how.empty()) notify(how);
    if (ImGui::IsItemHovered())
        tooltip_wrapped(
            "Bring your own data: a request trace in the Mooncake format (.jsonl), a hybrid model's "
            "Hugging Face config.json (a custom model in module 2), or a report exported earlier "
            "(the baseline to compare with). Or drop the file onto the page.");
    ImGui::SameLine();
    if (ImGui::Button("PNG")) want_png = true;
    if (ImGui::IsItemHovered()) tooltip_wrapped("Save a picture of this view");
    ImGui::SameLine();
    if (pin_.module) {
        const bool off = ImGui::Button("Unpin");
        remember_rect("pin");
        if (off) unpin();
        if (ImGui::IsItemHovered()) tooltip_wrapped("Stop comparing with the baseline");
        return;
    }
    ImGui::BeginDisabled(!has_report_ || report_stale_ || bool(run_));
    const bool pin = ImGui::Button("Pin");
    remember_rect("pin");
    if (pin) pin_current();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        tooltip_wrapped(
            "Pin this run as the baseline, then change parameters: the cards, plots and tables "
            "show both, and the link restores both");
    ImGui::EndDisabled();
}

void App::draw_status() {
    const Theme& t = theme();
    if (!data_error_.empty()) draw_message(t.bad, data_error_);
    if (run_ || baseline_run_ || pending_start_ || !waiting_data_.empty()) {
        const float bw = std::max(t.px(120), ImGui::GetContentRegionAvail().x - t.px(90));
        std::string label = pending_start_ ? "waiting for the sliders to settle" : stage_;
        if (!waiting_data_.empty()) label = "loading " + waiting_data_.front() + " from the page's server";
        if (run_ || baseline_run_) label += "  " + format_sig(progress_ * 100, 3) + " %";
        ImGui::ProgressBar(float(progress_), ImVec2(bw, 0), label.c_str());
        ImGui::SameLine();
        const bool cancel = ImGui::Button("Cancel", ImVec2(-1, 0));
        remember_rect("cancel");
        if (cancel) {
            run_.reset();
            baseline_run_.reset();
            pending_start_ = false;
            waiting_data_.clear();
            report_stale_ = has_report_;
            notify("Run cancelled");
        }
        return;
    }
    const ParamIssue* refusal = nullptr;
    for (const auto& i : validation_)
        if (!refusal && i.level == ParamIssue::error) refusal = &i;
    if (refusal) {
        // Said here, above the report, as well as in the parameter panel: the run did not start.
        draw_message(t.bad,
                     "Not run: " + refusal->message + "." +
                         (has_report_ ? " The report below is the last result, for other parameters." : ""));
        return;
    }
    if (report_stale_ || !has_report_) {
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(t.warn), "%s",
                           has_report_ ? "The parameters changed since this report." : "No report yet.");
        ImGui::SameLine();
        if (ImGui::Button("Run")) start_run();
    }
}

void App::draw_module(const Experiment& e) {
    const Theme& t = theme();
    // Header: component, title, purpose; toolbar on the right.
    ImGui::PushFont(fonts().small);
    ImGui::TextDisabled("Module %d  ·  %s", e.number, component_title(e.component));
    ImGui::PopFont();
    ImGui::PushFont(fonts().title);
    ImGui::TextUnformatted(e.title.c_str());
    ImGui::PopFont();
    const float tool_w = t.px(360);
    ImGui::SameLine(std::max(ImGui::GetCursorPosX() + t.px(20), ImGui::GetWindowWidth() - tool_w - t.px(20)));
    draw_toolbar(e);
    ImGui::PushFont(fonts().body);
    text_wrapped_colored(t.text_dim, e.purpose);
    ImGui::PopFont();
    draw_compare_bar();
    ImGui::Dummy(ImVec2(0, t.px(2)));

    if (ImGui::BeginTabBar("tabs")) {
        const char* names[3] = {"Results", "How it works", "Where it doesn't pay"};
        const char* keys[3] = {"", "how", "limits"};
        for (int i = 0; i < 3; ++i) {
            const ImGuiTabItemFlags f = tab_request_ == i ? ImGuiTabItemFlags_SetSelected : 0;
            if (ImGui::BeginTabItem(names[i], nullptr, f)) {
                if (tab_request_ < 0 && tab_ != keys[i]) {
                    tab_ = keys[i];
                    publish_hash();
                }
                if (i == 0) {
                    // Parameters on the left, report on the right (stacked when narrow).
                    const float avail = ImGui::GetContentRegionAvail().x;
                    const bool wide = avail > t.px(760);
                    const float pw = wide ? std::clamp(avail * 0.27f, t.px(250), t.px(330)) : avail;
                    ImGui::BeginChild("params", ImVec2(pw, wide ? 0 : t.px(260)), true);
                    ParamPanelResult pr = draw_param_panel(e, params_, validation_);
                    widget_rects_.insert(pr.rects.begin(), pr.rects.end());
                    ImGui::EndChild();
                    if (pr.changed) params_changed(!pr.dragging);
                    if (wide) ImGui::SameLine();
                    ImGui::PushStyleColor(ImGuiCol_ChildBg, t.bg);
                    ImGui::BeginChild("report", ImVec2(0, 0), false);
                    draw_status();
                    if (has_report_ && report_.module == e.id)
                        for (const auto& [key, rect] :
                             draw_report(report_, report_stale_ || bool(run_), e, baseline_shown()))
                            widget_rects_[key] = rect;
                    ImGui::EndChild();
                    ImGui::PopStyleColor();
                } else {
                    ImGui::BeginChild(keys[i], ImVec2(0, 0), false);
                    ImGui::Dummy(ImVec2(0, t.px(4)));
                    draw_doc(i == 1 ? e.how_it_works : e.where_it_does_not_pay,
                             has_report_ && report_.module == e.id ? &report_ : nullptr);
                    ImGui::EndChild();
                }
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
    tab_request_ = -1;
}

}  // namespace k3::ui
