#include "core/base/json_read.h"

#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"

namespace k3 {

const JsonValue* JsonValue::find(std::string_view key) const {
    if (type != JsonType::object) return nullptr;
    for (size_t i = 0; i < keys.size(); ++i)
        if (keys[i] == key) return &items[i];
    return nullptr;
}

std::string JsonValue::where() const {
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
}

std::string json_shown(const JsonValue& v) {
    switch (v.type) {
        case JsonType::null: return "null";
        case JsonType::boolean: return v.boolean() ? "true" : "false";
        case JsonType::number: return format_number(v.number);
        case JsonType::string: return "\"" + shown_text(v.text, 40) + "\"";
        case JsonType::array: return "an array";
        case JsonType::object: return "an object";
    }
    return "?";
}

namespace {

// Longest number text read: a double needs at most 767 significant digits to be exact, and strtod's
// time on a longer run of digits is the C library's business, not a file's.
constexpr size_t kMaxNumberChars = 4096;

class Reader {
  public:
    Reader(std::string_view text, const JsonLimits& lim) : s_(text), lim_(lim) {}

    JsonParse run() {
        JsonParse out;
        if (s_.size() > lim_.max_bytes) {
            fail("the text is " + format_grouped(double(s_.size())) + " bytes, over the limit of " +
                 format_grouped(double(lim_.max_bytes)));
        } else {
            if (s_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // UTF-8 byte-order mark
            skip_space();
            if (value(out.value, 0)) {
                skip_space();
                if (pos_ < s_.size()) fail("unexpected " + shown_here() + " after the value");
            }
        }
        if (!error_.empty()) {
            out = JsonParse{};
            out.error_line = err_line_;
            out.error_column = err_col_;
            out.error =
                "line " + std::to_string(err_line_) + ", column " + std::to_string(err_col_) + ": " + error_;
        }
        return out;
    }

  private:
    std::string_view s_;
    const JsonLimits& lim_;
    size_t pos_ = 0, line_start_ = 0, values_ = 0;
    uint32_t line_ = 1, err_line_ = 0, err_col_ = 0;
    std::string error_;

    uint32_t column_at(size_t p) const { return uint32_t(p - line_start_ + 1); }
    bool fail(std::string what) { return fail_at(pos_, std::move(what)); }
    bool fail_at(size_t p, std::string what) { return fail_lc(line_, column_at(p), std::move(what)); }
    bool fail_lc(uint32_t line, uint32_t column, std::string what) {
        if (error_.empty()) {
            error_ = std::move(what);
            err_line_ = line;
            err_col_ = column;
        }
        return false;
    }
    std::string shown_here() const {
        if (pos_ >= s_.size()) return "end of text";
        return "'" + shown_text(s_.substr(pos_, 1)) + "'";
    }

    void skip_space() {
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (c == ' ' || c == '\t') {
                ++pos_;
            } else if (c == '\n' || c == '\r') {
                ++pos_;
                if (c == '\r' && pos_ < s_.size() && s_[pos_] == '\n') ++pos_;  // CRLF is one break
                ++line_;
                line_start_ = pos_;
            } else {
                break;
            }
        }
    }

    bool value(JsonValue& v, uint32_t depth) {
        if (++values_ > lim_.max_values)
            return fail("more than " + format_grouped(double(lim_.max_values)) + " values");
        v.line = line_;
        v.column = column_at(pos_);
        if (pos_ >= s_.size()) return fail("expected a value, found the end of the text");
        const char c = s_[pos_];
        if (c == '{' || c == '[') {
            if (depth >= lim_.max_depth)
                return fail("nested deeper than " + std::to_string(lim_.max_depth) + " levels");
            return c == '{' ? object(v, depth + 1) : array(v, depth + 1);
        }
        if (c == '"') {
            v.type = JsonType::string;
            return string(v.text);
        }
        if (c == '-' || (c >= '0' && c <= '9')) return number(v);
        for (const char* word : {"true", "false", "null"})
            if (s_.substr(pos_, std::char_traits<char>::length(word)) == word) {
                v.type = word[0] == 'n' ? JsonType::null : JsonType::boolean;
                v.number = word[0] == 't';
                pos_ += std::char_traits<char>::length(word);
                return true;
            }
        return fail("expected a value, found " + shown_here());
    }

    // After '[' or '{' and a value: ',' goes on, `close` ends, anything else is an error.
    bool next_or_close(char close, bool& done) {
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
            ++pos_;
            skip_space();
            return true;
        }
        if (pos_ < s_.size() && s_[pos_] == close) {
            ++pos_;
            done = true;
            return true;
        }
        return fail(std::string("expected ',' or '") + close + "', found " + shown_here());
    }

    bool array(JsonValue& v, uint32_t depth) {
        v.type = JsonType::array;
        ++pos_;
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
        for (bool done = false; !done;) {
            v.items.emplace_back();
            if (!value(v.items.back(), depth) || !next_or_close(']', done)) return false;
        }
        return true;
    }

    bool object(JsonValue& v, uint32_t depth) {
        v.type = JsonType::object;
        ++pos_;
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
        std::vector<std::pair<uint32_t, uint32_t>> key_at;  // line, column of each key
        for (bool done = false; !done;) {
            if (pos_ >= s_.size() || s_[pos_] != '"')
                return fail("expected a key in quotes, found " + shown_here());
            key_at.emplace_back(line_, column_at(pos_));
            v.keys.emplace_back();
            if (!string(v.keys.back())) return false;
            skip_space();
            if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':', found " + shown_here());
            ++pos_;
            skip_space();
            v.items.emplace_back();
            if (!value(v.items.back(), depth) || !next_or_close('}', done)) return false;
        }
        return unique_keys(v, key_at);
    }

    // A key given twice is refused: which one a reader keeps differs between readers.
    bool unique_keys(const JsonValue& v, const std::vector<std::pair<uint32_t, uint32_t>>& key_at) {
        std::vector<size_t> order(v.keys.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return v.keys[a] != v.keys[b] ? v.keys[a] < v.keys[b] : a < b; });
        for (size_t i = 1; i < order.size(); ++i) {
            if (v.keys[order[i]] != v.keys[order[i - 1]]) continue;
            return fail_lc(key_at[order[i]].first, key_at[order[i]].second,
                           "key \"" + shown_text(v.keys[order[i]]) + "\" appears twice in one object");
        }
        return true;
    }

    bool number(JsonValue& v) {
        const size_t start = pos_;
        auto digits = [&] {
            const size_t from = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
            return pos_ > from;
        };
        if (s_[pos_] == '-') ++pos_;
        if (pos_ < s_.size() && s_[pos_] == '0') {
            ++pos_;
            if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
                return fail_at(start, "a number may not start with 0 (leading zeros)");
        } else if (!digits()) {
            return fail("expected a digit, found " + shown_here());
        }
        if (pos_ < s_.size() && s_[pos_] == '.') {
            ++pos_;
            if (!digits()) return fail("expected a digit after the decimal point, found " + shown_here());
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            ++pos_;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
            if (!digits()) return fail("expected a digit in the exponent, found " + shown_here());
        }
        const std::string_view text = s_.substr(start, pos_ - start);
        if (text.size() > kMaxNumberChars)
            return fail_at(start,
                           "a number longer than " + format_grouped(double(kMaxNumberChars)) + " characters");
        const auto x = strtod_c(text);
        if (!x || !std::isfinite(*x))
            return fail_at(start, "the number " + shown_text(text, 30) + " is out of range for a double");
        v.type = JsonType::number;
        v.number = *x + 0.0;  // -0 reads as 0
        return true;
    }

    bool hex4(uint32_t& u) {
        u = 0;
        for (int i = 0; i < 4; ++i, ++pos_) {
            const int d = hex_digit(pos_ < s_.size() ? s_[pos_] : '\0');
            if (d < 0) return fail("expected 4 hexadecimal digits after \\u");
            u = u * 16 + uint32_t(d);
        }
        return true;
    }

    static void put_utf8(std::string& out, uint32_t u) {
        if (u < 0x80) {
            out.push_back(char(u));
        } else if (u < 0x800) {
            out.push_back(char(0xC0 | (u >> 6)));
            out.push_back(char(0x80 | (u & 0x3F)));
        } else if (u < 0x10000) {
            out.push_back(char(0xE0 | (u >> 12)));
            out.push_back(char(0x80 | ((u >> 6) & 0x3F)));
            out.push_back(char(0x80 | (u & 0x3F)));
        } else {
            out.push_back(char(0xF0 | (u >> 18)));
            out.push_back(char(0x80 | ((u >> 12) & 0x3F)));
            out.push_back(char(0x80 | ((u >> 6) & 0x3F)));
            out.push_back(char(0x80 | (u & 0x3F)));
        }
    }

    // \uXXXX, with a high surrogate joined to the low one that must follow it.
    bool unicode_escape(std::string& out) {
        const size_t at = pos_ - 2;
        uint32_t u = 0;
        if (!hex4(u)) return false;
        if (u >= 0xDC00 && u <= 0xDFFF) return fail_at(at, "a lone low surrogate \\u escape");
        if (u >= 0xD800 && u <= 0xDBFF) {
            uint32_t lo = 0;
            if (s_.substr(pos_, 2) != "\\u")
                return fail_at(at, "a high surrogate \\u escape without its low half");
            pos_ += 2;
            if (!hex4(lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return fail_at(at, "a high surrogate \\u escape without its low half");
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        }
        put_utf8(out, u);
        return true;
    }

    bool escape(std::string& out) {
        ++pos_;  // the backslash
        const char c = pos_ < s_.size() ? s_[pos_] : '\0';
        ++pos_;
        switch (c) {
            case '"': out.push_back('"'); return true;
            case '\\': out.push_back('\\'); return true;
            case '/': out.push_back('/'); return true;
            case 'b': out.push_back('\b'); return true;
            case 'f': out.push_back('\f'); return true;
            case 'n': out.push_back('\n'); return true;
            case 'r': out.push_back('\r'); return true;
            case 't': out.push_back('\t'); return true;
            case 'u': return unicode_escape(out);
            default:
                return fail_at(pos_ - 2, "unknown escape \\" + shown_text(std::string_view(&c, c ? 1 : 0)));
        }
    }

    // Length of the valid UTF-8 sequence at pos_ (lead byte >= 0x80), or 0: no overlong forms, no
    // surrogates, nothing above U+10FFFF.
    size_t utf8_length() const {
        const auto b = [&](size_t i) { return pos_ + i < s_.size() ? uint8_t(s_[pos_ + i]) : uint8_t(0); };
        const auto cont = [&](size_t i) { return (b(i) & 0xC0) == 0x80; };
        const uint8_t c = b(0);
        if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
        if (c >= 0xE0 && c <= 0xEF) {
            const uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            return b(1) >= lo && b(1) <= hi && cont(2) ? 3 : 0;
        }
        if (c >= 0xF0 && c <= 0xF4) {
            const uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            return b(1) >= lo && b(1) <= hi && cont(2) && cont(3) ? 4 : 0;
        }
        return 0;
    }

    bool string(std::string& out) {
        ++pos_;  // the opening quote
        while (true) {
            if (out.size() > lim_.max_string_bytes)
                return fail("a string longer than " + format_grouped(double(lim_.max_string_bytes)) +
                            " bytes");
            if (pos_ >= s_.size()) return fail("the text ends inside a string");
            const uint8_t c = uint8_t(s_[pos_]);
            if (c == '"') return ++pos_, true;
            if (c == '\\') {
                if (!escape(out)) return false;
            } else if (c < 0x20) {
                return fail(c == '\n' ? "a line break inside a string (write it as \\n)"
                                      : "a control character inside a string (write it as a \\u escape)");
            } else if (c < 0x80) {
                out.push_back(char(c));
                ++pos_;
            } else {
                const size_t n = utf8_length();
                if (n == 0) return fail("a byte that is not UTF-8 inside a string");
                out.append(s_.substr(pos_, n));
                pos_ += n;
            }
        }
    }
};

}  // namespace

JsonParse parse_json(std::string_view text, const JsonLimits& limits) { return Reader(text, limits).run(); }

}  // namespace k3
