// The generic parameter panel: one widget per declared parameter (slider with units and log scale,
// combo, checkbox, text), grouped, with help tooltips and reset buttons.
#include "ui/param_panel.h"

#include <imgui.h>

#include <cmath>
#include <cstring>

#include "core/base/numfmt.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

static bool slider(const ParamSpec& s, Params& p, bool& active) {
    double v = p.num(s.key);
    const double lo = s.min, hi = s.max;
    ImGuiSliderFlags flags = ImGuiSliderFlags_AlwaysClamp;
    if (s.log_scale) flags |= ImGuiSliderFlags_Logarithmic;
    // The slider shows our own text (no printf specifiers), formatted for the unit.
    std::string fmt;
    if (s.unit == "fraction")
        fmt = format_sig(v * 100, 3) + " %";
    else if (s.unit == "B")
        fmt = format_bytes(v);
    else
        fmt = (s.kind == ParamKind::integer ? format_grouped(v) : format_sig(v, 4)) +
              (s.unit.empty() ? "" : " " + s.unit);
    // '%' must be escaped in ImGui's format string.
    std::string esc;
    for (char c : fmt) esc += c == '%' ? std::string("%%") : std::string(1, c);
    ImGui::SetNextItemWidth(-1);
    const bool changed =
        ImGui::SliderScalar(("##" + s.key).c_str(), ImGuiDataType_Double, &v, &lo, &hi, esc.c_str(), flags);
    active = ImGui::IsItemActive();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_DelayNormal) && !active)
        tooltip_wrapped((s.help.empty() ? "" : s.help + "\n\n") + "Range " + s.format(s.min) + " to " +
                        s.format(s.max) + (s.unit.empty() ? "" : " " + s.unit) +
                        (s.log_scale ? " (log scale)" : "") + ". Ctrl+click to type a value.");
    if (changed) {
        const double before = p.num(s.key);
        p.set_number(s.key, v);
        return p.num(s.key) != before;
    }
    return false;
}

static bool choice(const ParamSpec& s, Params& p) {
    bool changed = false;
    const std::string cur = p.str(s.key);
    ImGui::SetNextItemWidth(-1);
    if (ImGui::BeginCombo(("##" + s.key).c_str(), s.label_of(cur).c_str())) {
        for (const auto& c : s.choices) {
            const bool sel = c == cur;
            if (ImGui::Selectable(s.label_of(c).c_str(), sel) && !sel) {
                p.set_text(s.key, c);
                changed = true;
            }
            if (sel) ImGui::SetItemDefaultFocus();
        }
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_DelayNormal)) tooltip_wrapped(s.help);
    return changed;
}

static bool text_param(const ParamSpec& s, Params& p) {
    bool changed = false;
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s", p.str(s.key).c_str());
    const float combo_w = s.choices.empty() ? 0 : ImGui::GetFrameHeight();
    ImGui::SetNextItemWidth(-1 - combo_w - (combo_w > 0 ? ImGui::GetStyle().ItemInnerSpacing.x : 0));
    if (ImGui::InputText(("##" + s.key).c_str(), buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue) &&
        buf[0]) {
        p.set_text(s.key, buf);
        changed = true;
    }
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_DelayNormal))
        tooltip_wrapped(s.help + "\nPress Enter to apply.");
    if (!s.choices.empty()) {
        ImGui::SameLine(0, ImGui::GetStyle().ItemInnerSpacing.x);
        if (ImGui::BeginCombo(("##sugg" + s.key).c_str(), nullptr,
                              ImGuiComboFlags_NoPreview | ImGuiComboFlags_PopupAlignLeft)) {
            for (const auto& c : s.choices)
                if (ImGui::Selectable(c.c_str(), c == p.str(s.key))) {
                    p.set_text(s.key, c);
                    changed = true;
                }
            ImGui::EndCombo();
        }
    }
    return changed;
}

ParamPanelResult draw_param_panel(const Experiment& e, Params& p, const std::vector<ParamIssue>& issues) {
    const Theme& t = theme();
    ParamPanelResult r;
    for (const auto& i : issues)
        text_wrapped_colored(i.level == ParamIssue::error ? t.bad : t.warn,
                             (i.level == ParamIssue::error ? "Error: " : "Note: ") + i.message);

    std::string group = "\x01";
    for (const auto& s : e.params) {
        if (s.group != group) {
            group = s.group;
            section_heading(group.empty() ? "Parameters" : group.c_str());
        }
        ImGui::PushID(s.key.c_str());
        const bool active = p.is_active(s);
        ImGui::BeginDisabled(!active);
        // Label row: label, unit-less help marker, reset button on the right when changed.
        ImGui::AlignTextToFramePadding();
        ImGui::TextUnformatted(s.label.c_str());
        if (ImGui::IsItemHovered(ImGuiHoveredFlags_DelayShort)) {
            std::string tip = s.help;
            tip += (tip.empty() ? "" : "\n\n");
            tip += "Key: " + s.key;
            if (!active) tip += "\nOnly used when " + s.active_text() + ".";
            tooltip_wrapped(tip);
        }
        if (!p.is_default(s.key)) {
            ImGui::SameLine(ImGui::GetContentRegionAvail().x + ImGui::GetCursorPosX() - t.px(44));
            ImGui::PushFont(fonts().small);
            if (ImGui::SmallButton("reset")) {
                p.reset(s.key);
                r.changed = true;
            }
            if (ImGui::IsItemHovered())
                tooltip_wrapped("Back to the default, " + (s.is_textual() ? s.def_text : s.format(s.def)));
            ImGui::PopFont();
        }
        bool dragging = false;
        switch (s.kind) {
            case ParamKind::integer:
            case ParamKind::real: r.changed |= slider(s, p, dragging); break;
            case ParamKind::choice: r.changed |= choice(s, p); break;
            case ParamKind::text: r.changed |= text_param(s, p); break;
            case ParamKind::flag: {
                bool b = p.flag(s.key);
                if (ImGui::Checkbox(("##" + s.key).c_str(), &b)) {
                    p.set_number(s.key, b ? 1 : 0);
                    r.changed = true;
                }
                ImGui::SameLine();
                ImGui::TextDisabled("%s", b ? "on" : "off");
                break;
            }
        }
        r.dragging |= dragging;
        const ImVec2 m0 = ImGui::GetItemRectMin(), m1 = ImGui::GetItemRectMax();
        r.rects[s.key] = {m0.x, m0.y, m1.x - m0.x, m1.y - m0.y};
        ImGui::EndDisabled();
        ImGui::PopID();
    }
    ImGui::Dummy(ImVec2(0, t.px(6)));
    bool any_changed = false;
    for (const auto& s : e.params) any_changed |= !p.is_default(s.key);
    ImGui::BeginDisabled(!any_changed);
    if (ImGui::Button("Reset all", ImVec2(-1, 0))) {
        for (const auto& s : e.params) p.reset(s.key);
        r.changed = true;
    }
    ImGui::EndDisabled();
    return r;
}

}  // namespace k3::ui
