// A bounds-checked JSON reader (RFC 8259) for the files users bring: a model's config.json, a report
// exported earlier. Every limit is enforced while reading; an error names the line and the column
// ("line 12, column 5: expected ',' or '}'") and no value comes with it. Bad input never throws,
// never recurses deeper than the depth limit and never reads past the text.
//
// Strict: no comments, no trailing commas, no NaN, no leading zeros or '+', no unescaped control
// characters, no bytes after the value (a leading UTF-8 byte-order mark is skipped), no key twice
// in one object. Strings are checked as UTF-8 and \uXXXX escapes decoded (surrogate pairs joined,
// a lone surrogate refused). Numbers are read as strtod reads them in the "C" locale (the nearest
// double); one that overflows a double is refused. Columns count bytes from 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

struct JsonLimits {
    size_t max_bytes = size_t(32) << 20;        // the whole text
    uint32_t max_depth = 64;                    // arrays and objects inside each other
    size_t max_string_bytes = size_t(1) << 20;  // one string or key, decoded
    size_t max_values = size_t(1) << 20;        // values of any kind in the document
};

enum class JsonType : uint8_t { null, boolean, number, string, array, object };

struct JsonValue {
    JsonType type = JsonType::null;
    uint32_t line = 0, column = 0;  // where the value starts in the text
    double number = 0;              // number; a boolean as 0 or 1
    std::string text;               // string
    std::vector<JsonValue> items;   // array elements, or object member values in file order
    std::vector<std::string> keys;  // object: keys[i] names items[i]

    bool is(JsonType t) const { return type == t; }
    bool boolean() const { return number != 0; }
    // The member `key` of an object, or null (also when this is not an object).
    const JsonValue* find(std::string_view key) const;
    // "line 12, column 5: " for messages about this value.
    std::string where() const;
};

struct JsonParse {
    JsonValue value;
    std::string error;  // empty on success; otherwise "line L, column C: what is wrong"
    uint32_t error_line = 0, error_column = 0;
    bool ok() const { return error.empty(); }
};

JsonParse parse_json(std::string_view text, const JsonLimits& limits = {});

// A short description of a value for messages: "abc" quoted (shown_text), numbers as written back,
// true/false/null, "an array", "an object".
std::string json_shown(const JsonValue& v);

}  // namespace k3
