// Charts drawn on ImGui's draw list (ImPlot is in neither Debian nor npm): lines, steps, points
// and grouped bars, linear or log axes, ticks with unit-aware labels, legend, hover read-out; zoom,
// pan, scale switches and series hidden from the legend; a baseline run drawn dashed beneath.
#pragma once

#include <string>
#include <vector>

#include "core/experiments/report.h"
#include "ui/plot_math.h"

namespace k3::ui {

// One chart of series that share axes, as wide as the available region. `id` must be unique in
// the window; it also keys what the user changed in the chart (zoom, scales, hidden series), which
// lasts across frames, and the zoom until the data change. Axis scales and labels come from the
// first series. `baseline` (may be empty): a pinned run's series for the same chart, drawn dashed
// beneath the current ones in the colour of the current series of the same name; the legend and the
// hover read-out show both.
//
// Mouse: wheel zooms around the pointer (Shift: x only; over an axis's tick labels: that axis),
// drag pans, double-click resets, a click on a legend entry hides or shows that series, "lin"/"log"
// at each axis switch its scale (log only while every shown value is above 0).
void draw_plot(const char* id, const std::string& title, const std::vector<const Series*>& series,
               const std::vector<const Series*>& baseline, float height);

}  // namespace k3::ui
