// Module 11 `fleet`: defaults pass every check, the headline report keys, reproducible reports, the
// Mooncake figure, bad parameters. (Module 13 `faults` until it moves.)
#include <doctest/doctest.h>

#include <cmath>

#include "core/experiments/registry.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

namespace {
using test::check_named;
using test::without_timing;
Report run(const char* module, const std::vector<std::pair<std::string, std::string>>& kv) {
    return test::run_module(module, kv);
}
double scalar(const Report& r, const char* k) { return test::scalar_of(r, k); }
void all_pass(const Report& r) { test::all_checks_pass(r); }
}  // namespace

TEST_CASE("fleet: defaults, report keys, same report twice, a timeline") {
    const Experiment* e = find_experiment("fleet");
    REQUIRE(e != nullptr);
    CHECK(e->number == 11);
    CHECK(e->component == "fleet scheduling");
    for (const char* k :
         {"trace", "instances", "router", "interval", "state_capacity", "kv_capacity_tokens", "seed"})
        CHECK_MESSAGE(e->defaults().spec(k) != nullptr, k);
    const Report a = run("fleet", {});
    all_pass(a);
    test::check_keys_unique(a);  // the checks of every router's run and of the run without reuse
    for (const char* k :
         {"token_hit_kv", "token_hit_state", "ttft_p50_ms", "ttft_p99_ms", "throughput_tokens_per_s"})
        CHECK_MESSAGE(a.find_scalar(k) != nullptr, k);
    CHECK(scalar(a, "token_hit_state") <= scalar(a, "token_hit_kv"));
    CHECK(scalar(a, "token_hit_state") > 0);
    CHECK(scalar(a, "ttft_p99_ms") >= scalar(a, "ttft_p50_ms"));
    CHECK(scalar(a, "cost_per_million_tokens") < scalar(a, "cost_per_million_tokens_no_reuse"));
    REQUIRE(a.timelines.size() == 1);
    CHECK(a.timelines[0].lanes.size() == 4);
    CHECK(!a.timelines[0].spans.empty());
    CHECK(a.timelines[0].spans.size() <= 3000);
    CHECK(without_timing(a) == without_timing(run("fleet", {})));
    // A different seed changes the workload and the report.
    CHECK(without_timing(a) != without_timing(run("fleet", {{"seed", "2"}})));
}

TEST_CASE("fleet: one instance on the Mooncake trace gives module 5's 37.36 %") {
    const Report r = run("fleet", {{"trace", "mooncake"},
                                   {"instances", "1"},
                                   {"state_capacity", "0"},
                                   {"compare_routers", "0"},
                                   {"compare_no_reuse", "0"}});
    all_pass(r);
    test::check_keys_unique(r);
    CHECK(std::round(scalar(r, "token_hit_kv") * 10000) == 3736);
    CHECK(std::round(scalar(r, "token_hit_state") * 10000) == 3734);
    CHECK(test::check_keyed(r, "mooncake_one_instance_hits").passed);
    CHECK(test::check_keyed(r, "one_instance_hits_match_block_ids").passed);
}

TEST_CASE("fleet: bad parameters are refused with a reason") {
    const Experiment& e = *find_experiment("fleet");
    auto pp = parse_params(e.params, {{"interval", "500"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    auto issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "interval");
    pp = parse_params(e.params, {{"working_gib", "1"}, {"max_running", "256"}}, RangePolicy::strict);
    issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "working_gib");
    pp = parse_params(e.params, {{"trace", "/nonexistent/trace.jsonl"}}, RangePolicy::strict);
    issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "trace");
}

TEST_CASE("faults module: zero violations with the guard, some without; migration loses nothing") {
    const Experiment* e = find_experiment("faults");
    REQUIRE(e != nullptr);
    CHECK(e->number == 13);
    const Report r = run("faults", {});
    all_pass(r);
    CHECK(scalar(r, "requests_moved") > 0);
    CHECK(scalar(r, "consistency_violations") == 0);
    CHECK(check_named(r, "With the guard, no request resumed") != nullptr);
    const Report loose = run("faults", {{"guard", "0"}, {"compare", "0"}});
    all_pass(loose);
    CHECK(scalar(loose, "consistency_violations") > 0);
    const Report m = run("faults", {{"fault", "drain"}, {"recovery", "migrate"}, {"compare", "0"}});
    all_pass(m);
    CHECK(check_named(m, "Live migration of KV and state lost no computed work") != nullptr);
    CHECK(scalar(m, "migrated_bytes") > 0);
    CHECK(without_timing(r) == without_timing(run("faults", {})));

    auto pp = parse_params(e->params, {{"fault_instance", "9"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    bool found = false;
    for (const ParamIssue& i : e->check(pp.params))
        found |= i.key == "fault_instance" && i.level == ParamIssue::error;
    CHECK(found);
}
