// Module 6 `cow`: defaults run with every check passing, copy-on-write beats eager copies on KV but
// not on states, same report twice.
#include <doctest/doctest.h>

#include "core/model/accounting.h"
#include "core/modules/cow/cow.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

namespace {
Report run_cow(std::vector<std::pair<std::string, std::string>> kv) {
    return test::run_module("cow", kv, false);
}
double scalar(const Report& r, const char* k) { return test::scalar_of(r, k); }
}  // namespace

TEST_CASE("cow: defaults run, every check passes, same report twice") {
    const Experiment* e = find_experiment("cow");
    REQUIRE(e != nullptr);
    CHECK(e->number == 6);
    CHECK(e->component == "prefix caching");
    const Report a = run_cow({});
    test::all_checks_pass(a);
    CHECK(a.checks.size() >= 6);
    for (const char* key : {"eager_equals_alone", "cow_equals_alone", "released_eager", "released_cow",
                            "cow_state_copies", "cow_copies_partial_page_only"})
        CHECK(test::check_keyed(a, key).passed);
    CHECK(scalar(a, "peak_bytes_cow") < scalar(a, "peak_bytes_eager"));
    CHECK(scalar(a, "kv_bytes_copied_cow") < scalar(a, "kv_bytes_copied_eager"));
    CHECK(scalar(a, "state_copies_cow") == scalar(a, "state_copies_eager"));  // only deferred
    CHECK(scalar(a, "state_bytes") == double(account_memory(default_runnable_config()).state_bytes));
    CHECK(test::without_timing(a) == test::without_timing(run_cow({})));
}

TEST_CASE("cow: branching") {
    const Report r =
        run_cow({{"scenario", "branching"}, {"forks", "3"}, {"prompt_tokens", "50"}, {"gen", "2"}});
    for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
}

TEST_CASE("cow: the run estimate keeps the defaults within the limits and refuses longer runs") {
    test::estimate_within_limits("cow");
    // A long prompt prefilled by every fork alone, and many forks decoding many tokens.
    test::estimate_refuses("cow", {{"forks", "32"}, {"prompt_tokens", "2048"}}, "prompt_tokens");
    test::estimate_refuses("cow", {{"forks", "32"}, {"gen", "64"}}, "forks");
}
