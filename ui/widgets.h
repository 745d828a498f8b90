// Small widgets shared by the views: section headings, help markers, headline cards, check pills.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "core/experiments/report.h"

namespace k3::ui {

void section_heading(const char* text);     // small dim caps-like heading with a rule
void help_marker(const std::string& text);  // "(?)" with a wrapped tooltip
void tooltip_wrapped(const std::string& text);
// A card with a label, a big value and a unit; `width` in device pixels. With a baseline, a line
// under the value gives the baseline's value and the difference.
void headline_card(const Scalar& s, float width, const Scalar* baseline = nullptr);
// A pass/fail pill followed by the check's name; detail in the tooltip and below when failed.
// `fails_if`: what the check's falsifier does, shown in the tooltip ("" when it has none).
void check_row(const Check& c, const std::string& fails_if);
// Text that wraps at the available width, in a colour.
void text_wrapped_colored(ImU32 color, const std::string& text);

// `text` cut with "..." so that it fits `lines` lines of `width` pixels in the current font.
std::string ellipsize(const std::string& text, float width, int lines = 1);
// A scalar formatted for a large display: the number and its unit apart (fractions keep their "%").
std::pair<std::string, std::string> value_and_unit(const Scalar& s);
// A coloured banner (warnings, errors) with an optional dismiss button; returns true if dismissed.
bool banner(ImU32 color, const std::string& text, const char* id, bool dismissable);
// A row of colour swatches with names (series_color(i) for names[i]), in the small font.
void legend_row(const std::vector<std::string>& names);

}  // namespace k3::ui
