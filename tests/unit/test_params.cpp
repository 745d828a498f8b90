// Parameter validation and the URL hash: clamp with warning, unknown keys reported, wrong types
// rejected, only non-default values in links, round trips.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "core/experiments/registry.h"
#include "core/experiments/url_state.h"

using namespace k3;

static std::vector<ParamSpec> specs() {
    return {ParamSpec::integer("n", "N", "tokens", 1, 1000, 64), ParamSpec::real("x", "X", "", 0, 1, 0.5),
            ParamSpec::choice("mode", "Mode", {"a", "b"}, "a"), ParamSpec::flag("on", "On", false),
            ParamSpec::text("trace", "Trace", "synthetic")};
}

TEST_CASE("defaults and typed access") {
    const auto s = specs();
    Params p(&s);
    CHECK(p.integer("n") == 64);
    CHECK(p.num("x") == 0.5);
    CHECK(p.str("mode") == "a");
    CHECK_FALSE(p.flag("on"));
    CHECK(p.is_default("n"));
}

TEST_CASE("out of range: clamped with a warning in the UI, refused in the CLI") {
    const auto s = specs();
    auto ui = parse_params(s, {{"n", "5000"}}, RangePolicy::clamp);
    CHECK(ui.ok());
    CHECK(ui.params.integer("n") == 1000);
    REQUIRE(ui.issues.size() == 1);
    CHECK(ui.issues[0].level == ParamIssue::warning);
    CHECK(ui.issues[0].message.find("clamped to 1000") != std::string::npos);
    auto cli = parse_params(s, {{"n", "5000"}}, RangePolicy::strict);
    CHECK_FALSE(cli.ok());
    CHECK(cli.issues[0].message.find("out of range [1, 1000] tokens") != std::string::npos);
}

TEST_CASE("unknown keys and wrong types are errors naming the key") {
    const auto s = specs();
    auto r = parse_params(
        s, {{"nn", "1"}, {"n", "1.5"}, {"x", "abc"}, {"mode", "c"}, {"on", "maybe"}, {"trace", ""}},
        RangePolicy::clamp);
    CHECK_FALSE(r.ok());
    REQUIRE(r.issues.size() == 6);
    CHECK(r.issues[0].message.find("unknown parameter 'nn'") != std::string::npos);
    CHECK(r.issues[1].key == "n");
    CHECK(r.issues[2].key == "x");
    CHECK(r.issues[3].message.find("expected one of a, b") != std::string::npos);
    CHECK(r.issues[4].key == "on");
    CHECK(r.issues[5].key == "trace");
    // refused values leave the defaults in place
    CHECK(r.params.integer("n") == 64);
    CHECK(r.params.str("mode") == "a");
}

TEST_CASE("a repeated key is an error naming it and its values, under either policy") {
    const auto s = specs();
    auto cli = parse_params(s, {{"n", "4"}, {"x", "0.25"}, {"n", "8"}}, RangePolicy::strict);
    CHECK_FALSE(cli.ok());
    REQUIRE(cli.issues.size() == 1);
    CHECK(cli.issues[0].key == "n");
    CHECK(cli.issues[0].message == "parameter 'n' given twice (n=4, n=8)");
    auto ui = parse_params(s, {{"mode", "b"}, {"mode", "a"}, {"mode", "c"}}, RangePolicy::clamp);
    CHECK_FALSE(ui.ok());
    REQUIRE(ui.issues.size() == 1);
    CHECK(ui.issues[0].message ==
          "parameter 'mode' given 3 times (mode=b, mode=a, mode=c); the first is used");
    CHECK(ui.params.str("mode") == "b");
}

// Numbers a double does not hold as typed, or that are not plain decimals: refused (the CLI's exit 2)
// under strict, reported as errors with the default kept under clamp (the page's link).
TEST_CASE("numbers that underflow, overflow or are not decimal are refused, naming value and key") {
    const auto s = specs();
    for (const char* key : {"n", "x"})
        for (const char* text :
             {"1e-400", "-1e-400", "1e-310", "1e400", "-1e400", "0x10", "8abc", "inf", "NaN"}) {
            CAPTURE(key);
            CAPTURE(text);
            for (RangePolicy policy : {RangePolicy::strict, RangePolicy::clamp}) {
                auto r = parse_params(s, {{key, text}}, policy);
                CHECK_FALSE(r.ok());
                REQUIRE(r.issues.size() == 1);
                CHECK(r.issues[0].message.find(std::string("bad value '") + text + "' for parameter '" + key +
                                               "'") != std::string::npos);
                CHECK(r.params.is_default(key));
            }
        }
    auto under = parse_params(s, {{"x", "1e-400"}}, RangePolicy::strict);
    CHECK(under.issues[0].message.find("underflows to 0") != std::string::npos);
    // -0 is 0: below a minimum of 1 it is out of range (refused or clamped with a warning); where 0 is
    // allowed it is +0.
    CHECK(parse_params(s, {{"n", "-0"}}, RangePolicy::strict).issues.at(0).message.find("out of range") !=
          std::string::npos);
    auto clamped = parse_params(s, {{"n", "-0"}}, RangePolicy::clamp);
    CHECK(clamped.ok());
    CHECK(clamped.issues.at(0).message.find("clamped to 1") != std::string::npos);
    auto zero = parse_params(s, {{"x", "-0"}}, RangePolicy::strict);
    CHECK(zero.ok());
    CHECK_FALSE(std::signbit(zero.params.num("x")));
}

TEST_CASE("set_number clamps and rounds integers") {
    const auto s = specs();
    Params p(&s);
    p.set_number("n", 12.6);
    CHECK(p.integer("n") == 13);
    p.set_number("x", -3);
    CHECK(p.num("x") == 0);
    p.set_number("x", NAN);
    CHECK(p.num("x") == 0);
}

TEST_CASE("URL hash: parse, resolve, format round trip") {
    const auto st = parse_url_hash("#m=memory&context=1048576&preset=qwen3-next-80b&tab=how");
    CHECK(st.module == "memory");
    CHECK(st.tab == "how");
    const auto v = resolve_url(st);
    REQUIRE(v.experiment);
    CHECK(v.issues.empty());
    CHECK(v.params.integer("context") == 1048576);
    CHECK(v.params.str("preset") == "qwen3-next-80b");
    const std::string h = format_url_hash("memory", &v.params, "how");
    CHECK(h == "#m=memory&preset=qwen3-next-80b&context=1048576&tab=how");
    const auto again = resolve_url(parse_url_hash(h));
    CHECK(again.params == v.params);
    // defaults only: just the module
    const Params d = find_experiment("memory")->defaults();
    CHECK(format_url_hash("memory", &d) == "#m=memory");
}

TEST_CASE("URL hash: bad parts are reported, the rest applied, never a crash") {
    auto v = resolve_url(parse_url_hash("m=memory&context=abc&budget_gib=1e9&bogus=1&%zz=3&novalue"));
    REQUIRE(v.experiment);
    int errors = 0, warnings = 0;
    for (const auto& i : v.issues) (i.level == ParamIssue::error ? errors : warnings)++;
    CHECK(errors == 4);    // context=abc, bogus, the undecodable key "%zz", novalue
    CHECK(warnings >= 2);  // budget clamped, malformed escape
    CHECK(v.params.num("budget_gib") == 4096);
    CHECK(v.params.integer("context") == 131072);
    auto u = resolve_url(parse_url_hash("#m=nosuch&x=1"));
    CHECK(u.experiment == nullptr);
    CHECK(u.issues.size() == 1);
    CHECK(resolve_url(parse_url_hash("")).experiment == nullptr);
    CHECK(resolve_url(parse_url_hash(std::string(10000, 'a'))).issues.size() == 1);
}

// The page's banner says whether any of a link was applied (ui/shell.cpp): `applied` must be true.
TEST_CASE("URL hash: a link too long to read or naming an unknown module applies nothing") {
    // (appended, not concatenated: g++ 12 warns falsely on operator+ with a long temporary)
    std::string many = "#m=memory&context=4096&";
    many.append(kMaxLinkChars, 'x');
    const ResolvedView too_long = resolve_url(parse_url_hash(many));
    CHECK_FALSE(too_long.applied);
    CHECK(too_long.experiment == nullptr);
    REQUIRE(too_long.issues.size() == 1);
    CHECK(too_long.issues[0].message.find("8,192") != std::string::npos);
    // exactly at the limit it is read
    std::string at_limit = "m=memory&context=4096&x=";
    at_limit.append(kMaxLinkChars - 24, 'y');
    REQUIRE(at_limit.size() == kMaxLinkChars);
    const ResolvedView read = resolve_url(parse_url_hash(at_limit));
    CHECK(read.applied);
    CHECK(read.params.integer("context") == 4096);
    CHECK_FALSE(resolve_url(parse_url_hash("#m=nosuch&context=4096")).applied);
    CHECK(resolve_url(parse_url_hash("#m=memory&context=abc")).applied);
    CHECK(resolve_url(parse_url_hash("#context=4096")).applied);  // the Overview, its parameter ignored
}

TEST_CASE("URL hash: a repeated key is reported and its first value used") {
    const auto st = parse_url_hash("#m=memory&context=4096&tab=how&context=8192&m=fleet&tab=limits");
    CHECK(st.module == "memory");
    CHECK(st.tab == "how");
    REQUIRE(st.kv.size() == 1);
    const auto v = resolve_url(st);
    REQUIRE(v.experiment);
    CHECK(v.params.integer("context") == 4096);
    std::set<std::string> repeated;
    for (const auto& i : v.issues) {
        CHECK(i.level == ParamIssue::error);
        CHECK(i.message.find("given twice") != std::string::npos);
        CHECK(i.message.find("the first is used") != std::string::npos);
        repeated.insert(i.key);
    }
    CHECK(repeated == std::set<std::string>{"context", "m", "tab"});
}

TEST_CASE("URL hash: an underflowing value is reported, not taken as 0") {
    const auto v = resolve_url(parse_url_hash("#m=memory&attn_every=1e-400"));
    REQUIRE(v.experiment);
    REQUIRE(v.issues.size() == 1);
    CHECK(v.issues[0].level == ParamIssue::error);
    CHECK(v.issues[0].message.find("underflows to 0") != std::string::npos);
    CHECK(v.params.is_default("attn_every"));
}

TEST_CASE("percent coding round trips arbitrary bytes") {
    std::string all;
    for (int c = 0; c < 256; ++c) all.push_back(char(c));
    bool ok = false;
    CHECK(percent_decode(percent_encode(all), &ok) == all);
    CHECK(ok);
}

TEST_CASE("every registered module: defaults validate, URL of defaults is just the module") {
    for (const auto& e : experiments()) {
        CAPTURE(e.id);
        const Params p = e.defaults();
        for (const auto& i : e.check(p)) CHECK(i.level != ParamIssue::error);
        CHECK(format_url_hash(e.id, &p) == "#m=" + e.id);
        CHECK_FALSE(e.title.empty());
        CHECK_FALSE(e.purpose.empty());
        CHECK_FALSE(e.how_it_works.empty());
        CHECK_FALSE(e.where_it_does_not_pay.empty());
        for (const auto& s : e.params) {
            CAPTURE(s.key);
            CHECK_FALSE(s.label.empty());
            if (!s.is_textual()) {
                CHECK(s.min <= s.def);
                CHECK(s.def <= s.max);
                if (s.log_scale) CHECK(s.min > 0);
            }
        }
    }
}

// Issue 20: no run starts without its cost counted first (k3cli refuses past the run limits).
TEST_CASE("every registered module estimates its run, within the run limits at its defaults") {
    for (const auto& e : experiments()) {
        CAPTURE(e.id);
        REQUIRE(e.estimate);
        const RunCost c = e.estimate(e.defaults());
        CHECK(c.seconds > 0);
        CHECK(c.seconds <= kRunSecondsLimit);
        CHECK(c.bytes > 0);
        CHECK(c.bytes <= kRunBytesLimit);
        CHECK_FALSE(c.counted.empty());
    }
}

// A refusal names what the user moved, not the module's costliest parameter: the fleet's cost key is
// its event blocks, but `sessions=4096` is what made this run too large.
TEST_CASE("a refusal names the moved parameter whose default would lower the cost most") {
    const Experiment& e = *find_experiment("fleet");
    auto pp = parse_params(e.params, {{"sessions", "4096"}, {"instances", "8"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const RunCost c = e.cost(pp.params);
    CHECK(c.key == "sessions");
    CHECK(c.fix.find("make sessions smaller than 4096 (at its default, ") == 0);
    bool named = false;
    for (const ParamIssue& i : e.check(pp.params))
        named |= i.key == "sessions" && i.message.find(c.fix) != std::string::npos;
    CHECK(named);
    // Within the limits nothing is named beyond the module's own key.
    CHECK(e.cost(e.defaults()).fix.empty());
}

TEST_CASE("every module's parameters have help text and contiguous groups (one panel section each)") {
    std::set<int> numbers;
    for (const Experiment& e : experiments()) {
        CAPTURE(e.id);
        CHECK(numbers.insert(e.number).second);
        std::set<std::string> closed;
        std::string current;
        for (const ParamSpec& s : e.params) {
            CAPTURE(s.key);
            CHECK(!s.help.empty());
            if (s.group != current) {
                CHECK(closed.count(s.group) == 0);  // a group that reappears would show twice
                closed.insert(current);
                current = s.group;
            }
        }
    }
    CHECK(numbers.size() == experiments().size());
}
