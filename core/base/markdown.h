// The Markdown the modules' texts are written in (core/modules/*/*.md): headings ("# ", "## ",
// "### "), paragraphs and "- " list items, separated by blank lines. A block's lines are joined with
// single spaces, so the files can be wrapped at any column; a list item continues on lines that do
// not start a new item. Nothing else (emphasis, links, code) is interpreted: it shows as written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k3 {

struct MdBlock {
    enum Kind { heading, paragraph, bullet } kind = paragraph;
    int level = 0;  // heading: number of '#'
    std::string text;
};

std::vector<MdBlock> parse_markdown(std::string_view md);

// The blocks under each heading of `level` ("# How it works" ... up to the next heading of that
// level or above), as (heading text, source text of the section without its heading).
std::vector<std::pair<std::string, std::string>> markdown_sections(std::string_view md, int level);

// The section's blocks as one line of plain text (paragraphs joined by a space): a tooltip.
std::string markdown_plain(std::string_view md);

}  // namespace k3
