// Number formatting, strict parsing, JSON writing, CRC32C and the RNG.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/base/crc32c.h"
#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/base/rng.h"

using namespace k3;

TEST_CASE("format_number gives the shortest round trip in ECMAScript layout") {
    CHECK(format_number(43417600) == "43417600");
    CHECK(format_number(0.1) == "0.1");
    CHECK(format_number(0.2606) == "0.2606");
    CHECK(format_number(-2.5) == "-2.5");
    CHECK(format_number(1e21) == "1e+21");
    CHECK(format_number(1e-7) == "1e-7");
    CHECK(format_number(0.000001) == "0.000001");
    CHECK(format_number(123456789012345680.0) == "123456789012345680");
    CHECK(format_number(5e-324) == "5e-324");
    CHECK(format_number(0) == "0");
    Rng rng(1);
    for (int i = 0; i < 2000; ++i) {
        const double v = std::ldexp(rng.uniform() - 0.5, int(rng.below(200)) - 100);
        CHECK(std::strtod(format_number(v).c_str(), nullptr) == v);
    }
}

TEST_CASE("display formatting") {
    CHECK(format_grouped(43417600) == "43,417,600");
    CHECK(format_grouped(-1234) == "-1,234");
    CHECK(format_bytes(43417600) == "41.41 MiB");
    CHECK(format_bytes(576) == "576 B");
    CHECK(format_si(1234567) == "1.23 M");
    CHECK(format_sig(0.26061, 3) == "0.261");
}

TEST_CASE("shown_text quotes untrusted text readably") {
    CHECK(shown_text("instances") == "instances");
    CHECK(shown_text(std::string("a\x00\xff\n", 4)) == "a\\x00\\xff\\x0a");
    CHECK(shown_text("abcdefgh", 3) == "abc...");
}

TEST_CASE("strict parsers refuse what they cannot represent") {
    CHECK(parse_real("1.5") == 1.5);
    CHECK(parse_real(" 2e3 ") == 2000);
    CHECK_FALSE(parse_real("nan"));
    CHECK_FALSE(parse_real("inf"));
    CHECK_FALSE(parse_real("0x10"));
    CHECK_FALSE(parse_real("1e999"));
    CHECK_FALSE(parse_real(""));
    CHECK_FALSE(parse_real("1.5abc"));
    CHECK(parse_integer("131072") == 131072);
    CHECK(parse_integer("1e6") == 1000000);
    CHECK_FALSE(parse_integer("1.5"));
    CHECK_FALSE(parse_integer("1e300"));
    CHECK(parse_integer("9007199254740991") == 9007199254740991);
    CHECK_FALSE(parse_integer("9007199254740993"));  // would read as ...992
}

TEST_CASE("strict parsers: underflow, overflow and other numbers that are not the one typed") {
    std::string why;
    auto refused = [&](const char* text) {
        why.clear();
        return !parse_real(text, &why) && !why.empty();
    };
    CHECK(refused("1e-400"));
    CHECK(why.find("underflows to 0") != std::string::npos);
    CHECK(refused("-1e-400"));
    CHECK(refused("0.0000001e-320"));
    CHECK(refused("1e-310"));  // a denormal: fewer significant bits than the text has
    CHECK(why.find("denormal") != std::string::npos);
    CHECK(refused("1e400"));
    CHECK(why.find("overflows") != std::string::npos);
    CHECK(refused("-1e400"));
    CHECK(refused("0x10"));
    CHECK(why.find("hexadecimal") != std::string::npos);
    CHECK(refused("-Infinity"));
    CHECK(why.find("finite") != std::string::npos);
    CHECK(refused("8abc"));
    CHECK(refused("1e"));
    CHECK(refused("1 2"));
    // Zero written as zero is zero, whatever its exponent; the smallest normal double is taken.
    CHECK(parse_real("0e-400") == 0.0);
    CHECK(parse_real("2.2250738585072014e-308") == DBL_MIN);
    const auto neg_zero = parse_real("-0");
    REQUIRE(neg_zero);
    CHECK_FALSE(std::signbit(*neg_zero));
    CHECK_FALSE(parse_integer("1e-400", &why));
    CHECK(why.find("underflows to 0") != std::string::npos);
    CHECK_FALSE(parse_integer("1.5", &why));
    CHECK(why == "not an integer");
}

TEST_CASE("parse_flag takes true/false, 1/0, yes/no, on/off") {
    CHECK(parse_flag("on") == true);
    CHECK(parse_flag("0") == false);
    CHECK_FALSE(parse_flag("maybe"));
}

TEST_CASE("JSON writer escapes and nests") {
    JsonWriter w;
    w.begin_object()
        .field("a", 1.0)
        .field("s", "q\"\n\x01")
        .key("v")
        .numbers({1, 0.5, NAN})
        .key("o")
        .begin_object()
        .end_object();
    w.key("e").begin_array().end_array().end_object();
    CHECK(w.str() == R"({"a":1,"s":"q\"\n\u0001","v":[1,0.5,null],"o":{},"e":[]})");
}

TEST_CASE("CRC32C matches the standard check value") {
    const char* s = "123456789";
    CHECK(crc32c(s, 9) == 0xe3069283u);
    // incremental == one shot
    CHECK(crc32c(s + 4, 5, crc32c(s, 4)) == 0xe3069283u);
}

TEST_CASE("Rng: reproducible, uniform in range, sane moments") {
    Rng a(7), b(7);
    for (int i = 0; i < 100; ++i) CHECK(a.next() == b.next());
    Rng r(11);
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const double x = r.normal();
        s += x;
        s2 += x * x;
    }
    CHECK(std::fabs(s / n) < 0.01);
    CHECK(std::fabs(s2 / n - 1) < 0.02);
    for (int i = 0; i < 1000; ++i) {
        const uint64_t k = r.below(7);
        CHECK(k < 7);
        const double u = r.uniform();
        CHECK((u >= 0 && u < 1));
    }
    double e = 0;
    for (int i = 0; i < n; ++i) e += r.exponential(2.0);
    CHECK(std::fabs(e / n - 0.5) < 0.01);
}
