// The bounds-checked JSON reader (core/base/json_read.h): values, exact numbers, escapes, and an error
// naming the line and column for every kind of bad input.
#include <doctest/doctest.h>

#include <clocale>
#include <cmath>
#include <cstring>
#include <string>

#include "core/base/json.h"
#include "core/base/json_read.h"

using namespace k3;

namespace {

JsonValue ok(const std::string& text) {
    JsonParse p = parse_json(text);
    REQUIRE_MESSAGE(p.ok(), p.error);
    return p.value;
}

std::string error_of(const std::string& text, const JsonLimits& lim = {}) {
    const JsonParse p = parse_json(text, lim);
    CHECK_FALSE(p.ok());
    CHECK(p.value.type == JsonType::null);  // nothing comes with an error
    return p.error;
}

}  // namespace

TEST_CASE("json_read: objects, arrays and scalars keep their order and positions") {
    const JsonValue v =
        ok("{\"a\": [1, 2.5, -3e2], \"b\": {\"c\": null, \"d\": true},\n \"e\": \"x\", \"f\": false}");
    REQUIRE(v.is(JsonType::object));
    CHECK(v.keys == std::vector<std::string>{"a", "b", "e", "f"});
    const JsonValue& a = *v.find("a");
    REQUIRE(a.items.size() == 3);
    CHECK(a.items[1].number == 2.5);
    CHECK(a.items[2].number == -300);
    CHECK(v.find("b")->find("c")->is(JsonType::null));
    CHECK(v.find("b")->find("d")->boolean());
    CHECK_FALSE(v.find("f")->boolean());
    CHECK(v.find("e")->text == "x");
    CHECK(v.find("e")->line == 2);
    CHECK(v.find("e")->column == 7);
    CHECK(v.find("zz") == nullptr);
    CHECK(a.find("a") == nullptr);  // not an object
    CHECK(ok(" [ ] ").items.empty());
    CHECK(ok("{}").keys.empty());
    CHECK(ok("\xEF\xBB\xBF 7").number == 7);  // byte-order mark
}

TEST_CASE("json_read: numbers read as strtod reads them, whatever the locale") {
    CHECK(ok("0.1").number == 0.1);
    CHECK(ok("0.30000000000000004").number == 0.1 + 0.2);
    CHECK(ok("43417600").number == 43417600);
    CHECK(ok("1.7976931348623157e308").number == 1.7976931348623157e308);
    CHECK(ok("5e-324").number == 5e-324);  // the smallest denormal, as strtod gives it
    CHECK(ok("1e-400").number == 0);       // below every denormal: strtod's 0
    CHECK_FALSE(std::signbit(ok("-0").number));
    CHECK(ok("9007199254740993").number == 9007199254740992.0);  // nearest double
    // A host program may switch LC_NUMERIC to a locale with a decimal comma: the reader must not care.
    const std::string before = std::setlocale(LC_NUMERIC, nullptr);
    for (const char* loc : {"de_DE.UTF-8", "fr_FR.UTF-8", "ru_RU.UTF-8"}) {
        if (!std::setlocale(LC_NUMERIC, loc)) continue;
        CHECK(ok("[1.5, 2.25e1]").items[1].number == 22.5);
        std::setlocale(LC_NUMERIC, before.c_str());
    }
    CHECK(error_of("1e400") == "line 1, column 1: the number 1e400 is out of range for a double");
    CHECK(error_of("[01]") == "line 1, column 2: a number may not start with 0 (leading zeros)");
    CHECK(error_of("1.") == "line 1, column 3: expected a digit after the decimal point, found end of text");
    CHECK(error_of(".5") == "line 1, column 1: expected a value, found '.'");
    CHECK(error_of("+1") == "line 1, column 1: expected a value, found '+'");
    CHECK(error_of("-") == "line 1, column 2: expected a digit, found end of text");
    CHECK(error_of("1e+") == "line 1, column 4: expected a digit in the exponent, found end of text");
    CHECK(error_of("NaN") == "line 1, column 1: expected a value, found 'N'");
    CHECK(error_of(std::string(5000, '1')).find("longer than 4,096 characters") != std::string::npos);
}

TEST_CASE("json_read: strings decode every escape and check UTF-8") {
    CHECK(ok(R"("a\"b\\c\/d\b\f\n\r\t")").text == "a\"b\\c/d\b\f\n\r\t");
    CHECK(ok(R"("\u00e9\u20AC")").text == "\xC3\xA9\xE2\x82\xAC");
    CHECK(ok(R"("\ud83d\ude00")").text == "\xF0\x9F\x98\x80");  // a surrogate pair joined
    CHECK(ok("\"caf\xC3\xA9\"").text == "caf\xC3\xA9");
    CHECK(ok(R"("\u0000")").text == std::string(1, '\0'));
    CHECK(error_of(R"("\ud83d")") == "line 1, column 2: a high surrogate \\u escape without its low half");
    CHECK(error_of(R"("\ude00")") == "line 1, column 2: a lone low surrogate \\u escape");
    CHECK(error_of(R"("\ud83d\u0041")") ==
          "line 1, column 2: a high surrogate \\u escape without its low half");
    CHECK(error_of(R"("\x")") == "line 1, column 2: unknown escape \\x");
    CHECK(error_of(R"("\u12g4")") == "line 1, column 6: expected 4 hexadecimal digits after \\u");
    CHECK(error_of("\"a\nb\"") == "line 1, column 3: a line break inside a string (write it as \\n)");
    CHECK(error_of("\"a\tb\"") ==
          "line 1, column 3: a control character inside a string (write it as a \\u escape)");
    CHECK(error_of("\"\xC0\xAF\"") ==
          "line 1, column 2: a byte that is not UTF-8 inside a string");  // overlong
    CHECK(error_of("\"\xED\xA0\x80\"") == "line 1, column 2: a byte that is not UTF-8 inside a string");
    CHECK(error_of("\"\xF4\x90\x80\x80\"") == "line 1, column 2: a byte that is not UTF-8 inside a string");
    CHECK(error_of("\"abc") == "line 1, column 5: the text ends inside a string");
    // The writer's escapes read back.
    const std::string odd = std::string("q\"\\\n\t\x01 \xC3\xA9", 10);
    CHECK(ok(json_quote(odd)).text == odd);
}

TEST_CASE("json_read: every error names its line and column") {
    CHECK(error_of("{\n  \"a\": 1\n  \"b\": 2\n}") == "line 3, column 3: expected ',' or '}', found '\"'");
    CHECK(error_of("[1, 2,]") == "line 1, column 7: expected a value, found ']'");
    CHECK(error_of("{\"a\" 1}") == "line 1, column 6: expected ':', found '1'");
    CHECK(error_of("{a: 1}") == "line 1, column 2: expected a key in quotes, found 'a'");
    CHECK(error_of("[1 2]") == "line 1, column 4: expected ',' or ']', found '2'");
    CHECK(error_of("{\"a\": 1,\r\n \"a\": 2}") == "line 2, column 2: key \"a\" appears twice in one object");
    CHECK(error_of("[1] x") == "line 1, column 5: unexpected 'x' after the value");
    CHECK(error_of("") == "line 1, column 1: expected a value, found the end of the text");
    CHECK(error_of("tru") == "line 1, column 1: expected a value, found 't'");
    CHECK(error_of("[\n\n  1,\n  @]") == "line 4, column 3: expected a value, found '@'");
    CHECK(error_of("\x01") == "line 1, column 1: expected a value, found '\\x01'");
}

TEST_CASE("json_read: limits on size, depth, values and strings") {
    JsonLimits lim;
    lim.max_depth = 3;
    CHECK(parse_json("[[[1]]]", lim).ok());
    CHECK(error_of("[[[[1]]]]", lim) == "line 1, column 4: nested deeper than 3 levels");
    // The default depth holds deep hostile nesting without recursing further.
    CHECK(error_of(std::string(100000, '[')).find("nested deeper than 64 levels") != std::string::npos);
    lim = {};
    lim.max_bytes = 10;
    CHECK(error_of("[1,2,3,4,5]", lim) == "line 1, column 1: the text is 11 bytes, over the limit of 10");
    lim = {};
    lim.max_values = 3;
    CHECK(parse_json("[1,2]", lim).ok());
    CHECK(error_of("[1,2,3]", lim) == "line 1, column 6: more than 3 values");
    lim = {};
    lim.max_string_bytes = 4;
    CHECK(parse_json("\"abcd\"", lim).ok());
    CHECK(error_of("\"abcde\"", lim) == "line 1, column 7: a string longer than 4 bytes");
    CHECK(error_of("{\"abcde\": 1}", lim) == "line 1, column 8: a string longer than 4 bytes");
}

TEST_CASE("json_read: json_shown describes values for messages") {
    CHECK(json_shown(ok("\"abc\"")) == "\"abc\"");
    CHECK(json_shown(ok("2.5")) == "2.5");
    CHECK(json_shown(ok("[1]")) == "an array");
    CHECK(json_shown(ok("{}")) == "an object");
    CHECK(json_shown(ok("null")) == "null");
    CHECK(json_shown(ok("false")) == "false");
    CHECK(ok("[\n  {\"a\": 1}]").items[0].where() == "line 2, column 3: ");
}
