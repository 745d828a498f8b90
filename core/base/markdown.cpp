#include "core/base/markdown.h"

namespace k3 {

namespace {

int heading_level(std::string_view line) {
    int n = 0;
    while (n < int(line.size()) && line[n] == '#') ++n;
    return n > 0 && n < int(line.size()) && line[n] == ' ' ? n : 0;
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim_blank(std::string_view s) {
    while (!s.empty() && blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && blank(s.back())) s.remove_suffix(1);
    return s;
}

// Calls f(line) for each line of `text`.
template <class F>
void for_each_line(std::string_view text, F&& f) {
    while (!text.empty()) {
        const size_t nl = text.find('\n');
        f(text.substr(0, nl));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

}  // namespace

std::vector<MdBlock> parse_markdown(std::string_view md) {
    std::vector<MdBlock> out;
    bool open = false;  // the last block takes continuation lines
    for_each_line(md, [&](std::string_view raw) {
        const std::string_view line = trim_blank(raw);
        if (line.empty()) {
            open = false;
        } else if (const int h = heading_level(line)) {
            out.push_back({MdBlock::heading, h, std::string(trim_blank(line.substr(size_t(h))))});
            open = false;
        } else if (line.rfind("- ", 0) == 0) {
            out.push_back({MdBlock::bullet, 0, std::string(trim_blank(line.substr(2)))});
            open = true;
        } else if (open) {
            out.back().text += ' ';
            out.back().text += line;
        } else {
            out.push_back({MdBlock::paragraph, 0, std::string(line)});
            open = true;
        }
    });
    return out;
}

std::vector<std::pair<std::string, std::string>> markdown_sections(std::string_view md, int level) {
    std::vector<std::pair<std::string, std::string>> out;
    bool in_section = false;
    for_each_line(md, [&](std::string_view line) {
        const int h = heading_level(line);
        if (h > 0 && h <= level) {
            in_section = h == level;
            if (in_section) out.push_back({std::string(trim_blank(line.substr(size_t(h)))), {}});
            return;
        }
        if (!in_section) return;
        out.back().second += line;
        out.back().second += '\n';
    });
    for (auto& section : out) section.second = std::string(trim_blank(section.second));
    return out;
}

std::string markdown_plain(std::string_view md) {
    std::string out;
    for (const MdBlock& b : parse_markdown(md)) out += (out.empty() ? "" : " ") + b.text;
    return out;
}

}  // namespace k3
