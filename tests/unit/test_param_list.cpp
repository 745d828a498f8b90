// Typed parameters (core/experiments/param_list.h): one declaration gives the specs the UI, URL and
// CLI use and reads validated values into the module's struct; issues name the field's key.
#include <doctest/doctest.h>

#include "core/experiments/param_list.h"

using namespace k3;

namespace {

enum class Mode { fast, exact };

struct Inner {
    double load = 1;
    uint64_t seed = 7;
};

struct Demo {
    uint32_t interval = 512;
    Mode mode = Mode::exact;
    bool on = false;
    std::string trace = "synthetic";
    Inner inner{.load = 4};  // a module picks the group's defaults in its own initialiser
};

void inner_params(ParamList<Inner>& l) {
    l.real(&Inner::load, "load", "Load", "x", 0.05, 64).log();
    l.seed(&Inner::seed, "Seed of the demo.");
}

ParamList<Demo> demo_params() {
    ParamList<Demo> l;
    l.integer(&Demo::interval, "interval", "Interval", "tokens", 64, 65536).log().describe("Every N tokens.");
    l.choice(&Demo::mode, "mode", "Mode",
             Choices<Mode>{{Mode::fast, "fast", "Fast"}, {Mode::exact, "exact", ""}});
    l.flag(&Demo::on, "on", "On");
    l.text(&Demo::trace, "trace", "Trace", {"synthetic", "mooncake"});
    l.group(&Demo::inner, inner_params);
    return l;
}

}  // namespace

TEST_CASE("param list: specs in declaration order, defaults from the struct") {
    const ParamList<Demo> l = demo_params();
    const auto& s = l.specs();
    REQUIRE(s.size() == 6);
    CHECK(s[0].key == "interval");
    CHECK(s[0].kind == ParamKind::integer);
    CHECK(s[0].def == 512);
    CHECK(s[0].log_scale);
    CHECK(s[0].help == "Every N tokens.");
    CHECK(s[1].def_text == "exact");
    CHECK(s[1].choices == std::vector<std::string>{"fast", "exact"});
    CHECK(s[1].label_of("fast") == "Fast");
    CHECK(s[2].kind == ParamKind::flag);
    CHECK(s[3].def_text == "synthetic");
    CHECK(s[4].key == "load");
    CHECK(s[4].def == 4);  // Demo's initialiser, not Inner's
    CHECK(s[5].key == "seed");
    CHECK(s[5].def == 7);
}

TEST_CASE("param list: read() parses validated values into the struct") {
    const ParamList<Demo> l = demo_params();
    auto pp = parse_params(l.specs(),
                           {{"interval", "1024"},
                            {"mode", "fast"},
                            {"on", "1"},
                            {"trace", "x.jsonl"},
                            {"load", "2.5"},
                            {"seed", "9"}},
                           RangePolicy::strict);
    REQUIRE(pp.ok());
    const Demo d = l.read(pp.params);
    CHECK(d.interval == 1024);
    CHECK(d.mode == Mode::fast);
    CHECK(d.on);
    CHECK(d.trace == "x.jsonl");
    CHECK(d.inner.load == 2.5);
    CHECK(d.inner.seed == 9);
    const Demo def = l.read(Params(&l.specs()));
    CHECK(def.interval == 512);
    CHECK(def.mode == Mode::exact);
    CHECK(def.inner.load == 4);
}

TEST_CASE("param list: an issue names the key of the field it is about, nested fields included") {
    const ParamList<Demo> l = demo_params();
    const Demo d;
    Issues issues([&](const void* f) { return l.key_at(d, f); });
    issues.error(d.interval, "bad interval");
    issues.warning(d.inner.seed, "odd seed");
    const auto v = issues.take();
    REQUIRE(v.size() == 2);
    CHECK(v[0].key == "interval");
    CHECK(v[0].level == ParamIssue::error);
    CHECK(v[1].key == "seed");
    CHECK(v[1].level == ParamIssue::warning);
}

// The WebAssembly builds have no exceptions (a throw aborts there): these run natively.
#ifndef __EMSCRIPTEN__
TEST_CASE("param list: declaration mistakes are refused") {
    ParamList<Demo> l;
    l.flag(&Demo::on, "on", "On");
    CHECK_THROWS_AS(l.flag(&Demo::on, "on", "again"), std::logic_error);
    CHECK_THROWS_AS(l.choice(&Demo::mode, "mode", "Mode", Choices<Mode>{{Mode::fast, "fast", ""}}),
                    std::logic_error);
    int not_a_parameter = 0;
    const Demo d;
    Issues stray([&](const void* f) { return l.key_at(d, f); });
    CHECK_THROWS_AS(stray.error(not_a_parameter, "x"), std::logic_error);
}
#endif
