// Module 6 `cow`: defaults run with every check passing, copy-on-write beats eager copies on KV but
// not on states, same report twice.
#include <doctest/doctest.h>

#include "core/experiments/registry.h"
#include "test_module_util.h"

using namespace k3;

namespace {
Report run_cow(std::vector<std::pair<std::string, std::string>> kv) {
    return test::run_module("cow", kv, false);
}
double scalar(const Report& r, const char* k) { return test::scalar_of(r, k); }
}  // namespace

TEST_CASE("cow module: defaults run, every check passes, same report twice") {
    const Experiment* e = find_experiment("cow");
    REQUIRE(e != nullptr);
    CHECK(e->number == 6);
    CHECK(e->component == "prefix caching");
    const Report a = run_cow({});
    for (const Check& c : a.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
    CHECK(a.checks.size() >= 6);
    CHECK(scalar(a, "peak_bytes_cow") < scalar(a, "peak_bytes_eager"));
    CHECK(scalar(a, "kv_bytes_copied_cow") < scalar(a, "kv_bytes_copied_eager"));
    CHECK(scalar(a, "state_copies_cow") == scalar(a, "state_copies_eager"));  // only deferred
    Report a2 = a, b2 = run_cow({});
    a2.timing = {};
    b2.timing = {};
    CHECK(report_json(a2) == report_json(b2));
}

TEST_CASE("cow module: branching") {
    const Report r =
        run_cow({{"scenario", "branching"}, {"forks", "3"}, {"prompt_tokens", "50"}, {"gen", "2"}});
    for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
}
