// Charts drawn on ImGui's draw list (ImPlot is in neither Debian nor npm): lines, steps, points
// and grouped bars, linear or log axes, ticks with unit-aware labels, legend, hover read-out.
#pragma once

#include <string>
#include <vector>

#include "core/experiments/report.h"

namespace k3::ui {

// One chart of series that share axes, as wide as the available region. `id` must be unique in
// the window. Axis scales and labels come from the first series.
void draw_plot(const char* id, const std::string& title, const std::vector<const Series*>& series,
               float height);

// Compact tick text of a value in a unit ("64 MiB", "1M", "37 %").
std::string format_tick(double v, const std::string& unit);

// Tick positions: linear "nice" steps (1, 2, 5 x 10^k) or decades (with 2 and 5 between when
// there are few decades); with `binary` on a log axis, powers of two (1 KiB, 1 MiB, ... for bytes).
std::vector<double> nice_ticks(double lo, double hi, int target, bool log_scale, bool binary = false);

}  // namespace k3::ui
