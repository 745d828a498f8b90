#include "core/experiments/doc_figures.h"

#include "core/base/numfmt.h"

namespace k3 {

namespace {

bool key_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

// Calls on(start, end, key) for each placeholder `{key}` of `text` ([start, end) covers the braces).
template <class On>
void each_placeholder(const std::string& text, On on) {
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '{') continue;
        size_t j = i + 1;
        while (j < text.size() && key_char(text[j], j == i + 1)) ++j;
        if (j > i + 1 && j < text.size() && text[j] == '}') {
            on(i, j + 1, text.substr(i + 1, j - i - 1));
            i = j;
        }
    }
}

}  // namespace

std::vector<std::string> figure_placeholders(const std::string& text) {
    std::vector<std::string> keys;
    each_placeholder(text, [&](size_t, size_t, std::string key) { keys.push_back(std::move(key)); });
    return keys;
}

std::string fill_figures(const std::string& text, const Report* r) {
    std::string out;
    size_t done = 0;
    each_placeholder(text, [&](size_t start, size_t end, const std::string& key) {
        out.append(text, done, start - done);
        const Scalar* s = r ? r->find_scalar(key) : nullptr;
        // "50.00 %" reads "50 %" in a sentence (tables keep their fixed digits).
        out += s ? trim_zeros(format_with_unit(s->value, s->unit)) : r ? kFigureAbsent : kFigureNotRun;
        done = end;
    });
    out.append(text, done, std::string::npos);
    return out;
}

}  // namespace k3
