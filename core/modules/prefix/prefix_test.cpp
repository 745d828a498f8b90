// Module 4 `prefix`: defaults run with every check passing, the KV-only divergence and the bitwise
// resumes are where the module says, same report twice, validation.
#include <doctest/doctest.h>

#include "core/modules/prefix/prefix.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

TEST_CASE("prefix: defaults run, every check passes, same report twice") {
    const Experiment* e = find_experiment("prefix");
    REQUIRE(e != nullptr);
    CHECK(e->number == 4);
    CHECK(e->component == "prefix caching");
    const Report a = test::run_module("prefix", {});
    test::all_checks_pass(a);
    CHECK(a.checks.size() >= 7);
    for (const char* key : {"aligned_resumes_bitwise", "kv_only_flagged", "off_grid_within_rounding",
                            "other_resumes_within_rounding", "hits_match_token_recount",
                            "prefilled_exactly_the_rest", "tree_pages_pool_agree", "pool_returns_to_zero"})
        CHECK(test::check_keyed(a, key).passed);
    CHECK(test::scalar_of(a, "kv_only_max_logit_diff") > 0.01);
    CHECK(test::scalar_of(a, "bitwise_resumes") >= 4);
    CHECK(test::scalar_of(a, "recomputed_tokens") < test::scalar_of(a, "recomputed_tokens_no_cache"));
    CHECK(test::scalar_of(a, "token_hit_state") <= test::scalar_of(a, "token_hit_kv"));
    const Table* t = test::table_named(a, "What does a second request actually save");
    REQUIRE(t != nullptr);
    REQUIRE(t->rows.size() == kPrefixMethodCount);
    // KV-only saves tokens and is wrong in every request that reused KV.
    const size_t wrong = 11;
    REQUIRE(t->columns[wrong] == prefix_exactness_name(PrefixExactness::wrong));
    CHECK(std::get<double>(t->rows[size_t(PrefixMethod::kv_only)][wrong]) > 0);
    CHECK(std::get<double>(t->rows[size_t(PrefixMethod::none)][wrong]) == 0);  // no cache is the reference
    CHECK(a.trees.size() == 4);
    CHECK(a.timing.tables.size() == 1);
    const Report b = test::run_module("prefix", {});
    CHECK(test::without_timing(a) == test::without_timing(b));
}

TEST_CASE("prefix: an interval off the chunk grid is a warning, and its resumes are within rounding") {
    const Experiment& e = *find_experiment("prefix");
    const std::vector<std::pair<std::string, std::string>> off_grid = {
        {"interval", "48"}, {"workload", "system"}, {"requests", "2"}};
    auto pp = parse_params(e.params, off_grid, RangePolicy::strict);
    REQUIRE(pp.ok());
    const auto issues = e.check(pp.params);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].level == ParamIssue::warning);
    CHECK(issues[0].key == "interval");
    auto stale = off_grid;
    stale.push_back({"kv_only_start", "stale"});
    const Report r = test::run_module("prefix", stale);
    test::all_checks_pass(r);
    // The second request resumes at 48, off the grid: not bitwise, within rounding, and said so.
    CHECK(test::check_keyed(r, "other_resumes_within_rounding").passed);
    // Nothing resumed on the grid: a note says so instead of a vacuous check.
    CHECK(r.find_check("aligned_resumes_bitwise") == nullptr);
    CHECK(test::scalar_of(r, "bitwise_resumes") == 0);
}

TEST_CASE("prefix: refuses what it cannot run") {
    const Experiment& e = *find_experiment("prefix");
    auto bad = parse_params(e.params, {{"interval", "40"}, {"page_size", "16"}}, RangePolicy::strict);
    REQUIRE(bad.ok());
    bool err = false;
    for (const ParamIssue& i : e.check(bad.params))
        err = err || (i.level == ParamIssue::error && i.key == "interval");
    CHECK(err);
    auto big = parse_params(e.params, {{"requests", "32"}, {"shared_tokens", "2048"}}, RangePolicy::strict);
    REQUIRE(big.ok());
    CHECK_FALSE(e.check(big.params).empty());
    // The estimate behind the refusal: 32 requests of each scenario over a 2,048-token prefix.
    PrefixParams p;
    p.requests = 32;
    p.shared_tokens = 2048;
    CHECK(estimate_prefix(p).requests == 96);
}
