#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "ui/theme.h"
#include "ui/views/views.h"
#include "ui/widgets.h"

namespace k3::ui {

// Category colours: "free"/"empty"-like categories get a neutral colour, others the palette.
static ImU32 category_color(const CellGrid& g, int cat) {
    const Theme& t = theme();
    if (cat < 0 || size_t(cat) >= g.categories.size()) return t.panel_alt;
    const std::string& name = g.categories[size_t(cat)];
    if (name == "free" || name == "empty") return with_alpha(t.text_dim, 0.15f);
    if (name == "padding" || name == "waste") return with_alpha(t.bad, 0.55f);
    int k = 0;
    for (int i = 0; i < cat; ++i) {
        const std::string& n = g.categories[size_t(i)];
        k += !(n == "free" || n == "empty" || n == "padding" || n == "waste");
    }
    return series_color(k);
}

void draw_cell_grid(const CellGrid& g, int index) {
    const Theme& t = theme();
    ImGui::PushID(index);
    // Legend.
    ImGui::PushFont(fonts().small);
    for (size_t c = 0; c < g.categories.size(); ++c) {
        if (c) ImGui::SameLine(0, t.px(14));
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float s = ImGui::GetTextLineHeight() * 0.7f;
        ImGui::GetWindowDrawList()->AddRectFilled(
            ImVec2(p.x, p.y + s * 0.2f), ImVec2(p.x + s, p.y + s * 1.2f), category_color(g, int(c)), t.px(2));
        ImGui::Dummy(ImVec2(s + t.px(4), s));
        ImGui::SameLine(0, 0);
        ImGui::TextUnformatted(g.categories[c].c_str());
    }
    ImGui::PopFont();

    const int cols = std::max(1, g.columns);
    const int n = int(g.cells.size());
    const int rows = (n + cols - 1) / cols;
    const float avail = ImGui::GetContentRegionAvail().x;
    const float cell = std::clamp(std::floor(avail / float(cols)), t.px(3), t.px(18));
    const float gap = cell >= t.px(8) ? t.px(1) : 0.0f;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("grid", ImVec2(cell * float(cols), cell * float(rows)));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int i = 0; i < n; ++i) {
        const float x = p0.x + float(i % cols) * cell, y = p0.y + float(i / cols) * cell;
        dl->AddRectFilled(ImVec2(x, y), ImVec2(x + cell - gap, y + cell - gap),
                          category_color(g, g.cells[size_t(i)]));
    }
    if (hovered) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int cx = int((m.x - p0.x) / cell), cy = int((m.y - p0.y) / cell);
        const int i = cy * cols + cx;
        if (cx >= 0 && cx < cols && i >= 0 && i < n) {
            const int cat = g.cells[size_t(i)];
            std::string tip =
                "cell " + std::to_string(i) + ": " +
                (cat >= 0 && size_t(cat) < g.categories.size() ? g.categories[size_t(cat)] : "empty");
            if (size_t(i) < g.cell_labels.size() && !g.cell_labels[size_t(i)].empty())
                tip += "\n" + g.cell_labels[size_t(i)];
            tooltip_wrapped(tip);
        }
    }
    ImGui::PopID();
}

}  // namespace k3::ui
