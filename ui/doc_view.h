// Renders the modules' "How it works" and "Where it doesn't pay" texts, Markdown as
// core/base/markdown.h reads it: headings, paragraphs, "- " lists.
#pragma once

#include <string>

namespace k3::ui {

void draw_doc(const std::string& markdown);

}  // namespace k3::ui
