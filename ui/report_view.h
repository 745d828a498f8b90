// Draws a Report: headline figures, checks, plots, grids, heat maps, tables, notes, timing.
#pragma once

#include "core/experiments/experiment.h"
#include "core/experiments/report.h"

namespace k3::ui {

// `stale`: the parameters changed since this report was made (drawn dimmed). `e`, the module that
// made it, says how each check can be made to fail (its falsifiers).
void draw_report(const Report& r, bool stale, const Experiment& e);

}  // namespace k3::ui
