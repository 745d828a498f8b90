// Module 13 `faults`: zero violations with the guard and some without, live migration loses nothing,
// reproducible reports, a fault on an instance that does not exist is refused.
#include <doctest/doctest.h>

#include "core/modules/faults/faults.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

TEST_CASE("faults: zero violations with the guard, some without; migration loses nothing") {
    const Experiment* e = find_experiment("faults");
    REQUIRE(e != nullptr);
    CHECK(e->number == 13);
    const Report r = test::run_module("faults", {});
    test::all_checks_pass(r);
    test::check_keys_unique(r);  // the checks of every recovery's run, with and without the guard
    CHECK(test::scalar_of(r, "requests_moved") > 0);
    CHECK(test::scalar_of(r, "consistency_violations") == 0);
    CHECK(test::check_keyed(r, "guard_no_violations").passed);
    const Report loose = test::run_module("faults", {{"guard", "0"}, {"compare", "0"}});
    test::all_checks_pass(loose);
    CHECK(test::scalar_of(loose, "consistency_violations") > 0);
    const Report m =
        test::run_module("faults", {{"fault", "drain"}, {"recovery", "migrate"}, {"compare", "0"}});
    test::all_checks_pass(m);
    CHECK(test::check_keyed(m, "migration_lost_nothing").passed);
    CHECK(test::scalar_of(m, "migrated_bytes") > 0);
    CHECK(test::without_timing(r) == test::without_timing(test::run_module("faults", {})));

    auto pp = parse_params(e->params, {{"fault_instance", "9"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    bool found = false;
    for (const ParamIssue& i : e->check(pp.params))
        found |= i.key == "fault_instance" && i.level == ParamIssue::error;
    CHECK(found);
}
