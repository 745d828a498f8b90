// What the user changes in a chart: zoom and pan by wheel and drag, reset by double-click, series
// hidden from the legend, axis scales switched. imgui_internal.h gives the two things the public API
// has not: taking the mouse wheel from the page (key ownership), and seeing that the page is being
// scrolled (a wheel that scrolls the page past a chart must not zoom the chart).
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ui/plot_chart.h"

namespace k3::ui::plot {

namespace {

constexpr double kWheelZoom = 0.8;  // the axis length after one wheel notch up

// ImGui keeps the wheel on the window it scrolls for a moment (its "wheeling window").
bool page_is_scrolling() {
    const ImGuiWindow* w = GImGui->WheelingWindow;
    return w != nullptr && w != ImGui::GetCurrentWindow();
}

// The axes that the wheel or a drag at p acts on: 1 x (its tick labels), 2 y, 3 both (the plot area).
int axes_at(const Chart& c, ImVec2 p) {
    if (!c.has_area) return 0;
    if (c.x_band.contains(p)) return 1;
    if (c.y_band.contains(p)) return 2;
    return Box{c.a0, c.a1}.contains(p) ? 3 : 0;
}

// Zoom around the mouse; Shift keeps y as it is.
void wheel(const Chart& c, View& v) {
    const ImGuiIO& io = ImGui::GetIO();
    // Browsers may turn Shift+wheel into a horizontal wheel.
    const float notches = io.MouseWheel != 0 ? io.MouseWheel : io.KeyShift ? io.MouseWheelH : 0;
    int axes = notches != 0 ? axes_at(c, io.MousePos) : 0;
    if (axes == 3 && io.KeyShift) axes = 1;
    const double factor = std::pow(kWheelZoom, double(notches));
    if (axes & 1) {
        v.x = zoom_axis(c.ax, (io.MousePos.x - c.a0.x) / (c.a1.x - c.a0.x), factor);
        v.zoomed_x = true;
    }
    if (axes & 2) {
        v.y = zoom_axis(c.ay, (c.a1.y - io.MousePos.y) / (c.a1.y - c.a0.y), factor);
        v.zoomed_y = true;
    }
}

// The view follows the mouse from where the drag started (exact however many frames it takes).
void pan(const Chart& c, View& v) {
    const ImGuiIO& io = ImGui::GetIO();
    const float dx = io.MousePos.x - io.MouseClickedPos[0].x, dy = io.MousePos.y - io.MouseClickedPos[0].y;
    if (v.drag_axes & 1) {
        v.x = pan_axis(v.drag_x, -dx / (c.a1.x - c.a0.x));
        v.zoomed_x = true;
    }
    if (v.drag_axes & 2) {
        v.y = pan_axis(v.drag_y, dy / (c.a1.y - c.a0.y));
        v.zoomed_y = true;
    }
}

// A scale switch: log only where allowed; a new scale drops the zoom, whose range was in the other.
void switch_scale(int& scale, bool& zoomed, bool now_log, bool to_log, bool allowed) {
    if (now_log == to_log || (to_log && !allowed)) return;
    scale = to_log ? 1 : 0;
    zoomed = false;
}

void click(const Chart& c, View& v, ImVec2 p) {
    for (const Entry& e : c.entries)
        if (e.box.contains(p)) {
            const auto it = std::find(v.hidden.begin(), v.hidden.end(), *e.name);
            if (it == v.hidden.end())
                v.hidden.push_back(*e.name);
            else
                v.hidden.erase(it);
        }
    if (c.x_lin.contains(p) || c.x_log.contains(p))
        switch_scale(v.scale_x, v.zoomed_x, c.ax.log, c.x_log.contains(p), c.log_x_allowed);
    if (c.y_lin.contains(p) || c.y_log.contains(p))
        switch_scale(v.scale_y, v.zoomed_y, c.ay.log, c.y_log.contains(p), c.log_y_allowed);
    if (c.reset.contains(p)) v.zoomed_x = v.zoomed_y = false;
}

// A hand over what can be clicked, arrows while panning.
void set_cursor(const Chart& c, const View& v) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    if (c.active && v.drag_axes && ImGui::IsMouseDragging(0)) {
        ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeAll);
        return;
    }
    bool link = c.x_lin.contains(m) || c.x_log.contains(m) || c.y_lin.contains(m) || c.y_log.contains(m) ||
                c.reset.contains(m);
    for (const Entry& e : c.entries) link = link || e.box.contains(m);
    if (link) ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
}

}  // namespace

void read_button(Chart& c, bool pressed) {
    const ImGuiIO& io = ImGui::GetIO();
    c.id = ImGui::GetItemID();
    c.hovered = ImGui::IsItemHovered();
    c.active = ImGui::IsItemActive();
    c.activated = ImGui::IsItemActivated();
    // A press and release in place; a release after a drag ends a pan.
    c.clicked = pressed && io.MouseDragMaxDistanceSqr[0] <= io.MouseDragThreshold * io.MouseDragThreshold;
    c.double_clicked = c.hovered && ImGui::IsMouseDoubleClicked(0);
    if (!page_is_scrolling()) {
        ImGui::SetItemKeyOwner(ImGuiKey_MouseWheelY);
        ImGui::SetItemKeyOwner(ImGuiKey_MouseWheelX);
    }
}

View& view_for(const Chart& c) {
    static std::unordered_map<ImGuiID, View> views;  // one per chart ever drawn: a few dozen
    View& v = views[c.id];
    ValueRange x, y;
    size_t points = 0;
    for (const Line& l : c.lines) {
        x.add(l.x);
        y.add(l.y);
        points += l.s->y.size();
    }
    if (x == v.data_x && y == v.data_y && points == v.data_points) return v;
    v.data_x = x;
    v.data_y = y;
    v.data_points = points;
    v.zoomed_x = v.zoomed_y = false;
    return v;
}

void handle_input(const Chart& c, View& v) {
    const ImGuiIO& io = ImGui::GetIO();
    if (c.clicked) click(c, v, io.MouseClickedPos[0]);
    if (c.activated) {
        v.drag_axes = axes_at(c, io.MousePos);
        v.drag_x = c.ax;
        v.drag_y = c.ay;
    }
    if (c.double_clicked && axes_at(c, io.MousePos)) {
        v.zoomed_x = v.zoomed_y = false;
        v.drag_axes = 0;  // the second press does not start a pan from the old view
    }
    if (c.active && v.drag_axes && ImGui::IsMouseDragging(0)) pan(c, v);
    if (c.hovered && !page_is_scrolling()) wheel(c, v);
    if (c.hovered || c.active) set_cursor(c, v);
}

}  // namespace k3::ui::plot
