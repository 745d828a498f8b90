// A small streaming JSON writer with deterministic number output (see numfmt.h).
// Non-finite numbers are written as null, as JSON has no NaN or infinity.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k3 {

class JsonWriter {
  public:
    explicit JsonWriter(bool pretty = false) : pretty_(pretty) {}
    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    JsonWriter& key(std::string_view k);
    JsonWriter& value(double v);
    JsonWriter& value(std::string_view s);
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(bool b);
    JsonWriter& null();
    JsonWriter& numbers(const std::vector<double>& v);
    // key + value in one call
    template <class T>
    JsonWriter& field(std::string_view k, const T& v) {
        key(k);
        return value(v);
    }
    const std::string& str() const { return out_; }
    std::string take() { return std::move(out_); }

  private:
    void before_value();
    void newline();
    std::string out_;
    std::vector<int> counts_;  // items written at each open level
    bool after_key_ = false;
    bool pretty_;
};

// Escaped JSON string literal including the quotes.
std::string json_quote(std::string_view s);

}  // namespace k3
