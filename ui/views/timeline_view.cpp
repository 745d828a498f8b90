// Lanes over time (fleet instances): spans coloured by category, a time axis, hover labels.
#include <imgui.h>

#include <algorithm>

#include "core/base/numfmt.h"
#include "ui/plot.h"
#include "ui/theme.h"
#include "ui/views/views.h"
#include "ui/widgets.h"

namespace k3::ui {

void draw_timeline(const Timeline& tl, int index) {
    const Theme& t = theme();
    ImGui::PushID(index);
    const int lanes = int(tl.lanes.size());
    double t0 = 0, t1 = 1;
    for (const auto& s : tl.spans) t1 = std::max(t1, s.end);
    legend_row(tl.categories);
    ImGui::PushFont(fonts().small);
    float label_w = 0;
    for (const auto& l : tl.lanes) label_w = std::max(label_w, ImGui::CalcTextSize(l.c_str()).x);
    const float lane_h = t.px(lanes > 16 ? 12 : 20);
    const float avail = ImGui::GetContentRegionAvail().x;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float x0 = p0.x + label_w + t.px(10), x1 = p0.x + avail - t.px(10);
    const float h = lane_h * float(std::max(lanes, 1)) + t.px(24);
    ImGui::InvisibleButton("timeline", ImVec2(avail, h));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    auto sx = [&](double v) { return x0 + float((v - t0) / (t1 - t0)) * (x1 - x0); };
    for (int l = 0; l < lanes; ++l) {
        const float y = p0.y + float(l) * lane_h;
        if (l % 2) dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + lane_h), with_alpha(t.panel_alt, 0.6f));
        dl->AddText(ImVec2(p0.x, y + (lane_h - ImGui::GetTextLineHeight()) * 0.5f), t.text_dim,
                    tl.lanes[size_t(l)].c_str());
    }
    const Span* hit = nullptr;
    const ImVec2 m = ImGui::GetIO().MousePos;
    for (const auto& s : tl.spans) {
        if (s.lane < 0 || s.lane >= lanes) continue;
        const float y = p0.y + float(s.lane) * lane_h;
        const ImVec2 a(sx(s.start), y + t.px(2)),
            b(std::max(sx(s.end), sx(s.start) + 1.0f), y + lane_h - t.px(2));
        dl->AddRectFilled(a, b, series_color(s.category));
        if (hovered && m.x >= a.x && m.x <= b.x && m.y >= a.y && m.y <= b.y) hit = &s;
    }
    const float ay = p0.y + float(lanes) * lane_h + t.px(2);
    dl->AddLine(ImVec2(x0, ay), ImVec2(x1, ay), t.axis);
    for (double v : nice_ticks(t0, t1, std::max(2, int((x1 - x0) / t.px(90))), false)) {
        const std::string s = format_tick(v, "");
        dl->AddText(ImVec2(sx(v) - ImGui::CalcTextSize(s.c_str()).x * 0.5f, ay + t.px(2)), t.text_dim,
                    s.c_str());
    }
    ImGui::TextDisabled("%s", tl.time_label.c_str());
    ImGui::PopFont();
    if (hit) {
        std::string tip = hit->label.empty() ? std::string() : hit->label + "\n";
        if (hit->category >= 0 && size_t(hit->category) < tl.categories.size())
            tip += tl.categories[size_t(hit->category)] + ", ";
        tip += format_sig(hit->start, 4) + " to " + format_sig(hit->end, 4);
        tooltip_wrapped(tip);
    }
    ImGui::PopID();
}

}  // namespace k3::ui
