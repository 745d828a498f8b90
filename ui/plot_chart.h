// The chart widget's insides, shared by its files and by nothing else: plot.cpp lays a chart out and
// draws its frame, axes and legend; plot_series.cpp draws the data and the hover read-out;
// plot_input.cpp keeps what the user changed in each chart and reads the mouse.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "core/experiments/report.h"
#include "ui/plot_math.h"

namespace k3::ui::plot {

// A screen rectangle that something reacts in.
struct Box {
    ImVec2 min{0, 0}, max{0, 0};
    bool contains(ImVec2 p) const { return p.x >= min.x && p.x <= max.x && p.y >= min.y && p.y <= max.y; }
};

// What the user changed in one chart, kept across frames by the chart's id.
struct View {
    PlotAxis x, y;                            // the user's ranges, on the axes zoomed or panned
    bool zoomed_x = false, zoomed_y = false;  // otherwise the axis fits the shown series
    int scale_x = -1, scale_y = -1;           // -1: the series' own (log_x, log_y); 0: linear; 1: log
    std::vector<std::string> hidden;          // legend entries switched off, by series name
    ValueRange data_x, data_y;                // all the data when the view was last zoomed: new
    size_t data_points = 0;                   // data (another report) reset the zoom
    int drag_axes = 0;                        // what the drag in progress pans: 1 x, 2 y, 3 both
    PlotAxis drag_x, drag_y;                  // the axes when it started
};

// A legend entry: one series name, drawn from the current run, the baseline or both.
struct Entry {
    const std::string* name = nullptr;
    int color = 0;  // series_color index
    bool current = false, baseline = false;
    bool hidden = false;
    Box box;  // where the legend shows it
};

// A series as the chart draws it.
struct Line {
    const Series* s = nullptr;
    int entry = 0;  // its legend entry
    bool baseline = false;
    ValueRange x, y;  // its finite coordinates
};

// One chart being drawn: its series, axes and screen layout.
struct Chart {
    const Series& s0;  // the first series: style, units and labels of the chart
    bool bars = false, categorical = false;
    std::vector<Entry> entries;
    std::vector<Line> lines;  // the baseline's first, so that they lie beneath
    bool has_baseline = false;
    PlotAxis ax, ay;
    bool log_x_allowed = true, log_y_allowed = true;  // all shown values > 0, or the series is log
    ValueRange shown_x, shown_y;                      // every finite value of the shown series
    size_t ncat = 0;                                  // categories (bars, named x values)
    ImDrawList* dl = nullptr;
    ImVec2 p0, p1;                   // the frame
    ImVec2 a0, a1;                   // the plot area (top left, bottom right)
    bool has_area = false;           // the frame had room for one (else only the title and legend show)
    Box x_band, y_band;              // the tick labels: the wheel and drags there act on one axis
    Box x_lin, x_log, y_lin, y_log;  // the scale switches (empty when the axis has none)
    Box help, reset;                 // "(?)" and "reset zoom" (empty when not zoomed)
    // The button covering the chart (its id keys the view), as read right after it was submitted.
    ImGuiID id = 0;
    bool hovered = false, active = false, activated = false, clicked = false, double_clicked = false;

    // Data to screen per axis: a0 + (linear(v) - u0) * k, set once the axes and the plot area are.
    double ux0 = 0, ukx = 1, uy0 = 0, uky = 1;
    void set_transform() {
        ux0 = ax.to_linear(ax.lo);
        ukx = (a1.x - a0.x) / (ax.to_linear(ax.hi) - ux0);
        uy0 = ay.to_linear(ay.lo);
        uky = (a1.y - a0.y) / (ay.to_linear(ay.hi) - uy0);
    }
    // Screen coordinates of data values: doubles for data (any zoom), floats for what is on screen.
    ScreenPoint at(double x, double y) const {
        return {a0.x + (ax.to_linear(x) - ux0) * ukx, a1.y - (ay.to_linear(y) - uy0) * uky};
    }
    float sx(double v) const { return float(a0.x + (ax.to_linear(v) - ux0) * ukx); }
    float sy(double v) const { return float(a1.y - (ay.to_linear(v) - uy0) * uky); }
    double x_of(const Series& s, size_t i) const { return categorical ? double(i) : s.x[i]; }
    bool drawable(const Series& s, size_t i) const { return ax.valid(x_of(s, i)) && ay.valid(s.y[i]); }
    bool shown(const Line& l) const { return !entries[size_t(l.entry)].hidden; }
};

// ---- plot_series.cpp ----------------------------------------------------------------------------
void draw_series(const Chart& c);
// The read-out at mouse position m: a vertical line, markers, and a tooltip with every shown
// series' value (and the baseline's beside it).
void draw_hover(const Chart& c, ImVec2 m);
// A short sample of a line for legends, solid or dashed.
void draw_line_sample(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, bool dashed);

// ---- plot_input.cpp -----------------------------------------------------------------------------
// Reads the chart's covering button, submitted last, and claims the mouse wheel from the page while
// the chart is hovered (unless the page is being scrolled).
void read_button(Chart& c, bool pressed);
// The chart's view, its zoom reset when the data differ from those it was made on (c.lines).
View& view_for(const Chart& c);
// Wheel, drags and clicks on this frame's layout; they change what the next frame shows.
void handle_input(const Chart& c, View& v);

}  // namespace k3::ui::plot
