#include "core/base/json.h"

#include <cmath>
#include <cstdio>

#include "core/base/numfmt.h"

namespace k3 {

std::string json_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out.push_back(char(c));
                }
        }
    }
    out.push_back('"');
    return out;
}

void JsonWriter::newline() {
    if (!pretty_) return;
    out_.push_back('\n');
    out_.append(counts_.size() * 2, ' ');
}

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!counts_.empty()) {
        if (counts_.back()++ > 0) out_.push_back(',');
        newline();
    }
}

JsonWriter& JsonWriter::begin_object() {
    before_value();
    out_.push_back('{');
    counts_.push_back(0);
    return *this;
}

JsonWriter& JsonWriter::end_object() {
    const bool any = counts_.back() > 0;
    counts_.pop_back();
    if (any) newline();
    out_.push_back('}');
    return *this;
}

JsonWriter& JsonWriter::begin_array() {
    before_value();
    out_.push_back('[');
    counts_.push_back(0);
    return *this;
}

JsonWriter& JsonWriter::end_array() {
    const bool any = counts_.back() > 0;
    counts_.pop_back();
    if (any) newline();
    out_.push_back(']');
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
    before_value();
    out_ += json_quote(k);
    out_ += pretty_ ? ": " : ":";
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::value(double v) {
    before_value();
    out_ += std::isfinite(v) ? format_number(v) : "null";
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
    before_value();
    out_ += json_quote(s);
    return *this;
}

JsonWriter& JsonWriter::value(bool b) {
    before_value();
    out_ += b ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::null() {
    before_value();
    out_ += "null";
    return *this;
}

JsonWriter& JsonWriter::numbers(const std::vector<double>& v) {
    // Long numeric arrays stay on one line even in pretty mode.
    before_value();
    out_.push_back('[');
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out_.push_back(',');
        out_ += std::isfinite(v[i]) ? format_number(v[i]) : "null";
    }
    out_.push_back(']');
    return *this;
}

}  // namespace k3
