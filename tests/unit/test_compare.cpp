// Compare mode (core/experiments/compare.h): the pin in a link, the baseline in a module that
// shares the pinned module's parameters, tables with baseline columns, differences as shown.
#include <doctest/doctest.h>

#include "core/experiments/compare.h"
#include "core/experiments/registry.h"
#include "core/experiments/url_state.h"

using namespace k3;

static Params with(const Experiment& e, const KeyValues& kv) {
    ParsedParams pp = parse_params(e.params, kv, RangePolicy::strict);
    REQUIRE(pp.ok());
    return pp.params;
}

TEST_CASE("a link holds both parameter sets and restores both") {
    const Experiment& fleet = *find_experiment("fleet");
    const Params now = with(fleet, {{"instances", "8"}});
    const Pin pin{&fleet, with(fleet, {{"instances", "6"}, {"engine", "vllm"}})};
    const std::string hash = format_url_hash("fleet", &now, "", &pin);
    CHECK(hash == "#m=fleet&instances=8&pin=fleet&pin.engine=vllm&pin.instances=6");
    const ResolvedView v = resolve_url(parse_url_hash(hash));
    CHECK(v.issues.empty());
    CHECK(v.params == now);
    CHECK(v.pin.module == &fleet);
    CHECK(v.pin.params == pin.params);
    // A pinned run at its defaults is still a pin.
    const Pin plain{&fleet, fleet.defaults()};
    CHECK(resolve_url(parse_url_hash(format_url_hash("fleet", &now, "", &plain))).pin.module == &fleet);
}

TEST_CASE("a bad pin in a link is reported as the baseline's and the rest applies") {
    const ResolvedView v = resolve_url(parse_url_hash("#m=fleet&instances=8&pin=nosuch&pin.x=1"));
    REQUIRE(v.issues.size() == 1);
    CHECK(v.issues[0].message == "unknown module 'nosuch' for the baseline (pin)");
    CHECK(v.pin.module == nullptr);
    CHECK(v.params.integer("instances") == 8);
    const ResolvedView w = resolve_url(parse_url_hash("#m=fleet&pin=fleet&pin.instances=x"));
    REQUIRE(w.issues.size() == 1);
    CHECK(w.issues[0].key == "pin.instances");
    CHECK(w.issues[0].message.rfind("baseline: ", 0) == 0);
    const ResolvedView orphan = resolve_url(parse_url_hash("#m=fleet&pin.instances=4"));
    REQUIRE(orphan.issues.size() == 1);
    CHECK(orphan.issues[0].key == "pin.instances");
}

TEST_CASE("the fleet's modules share its parameter set; the others do not") {
    const Experiment &fleet = *find_experiment("fleet"), &tenants = *find_experiment("tenants"),
                     &faults = *find_experiment("faults"), &memory = *find_experiment("memory"),
                     &kda = *find_experiment("kda");
    for (const Experiment* a : {&fleet, &tenants, &faults})
        for (const Experiment* b : {&fleet, &tenants, &faults}) CHECK(shares_parameter_set(*a, *b));
    CHECK_FALSE(shares_parameter_set(memory, kda));
    CHECK_FALSE(shares_parameter_set(fleet, memory));
    std::string why;
    CHECK_FALSE(baseline_params({&fleet, fleet.defaults()}, memory, why));
    CHECK(why.find("module 11 fleet") != std::string::npos);
}

TEST_CASE("a baseline pinned in one module runs with its settings in another") {
    const Experiment &fleet = *find_experiment("fleet"), &faults = *find_experiment("faults");
    const Pin pin{&fleet, with(fleet, {{"seed", "7"}, {"instances", "3"}})};
    std::string why;
    const std::optional<Params> p = baseline_params(pin, faults, why);
    REQUIRE(p);
    CHECK(p->integer("seed") == 7);
    CHECK(p->integer("instances") == 3);
    CHECK(parameter_differences(faults.defaults(), *p).find("seed=") != std::string::npos);
    CHECK(parameter_differences(*p, *p).empty());
    // Settings the other module refuses give no baseline there, and say why.
    const Pin vllm{&fleet, with(fleet, {{"engine", "vllm"}})};
    CHECK_FALSE(baseline_params(vllm, faults, why));
    CHECK(why.rfind("the baseline's settings are refused here: ", 0) == 0);
}

TEST_CASE("a table with baseline columns: rows by their name, numbers beside numbers") {
    Table cur = make_table("t", {{"router", ""}, {"TTFT", "s"}});
    cur.add({std::string("a"), 1.0}).add({std::string("b"), 2.0}).add({std::string("c"), 3.0});
    Table base = make_table("t", {{"router", ""}, {"TTFT", "s"}});
    base.add({std::string("b"), 20.0}).add({std::string("a"), 10.0});
    const Table t = table_with_baseline(cur, base);
    REQUIRE(t.columns == std::vector<std::string>{"router", "TTFT", "TTFT (baseline)"});
    CHECK(t.units[2] == "s");
    CHECK(std::get<double>(t.rows[0][2]) == 10.0);
    CHECK(std::get<double>(t.rows[1][2]) == 20.0);
    CHECK(std::get<std::string>(t.rows[2][2]).empty());  // no "c" in the baseline
    Table pos = make_table("p", {{"x", ""}, {"y", ""}});
    pos.add({1.0, 5.0});
    Table pos_base = make_table("p", {{"x", ""}, {"y", ""}});
    pos_base.add({1.0, 7.0});
    CHECK(std::get<double>(table_with_baseline(pos, pos_base).rows[0][3]) == 7.0);
}

TEST_CASE("differences as the cards show them") {
    CHECK(format_difference(2, 2, "B") == "same");
    CHECK(format_difference(125, 100, "s") == "+25 %");
    CHECK(format_difference(0.75, 0.5, "fraction") == "+25 pp");
    CHECK(format_difference(90, 100, "") == "-10 %");
}
