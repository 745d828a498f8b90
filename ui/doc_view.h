// Renders the modules' "How it works" and "Where it doesn't pay" texts: paragraphs separated by
// blank lines, "- " bullet lines, "## " headings.
#pragma once

#include <string>

namespace k3::ui {

void draw_doc(const std::string& text);

}  // namespace k3::ui
