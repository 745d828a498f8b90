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
    REQUIRE(t->rows.size() == kPrefixMethodCount - 1);  // the engine method only with engine != ideal
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

TEST_CASE("prefix: the run estimate keeps the defaults within the limits and refuses longer prompts") {
    test::estimate_within_limits("prefix");
    // One request alone past the limit (about 24 s natively): its prompt, not the request count.
    test::estimate_refuses("prefix", {{"requests", "1"}, {"shared_tokens", "2048"}}, "shared_tokens");
    // Eight 64-token outputs per pass and request (8 s natively; refused with its margin).
    test::estimate_refuses("prefix", {{"gen", "64"}}, "gen");
}

TEST_CASE("prefix: engine_plan follows SGLang's chunks and tracks, vLLM's aligned steps and block hits") {
    serve::ServerConfig c;
    c.engine = CacheEngine::sglang;
    c.sglang.chunked_prefill_tokens = 64;
    serve::EnginePlan e = serve::engine_plan(c, 150, 0, 0);
    CHECK(e.steps == std::vector<uint64_t>{64, 128, 150});
    REQUIRE(e.states.size() == 2);  // extra_buffer: the 22-token last chunk tracks nothing
    CHECK(e.states[1].pos == 128);
    CHECK(e.cache_len == 128);  // up to the last track
    c.sglang.mode = SglangMode::no_buffer;
    e = serve::engine_plan(c, 150, 0, 0);
    REQUIRE(e.states.size() == 3);
    CHECK(e.states[2].pos == 150);
    CHECK(e.cache_len == 150);
    // The branching point (KV match 140 floored to 64) inside a chunk of 128 from the state at 64.
    c.sglang.mode = SglangMode::extra_buffer;
    c.sglang.chunked_prefill_tokens = 128;
    e = serve::engine_plan(c, 200, 140, 64);
    CHECK(e.branching == 128);
    CHECK(e.steps == std::vector<uint64_t>{192, 200});
    REQUIRE(e.states.size() == 1);
    CHECK(e.states[0].pos == 128);
    CHECK(e.states[0].kind == CheckpointKind::junction);
    // vLLM: the attention hit on the block grid, the junction there, a step and a state at it.
    c.engine = CacheEngine::vllm;
    c.vllm.block_tokens = 64;
    e = serve::engine_plan(c, 150, 140, 64);
    CHECK(e.kv_hit == 128);
    CHECK(e.resume == 64);
    CHECK(e.branching == 128);
    CHECK(e.steps == std::vector<uint64_t>{128, 150});
    REQUIRE(e.states.size() == 1);
    CHECK(e.states[0].pos == 128);
    CHECK(e.cache_len == 128);
    CHECK(serve::engine_plan(c, 129, 200, 128).kv_hit == 128);  // capped at prompt - 1
}

TEST_CASE("prefix: under either engine every check passes and the engine's tree is drawn") {
    for (const char* engine : {"sglang", "vllm"}) {
        CAPTURE(engine);
        const Report r = test::run_module(
            "prefix", {{"engine", engine}, {"workload", "system"}, {"requests", "2"}, {"user_tokens", "4"}});
        test::all_checks_pass(r);
        CHECK(test::check_keyed(r, "engine_states_where_rules_put_them").passed);
        CHECK((r.find_check("vllm_hits_on_block_grid") != nullptr) == (std::string(engine) == "vllm"));
        CHECK(test::check_keyed(r, "aligned_resumes_bitwise").passed);
        // Request 1 leaves a state at 64 (a chunk end, a block end); request 2 resumes there.
        CHECK(test::scalar_of(r, "engine_states_cached") == 1);
        CHECK(test::scalar_of(r, "engine_token_hit_state") > 0);
        CHECK(r.trees.size() == 5);
    }
}

TEST_CASE("prefix: the engines refuse what they cannot run") {
    const Experiment& e = *find_experiment("prefix");
    auto level_of = [&](std::vector<std::pair<std::string, std::string>> kv, const char* key) {
        auto pp = parse_params(e.params, kv, RangePolicy::strict);
        REQUIRE(pp.ok());
        int level = -1;
        for (const ParamIssue& i : e.check(pp.params))
            if (i.key == key) level = int(i.level);
        return level;
    };
    CHECK(level_of({{"engine", "sglang"}, {"sglang_mode", "no_buffer"}, {"page_size", "4"}}, "page_size") ==
          int(ParamIssue::error));
    CHECK(level_of({{"engine", "vllm"}, {"state_capacity", "8"}}, "state_capacity") ==
          int(ParamIssue::error));
    CHECK(level_of({{"engine", "vllm"}, {"vllm_block_tokens", "48"}}, "vllm_block_tokens") ==
          int(ParamIssue::warning));
    CHECK(level_of({{"engine", "vllm"}, {"retention_interval", "often"}}, "retention_interval") ==
          int(ParamIssue::error));
}
