// Draws a Report: headline figures, checks, plots, grids, heat maps, tables, notes, timing.
#pragma once

#include "core/experiments/report.h"

namespace k3::ui {

// `stale`: the parameters changed since this report was made (drawn dimmed).
void draw_report(const Report& r, bool stale);

}  // namespace k3::ui
