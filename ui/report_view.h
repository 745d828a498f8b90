// Draws a Report: headline figures, the checks in one line, the module's views and plots, tables,
// other figures, notes, timing.
#pragma once

#include <array>
#include <map>
#include <string>

#include "core/experiments/experiment.h"
#include "core/experiments/report.h"

namespace k3::ui {

// `stale`: the parameters changed since this report was made (drawn dimmed). `e`, the module that
// made it, says how each check can be made to fail (its falsifiers).
// `baseline`: a pinned run of the same module to show beside it (compare mode: cards, tables, figures,
// and its series dashed beneath this report's), or null.
// Returns the screen rectangles of the checks line ("checks"), of the check rows ("check:<key>") and of
// the first view or plot ("main_view"): tests find them through the page's widget lookup.
std::map<std::string, std::array<float, 4>> draw_report(const Report& r, bool stale, const Experiment& e,
                                                        const Report* baseline = nullptr);

}  // namespace k3::ui
