// Module 12 `tenants`: isolation keeps the SLO that no isolation misses; without a mechanism, or with a
// burst that harms nobody, a note instead of the check; every check proven by its falsifier; the fair
// shares; bad parameters.
#include <doctest/doctest.h>

#include "core/experiments/check_audit.h"
#include "core/modules/tenants/tenants.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

TEST_CASE("tenants: isolation keeps the well-behaved requests within their delay bound; none misses it" *
          test::native_only()) {
    const Experiment* e = find_experiment("tenants");
    REQUIRE(e != nullptr);
    CHECK(e->number == 12);
    CHECK(e->component == "fleet scheduling");
    const Report r = test::run_module("tenants", {});
    test::all_checks_pass(r);
    test::check_keys_unique(r);  // the fleet checks of every mechanism's run
    CHECK(test::check_keyed(r, "isolation_keeps_slo").passed);
    // The delay bound (1 + chunks steps) is kept with isolation and missed by far without it.
    CHECK(test::scalar_of(r, "burst_delay_p99_over_bound") <= 1);
    CHECK(test::scalar_of(r, "no_isolation_delay_p99_over_bound") > 10);
    CHECK(test::scalar_of(r, "isolation_ratio") < test::scalar_of(r, "no_isolation_ratio"));
    CHECK(test::scalar_of(r, "isolation_ratio") ==
          doctest::Approx(test::scalar_of(r, "well_behaved_ttft_p99_ms") /
                          test::scalar_of(r, "solo_ttft_p99_ms")));
    CHECK(test::scalar_of(r, "jain_tenants") > 0);
    CHECK(test::without_timing(r) == test::without_timing(test::run_module("tenants", {})));
    // Without a mechanism there is nothing to check but the figures still come.
    const Report f = test::run_module("tenants", {{"mechanism", "fcfs"}, {"quotas", "0"}});
    test::all_checks_pass(f);
    CHECK(f.find_check("isolation_keeps_slo") == nullptr);
    CHECK(test::scalar_of(f, "burst_delay_p99_over_bound") ==
          doctest::Approx(test::scalar_of(f, "no_isolation_delay_p99_over_bound")));
    // Deficit round robin without quotas lets the burst hold the running slots and the cache: the check
    // fails, and the report says the mechanism does not isolate here.
    const Report no_quotas = test::run_module("tenants", {{"quotas", "0"}});
    CHECK_FALSE(test::check_keyed(no_quotas, "isolation_keeps_slo").passed);
    bool said = false;
    for (const std::string& n : no_quotas.notes)
        said |= n.find("the mechanism does not isolate") != std::string::npos;
    CHECK(said);
    // A tenant 0 like the others (no burst, the others' message length) delays no one past the bound:
    // it tests no mechanism.
    const Report calm = test::run_module("tenants", {{"burst_factor", "1"}, {"noisy_user_len", "400"}});
    test::all_checks_pass(calm);
    CHECK(calm.find_check("isolation_keeps_slo") == nullptr);
    CHECK(test::scalar_of(calm, "no_isolation_delay_p99_over_bound") <= 1);
}

TEST_CASE("tenants: every check holds intact and fails when falsified" * test::native_only()) {
    const CheckAudit a = audit_checks(*find_experiment("tenants"));
    CHECK(a.problems.empty());
    CHECK(a.checks.size() == 47);  // 9 shared checks x 5 simulations, the SLO and the solo run
    for (const CheckProof& c : a.checks) {
        CAPTURE(c.key);
        CHECK(c.proven());
    }
}

TEST_CASE("tenants: max-min fair shares cap each tenant at its demand and split the rest by weight") {
    const std::vector<double> fair = max_min_fair_shares(90, {10, 50, 60}, {1, 1, 1});
    REQUIRE(fair.size() == 3);
    CHECK(fair[0] == 10);
    CHECK(fair[1] == doctest::Approx(40));
    CHECK(fair[2] == doctest::Approx(40));
    const std::vector<double> weighted = max_min_fair_shares(90, {100, 100}, {2, 1});
    CHECK(weighted[0] == doctest::Approx(60));
    CHECK(weighted[1] == doctest::Approx(30));
}

TEST_CASE("tenants: a burst outside the run is refused, named by its field") {
    const Experiment& e = *find_experiment("tenants");
    auto pp = parse_params(e.params, {{"burst_start_s", "200"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const auto issues = e.check(pp.params);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].key == "burst_start_s");
}

TEST_CASE("tenants: Kimi-K3's instances pass every fleet check; the claim is judged over the seeds") {
    // On the calibrated step model K3's decode step on 2 x H100 reads its routed experts (MXFP4) every
    // step: a tenth of Kimi-Linear's default load keeps the fleet below its capacity. Whether isolation
    // keeps the SLO there is what the seeds say (at this load it does on about half of them, and the
    // pooled p99 misses it): the check reports it with the spread, whichever way it goes.
    const Report r = test::run_module(
        "tenants", {{"preset", "kimi-k3"}, {"hardware", "gb300"}, {"gpus", "8"}, {"sessions_per_s", "0.04"}});
    for (const Check& c : r.checks)
        if (c.key != "isolation_keeps_slo") CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
    CHECK(test::check_keyed(r, "isolation_keeps_slo").detail.find("seeds within on their own") !=
          std::string::npos);
    REQUIRE(test::table_named(r, "The claim over seeds") != nullptr);
    CHECK(test::table_named(r, "The claim over seeds")->rows.size() == kClaimSeeds);
    bool state_noted = false;  // one checkpoint is K3's 449,372,160 B of state (reference/kimi_k3.md §2.1)
    for (const std::string& n : r.notes) state_noted |= n.find("428.6 MiB") != std::string::npos;
    CHECK(state_noted);
}
