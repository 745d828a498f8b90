// Draws a Report: headline figures, checks, plots, grids, heat maps, tables, notes, timing.
#pragma once

#include <array>
#include <map>
#include <string>

#include "core/experiments/experiment.h"
#include "core/experiments/report.h"

namespace k3::ui {

// `stale`: the parameters changed since this report was made (drawn dimmed). `e`, the module that
// made it, says how each check can be made to fail (its falsifiers).
// `baseline` (may be null): a pinned run of the same module, whose series the plots draw dashed
// beneath this report's.
// Returns the screen rectangles of the check rows, by "check:<key>" (tests find them through the
// page's widget lookup).
std::map<std::string, std::array<float, 4>> draw_report(const Report& r, bool stale, const Experiment& e,
                                                        const Report* baseline = nullptr);

}  // namespace k3::ui
