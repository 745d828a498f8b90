#include "ui/widgets.h"

#include "core/base/numfmt.h"
#include "core/experiments/compare.h"
#include "ui/theme.h"

namespace k3::ui {

void section_heading(const char* text) {
    const Theme& t = theme();
    ImGui::Dummy(ImVec2(0, t.px(2)));
    ImGui::PushFont(fonts().bold);
    ImGui::PushStyleColor(ImGuiCol_Text, t.text_dim);
    ImGui::TextUnformatted(text);
    ImGui::PopStyleColor();
    ImGui::PopFont();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddLine(p, ImVec2(p.x + ImGui::GetContentRegionAvail().x, p.y), t.border);
    ImGui::Dummy(ImVec2(0, t.px(3)));
}

void tooltip_wrapped(const std::string& text) {
    if (text.empty()) return;
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28.0f);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
}

void help_marker(const std::string& text) {
    if (text.empty()) return;
    ImGui::SameLine();
    ImGui::TextDisabled("(?)");
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_DelayShort)) tooltip_wrapped(text);
}

void headline_card(const Scalar& s, float width, const Scalar* baseline) {
    const Theme& t = theme();
    const Fonts& f = fonts();
    ImGui::PushID(s.key.c_str());
    const float line = baseline ? t.px(18) : 0;  // the baseline's value and the difference
    const float h = t.px(88) + line;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("card", ImVec2(width, h));
    if (ImGui::IsItemHovered()) {
        std::string tip = s.label + "\n" + format_with_unit(s.value, s.unit);
        if (s.unit == "B") tip += " (" + format_grouped(s.value) + " B)";
        tip += "\nreport key: " + s.key;
        if (baseline) tip += "\nbaseline: " + format_with_unit(baseline->value, baseline->unit);
        if (!s.help.empty()) tip += "\n\n" + s.help;
        tooltip_wrapped(tip);
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, ImVec2(p0.x + width, p0.y + h), t.panel, t.px(6));
    dl->AddRect(p0, ImVec2(p0.x + width, p0.y + h), t.border, t.px(6));
    dl->AddRectFilled(p0, ImVec2(p0.x + t.px(3), p0.y + h), t.accent, t.px(6), ImDrawFlags_RoundCornersLeft);
    const float pad = t.px(12);
    ImGui::PushFont(f.small);
    dl->PushClipRect(p0, ImVec2(p0.x + width - t.px(4), p0.y + h), true);
    // The label wraps onto at most two lines; a longer one is cut with an ellipsis (full text in the
    // tooltip).
    const float wrap = width - 2 * pad;
    const std::string label = ellipsize(s.label, wrap, 2);
    dl->AddText(nullptr, 0, ImVec2(p0.x + pad, p0.y + t.px(8)), t.text_dim, label.c_str(), nullptr, wrap);
    ImGui::PopFont();
    const auto [value, unit] = value_and_unit(s);
    ImGui::PushFont(f.headline);
    const ImVec2 vs = ImGui::CalcTextSize(value.c_str());
    const float bottom = p0.y + h - line;
    dl->AddText(ImVec2(p0.x + pad, bottom - vs.y - t.px(10)), t.text, value.c_str());
    ImGui::PopFont();
    if (!unit.empty()) {
        ImGui::PushFont(f.body);
        dl->AddText(ImVec2(p0.x + pad + vs.x + t.px(6), bottom - ImGui::GetTextLineHeight() - t.px(13)),
                    t.text_dim, unit.c_str());
        ImGui::PopFont();
    }
    if (baseline) {
        ImGui::PushFont(f.small);
        const std::string was = "baseline " + format_with_unit(baseline->value, baseline->unit) + "  ";
        const std::string diff = format_difference(s.value, baseline->value, s.unit);
        const ImVec2 at(p0.x + pad, bottom - t.px(8));
        dl->AddText(at, t.text_dim, was.c_str());
        dl->AddText(ImVec2(at.x + ImGui::CalcTextSize(was.c_str()).x, at.y), t.accent, diff.c_str());
        ImGui::PopFont();
    }
    dl->PopClipRect();
    ImGui::PopID();
}

void check_row(const Check& c, const std::string& fails_if) {
    // One line per check; the detail is in the tooltip, and spelled out below when the check fails.
    const Theme& t = theme();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImGui::PushFont(fonts().small);
    const char* word = c.passed ? "PASS" : "FAIL";
    const ImVec2 ws = ImGui::CalcTextSize(word);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float lh = ImGui::GetFrameHeight();
    const ImVec2 q0(p.x, p.y + (lh - ws.y) * 0.5f - t.px(2)),
        q1(p.x + ws.x + t.px(12), p.y + (lh + ws.y) * 0.5f + t.px(2));
    const ImU32 col = c.passed ? t.good : t.bad;
    dl->AddRectFilled(q0, q1, with_alpha(col, 0.18f), t.px(8));
    dl->AddText(ImVec2(q0.x + t.px(6), q0.y + t.px(2)), col, word);
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(q1.x - q0.x + t.px(4), lh));
    ImGui::SameLine();
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(c.name.c_str());
    const std::string tip =
        c.detail + (fails_if.empty() ? "" : (c.detail.empty() ? "" : "\n\n") + ("Fails if: " + fails_if));
    if (ImGui::IsItemHovered() && !tip.empty()) tooltip_wrapped(tip);
    if (c.passed && !c.detail.empty()) {
        // The detail, shortened to what fits on the rest of the line.
        ImGui::SameLine(0, t.px(10));
        ImGui::PushFont(fonts().small);
        const float room = ImGui::GetContentRegionAvail().x;
        std::string d = c.detail;
        if (ImGui::CalcTextSize(d.c_str()).x > room) {
            while (!d.empty() && ImGui::CalcTextSize((d + "...").c_str()).x > room) d.pop_back();
            d += "...";
        }
        ImGui::AlignTextToFramePadding();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(t.text_dim), "%s", d.c_str());
        if (ImGui::IsItemHovered()) tooltip_wrapped(tip);
        ImGui::PopFont();
    }
    if (!c.passed && !c.detail.empty()) {
        ImGui::Indent(q1.x - q0.x + t.px(12));
        ImGui::PushFont(fonts().small);
        text_wrapped_colored(c.passed ? t.text_dim : t.bad, c.detail);
        ImGui::PopFont();
        ImGui::Unindent(q1.x - q0.x + t.px(12));
    }
}

void text_wrapped_colored(ImU32 color, const std::string& text) {
    ImGui::PushStyleColor(ImGuiCol_Text, color);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
}

bool banner(ImU32 color, const std::string& text, const char* id, bool dismissable) {
    const Theme& t = theme();
    bool dismissed = false;
    ImGui::PushID(id);
    ImGui::PushStyleColor(ImGuiCol_ChildBg, with_alpha(color, 0.14f));
    ImGui::PushStyleColor(ImGuiCol_Border, with_alpha(color, 0.6f));
    const float wrap = ImGui::GetContentRegionAvail().x - t.px(dismissable ? 60 : 24);
    const float h = ImGui::CalcTextSize(text.c_str(), nullptr, false, wrap).y + t.px(16);
    ImGui::BeginChild("banner", ImVec2(0, h), true, ImGuiWindowFlags_NoScrollbar);
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    if (dismissable) {
        ImGui::SameLine(ImGui::GetWindowWidth() - t.px(40));
        dismissed = ImGui::SmallButton("OK");
    }
    ImGui::EndChild();
    ImGui::PopStyleColor(2);
    ImGui::PopID();
    return dismissed;
}

void legend_row(const std::vector<std::string>& names) {
    const Theme& t = theme();
    ImGui::PushFont(fonts().small);
    for (size_t c = 0; c < names.size(); ++c) {
        if (c) ImGui::SameLine(0, t.px(14));
        ImGui::ColorButton("##legend", ImGui::ColorConvertU32ToFloat4(series_color(int(c))),
                           ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoBorder,
                           ImVec2(t.px(10), t.px(10)));
        ImGui::SameLine(0, t.px(4));
        ImGui::TextUnformatted(names[c].c_str());
    }
    ImGui::PopFont();
}

std::string ellipsize(const std::string& text, float width, int lines) {
    const float limit = ImGui::GetTextLineHeight() * (float(lines) + 0.5f);
    auto fits = [&](const std::string& t) {
        return lines <= 1 ? ImGui::CalcTextSize(t.c_str()).x <= width
                          : ImGui::CalcTextSize(t.c_str(), nullptr, false, width).y <= limit;
    };
    if (fits(text)) return text;
    std::string cut = text;
    // Drop whole UTF-8 characters (continuation bytes are 10xxxxxx).
    while (!cut.empty() && !fits(cut + "...")) {
        do cut.pop_back();
        while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80);
    }
    return cut + "...";
}

std::pair<std::string, std::string> value_and_unit(const Scalar& s) {
    std::string value = format_with_unit(s.value, s.unit);
    const size_t sp = value.rfind(' ');
    if (sp == std::string::npos || s.unit == "fraction") return {value, ""};
    return {value.substr(0, sp), value.substr(sp + 1)};
}

}  // namespace k3::ui
