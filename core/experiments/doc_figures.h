// Live figures in module texts: a `{scalar_key}` in a module's Markdown is replaced by that scalar of
// the module's current report, formatted with its unit, so a text never quotes a run result that
// nothing recomputes (tests/cli/check_texts.mjs checks every placeholder names a scalar).
#pragma once

#include <string>
#include <vector>

#include "core/experiments/report.h"

namespace k3 {

// The keys of the placeholders in `text`, in order ("{break_even_tokens}" gives break_even_tokens).
std::vector<std::string> figure_placeholders(const std::string& text);

// `text` with every placeholder replaced by the report's figure; without a report, or when the report
// lacks the scalar (a figure these parameters do not produce), by kFigureNotRun / kFigureAbsent.
std::string fill_figures(const std::string& text, const Report* r);
inline constexpr const char* kFigureNotRun = "(run the module to see)";
inline constexpr const char* kFigureAbsent = "(not computed for these parameters)";

}  // namespace k3
