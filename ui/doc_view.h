// Renders the modules' "How it works" and "Where it doesn't pay" texts, Markdown as
// core/base/markdown.h reads it: headings, paragraphs, "- " lists. `{scalar_key}` placeholders are
// filled from `report` (core/experiments/doc_figures.h; null before the first run).
#pragma once

#include <string>

#include "core/experiments/report.h"

namespace k3::ui {

void draw_doc(const std::string& markdown, const Report* report = nullptr);

}  // namespace k3::ui
