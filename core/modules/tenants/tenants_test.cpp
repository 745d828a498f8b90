// Module 12 `tenants`: isolation keeps the well-behaved tenants near their solo run; without a
// mechanism the figures still come; the fair shares; bad parameters.
#include <doctest/doctest.h>

#include "core/modules/tenants/tenants.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

TEST_CASE("tenants: isolation keeps the well-behaved tenants near their solo run") {
    const Experiment* e = find_experiment("tenants");
    REQUIRE(e != nullptr);
    CHECK(e->number == 12);
    CHECK(e->component == "fleet scheduling");
    const Report r = test::run_module("tenants", {});
    test::all_checks_pass(r);
    test::check_keys_unique(r);  // the fleet checks of every mechanism's run
    CHECK(test::check_keyed(r, "isolation_within_tolerance").passed);
    CHECK(test::scalar_of(r, "isolation_ratio") <= 2.5);
    CHECK(test::scalar_of(r, "no_isolation_ratio") >= 10);
    CHECK(test::scalar_of(r, "jain_tenants") > 0);
    CHECK(test::without_timing(r) == test::without_timing(test::run_module("tenants", {})));
    // Without a mechanism there is nothing to check but the figures still come.
    const Report f = test::run_module("tenants", {{"mechanism", "fcfs"}, {"quotas", "0"}});
    test::all_checks_pass(f);
    CHECK(f.find_check("isolation_within_tolerance") == nullptr);
    CHECK(test::scalar_of(f, "isolation_ratio") == doctest::Approx(test::scalar_of(f, "no_isolation_ratio")));
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
