// A token tree (radix prefix cache): one row per node in depth-first order, the node's span of
// token positions across, a connector from the parent's end, markers at checkpoint positions.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "ui/plot.h"
#include "ui/theme.h"
#include "ui/views/views.h"
#include "ui/widgets.h"

namespace k3::ui {

void draw_tree(const Tree& tr, int index) {
    const Theme& t = theme();
    ImGui::PushID(index);
    const int n = int(tr.nodes.size());
    if (n == 0) {
        ImGui::TextDisabled("(empty tree)");
        ImGui::PopID();
        return;
    }
    double xmax = 1;
    for (const auto& nd : tr.nodes) xmax = std::max(xmax, nd.end);
    legend_row(tr.categories);
    ImGui::PushFont(fonts().small);
    if (!tr.marker_label.empty()) {
        ImGui::SameLine(0, t.px(14));
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float r = t.px(4), cy = p.y + ImGui::GetTextLineHeight() * 0.5f;
        ImGui::GetWindowDrawList()->AddQuadFilled(ImVec2(p.x + r, cy - r), ImVec2(p.x + 2 * r, cy),
                                                  ImVec2(p.x + r, cy + r), ImVec2(p.x, cy), t.text);
        ImGui::Dummy(ImVec2(2 * r + t.px(4), r));
        ImGui::SameLine(0, 0);
        ImGui::TextUnformatted(tr.marker_label.c_str());
    }
    ImGui::PopFont();

    const float row = std::clamp(t.px(320) / float(n), t.px(4), t.px(14));
    const float avail = ImGui::GetContentRegionAvail().x;
    const float left = t.px(8), right = t.px(16);
    const float height = row * float(n) + t.px(26);
    ImGui::BeginChild("tree", ImVec2(avail, std::min(height, t.px(420))), false);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x - left - right;
    ImGui::InvisibleButton("area", ImVec2(w + left + right, height));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    auto sx = [&](double v) { return p0.x + left + float(v / xmax) * w; };
    const float bar = std::max(row - t.px(2), t.px(2));
    for (int i = 0; i < n; ++i) {
        const TreeNode& nd = tr.nodes[size_t(i)];
        const float y = p0.y + float(i) * row;
        if (nd.parent >= 0 && nd.parent < i) {
            const float py = p0.y + float(nd.parent) * row + bar * 0.5f;
            dl->AddLine(ImVec2(sx(nd.start), py), ImVec2(sx(nd.start), y + bar * 0.5f), t.axis);
        }
        const ImU32 c = series_color(nd.category);
        dl->AddRectFilled(ImVec2(sx(nd.start), y),
                          ImVec2(std::max(sx(nd.end), sx(nd.start) + t.px(1)), y + bar), c, t.px(1));
        for (double m : nd.markers) {
            const float mx = sx(m), my = y + bar * 0.5f, r = std::max(bar * 0.5f, t.px(3));
            dl->AddQuadFilled(ImVec2(mx, my - r), ImVec2(mx + r, my), ImVec2(mx, my + r), ImVec2(mx - r, my),
                              t.text);
        }
    }
    // Token axis.
    const float ay = p0.y + float(n) * row + t.px(4);
    dl->AddLine(ImVec2(sx(0), ay), ImVec2(sx(xmax), ay), t.axis);
    ImGui::PushFont(fonts().small);
    for (double v : nice_ticks(0, xmax, std::max(2, int(w / t.px(90))), false)) {
        const std::string s = format_tick(v, "");
        dl->AddText(ImVec2(sx(v) - ImGui::CalcTextSize(s.c_str()).x * 0.5f, ay + t.px(2)), t.text_dim,
                    s.c_str());
    }
    ImGui::PopFont();
    if (hovered) {
        const int i = int((ImGui::GetIO().MousePos.y - p0.y) / row);
        if (i >= 0 && i < n) {
            const TreeNode& nd = tr.nodes[size_t(i)];
            std::string tip = nd.label.empty() ? "node " + std::to_string(i) : nd.label;
            tip += "\n" + tr.x_label + " " + format_grouped(nd.start) + " to " + format_grouped(nd.end);
            if (!nd.markers.empty())
                tip += "\n" + std::to_string(nd.markers.size()) + " " + tr.marker_label + "(s)";
            tooltip_wrapped(tip);
        }
    }
    ImGui::EndChild();
    ImGui::PopID();
}

}  // namespace k3::ui
