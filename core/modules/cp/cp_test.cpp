// Module 9 `cp`: declaration, checks and report keys with defaults and small variations, determinism
// outside "timing", refusal of impossible parameter combinations.
#include <doctest/doctest.h>

#include "core/modules/cp/cp.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

namespace {
Report run_cp(const std::vector<std::pair<std::string, std::string>>& kv) {
    return test::run_module("cp", kv);
}
}  // namespace

TEST_CASE("cp: declared as module 9 with texts and parameters") {
    const Experiment* e = find_experiment("cp");
    REQUIRE(e);
    CHECK(e->number == 9);
    CHECK(e->component == "context parallelism");
    for (const char* key :
         {"tokens", "ranks", "split", "chunk", "start", "seed", "preset", "context", "link"}) {
        bool found = false;
        for (const auto& p : e->params) found |= p.key == key;
        CHECK_MESSAGE(found, key);
    }
    CHECK(e->how_it_works.find("reference/kda.md") != std::string::npos);
    CHECK(e->where_it_does_not_pay.find("Sources") != std::string::npos);
    auto pp = parse_params(e->params, {{"tokens", "20"}, {"ranks", "30"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    bool refused = false;
    for (const ParamIssue& i : e->check(pp.params))
        refused |= i.level == ParamIssue::error && i.key == "ranks";
    CHECK(refused);
}

TEST_CASE("cp: too few tokens for uneven slices falls back to even ones, with a warning on split") {
    CpParams p;
    p.tokens = 20;
    p.ranks = 7;
    CHECK(cp_even_fallback(p));
    p.split = CpSplit::even;
    CHECK_FALSE(cp_even_fallback(p));
    const Experiment& e = *find_experiment("cp");
    auto pp = parse_params(e.params, {{"tokens", "20"}, {"ranks", "7"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const auto issues = e.check(pp.params);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].level == ParamIssue::warning);
    CHECK(issues[0].key == "split");
}

TEST_CASE("cp: small runs pass every check and report the errors and costs") {
    for (const auto& kv : std::vector<std::vector<std::pair<std::string, std::string>>>{
             {{"tokens", "150"}, {"ranks", "7"}, {"chunk", "16"}},
             {{"tokens", "120"}, {"ranks", "3"}, {"start", "prefix"}, {"chunk", "32"}},
             {{"tokens", "64"}, {"ranks", "1"}},
             {{"tokens", "100"}, {"ranks", "4"}, {"split", "even"}, {"preset", "qwen3-next-80b"}}}) {
        const Report r = run_cp(kv);
        test::all_checks_pass(r);
        CHECK(r.checks.size() >= 8);
        for (const char* key :
             {"naive_error_closed_form_fp64", "naive_error_closed_form_fp32", "linear_naive_sum_exact",
              "bytes_per_rank_match_held_maps", "exact_combiners_equal_one_rank", "fixups_agree",
              "halo_core_inputs_bitwise", "halo_layer_equals_one_rank"})
            CHECK(test::check_keyed(r, key).passed);
        for (const char* key : {"rel_err_scan", "rel_err_serial", "rel_err_naive", "naive_state_rel_err",
                                "naive_closed_form_gap", "bytes_per_rank", "bytes_per_rank_preset",
                                "speedup_scan", "halo_rel_err_without", "halo_rel_err_with"})
            CHECK_MESSAGE(r.find_scalar(key), key);
        CHECK(test::scalar_of(r, "rel_err_scan") < 1e-5);
        if (test::scalar_of(r, "ranks") > 1) {
            CHECK(test::check_keyed(r, "naive_sum_wrong_for_kda").passed);
            CHECK(test::check_keyed(r, "no_halo_wrong_tokens").passed);
            CHECK(test::scalar_of(r, "naive_state_rel_err") > 1e-2);
            CHECK(test::scalar_of(r, "halo_rel_err_without") > 100 * test::scalar_of(r, "halo_rel_err_with"));
        }
        CHECK(r.tables.size() >= 5);
        CHECK(r.series.size() >= 4);
    }
    const Report k = run_cp({{"tokens", "80"}, {"ranks", "2"}, {"preset", "kimi-linear-48b"}});
    CHECK(test::scalar_of(k, "bytes_per_rank_preset") == 4194304.0);  // Kimi Linear, reference/kda.md §4.2
    CHECK(test::scalar_of(k, "bytes_per_rank") == 4.0 * 4 * (64 * 64 + 64 * 64));
}

TEST_CASE("cp: the figures at scale come from the preset alone") {
    CpParams p;
    CHECK(p.preset == ModelPreset::kimi_k3);  // the default
    p.preset = ModelPreset::kimi_linear_48b;
    const CpAtScale kimi = cp_at_scale(p);
    CHECK(kimi.map_bytes == 4194304.0);            // reference/kda.md §4.2: 4 MiB per layer per rank
    CHECK(kimi.held_map_bytes == kimi.map_bytes);  // what local_maps allocates at that shape
    REQUIRE(!kimi.sweep.empty());
    CHECK(kimi.sweep.front().ranks == 1);
    CHECK(kimi.sweep.back().ranks == 256);
    p.context = 1024;
    p.preset = ModelPreset::qwen3_next_80b;
    const CpAtScale qwen = cp_at_scale(p);
    CHECK(qwen.model.name == "Qwen3-Next-80B-A3B");
    CHECK(qwen.sweep.back().ranks == 256);
}

TEST_CASE("cp: everything outside timing is the same on a second run") {
    const std::vector<std::pair<std::string, std::string>> kv = {
        {"tokens", "90"}, {"ranks", "5"}, {"seed", "3"}};
    CHECK(test::without_timing(run_cp(kv)) == test::without_timing(run_cp(kv)));
}

TEST_CASE("cp: each falsifier fails every check it names (a small run)" * test::native_only()) {
    test::falsifiers_fail_their_checks("cp", {{"tokens", "90"}, {"ranks", "5"}});
}

TEST_CASE("cp: Kimi-K3 at scale holds 12 MiB maps per layer per rank and passes every check") {
    CpParams p;
    p.preset = ModelPreset::kimi_k3;
    const CpAtScale k3 = cp_at_scale(p);
    CHECK(k3.model.name == "Kimi-K3");
    CHECK(k3.map_bytes == 96.0 * (128 * 128 + 128 * 128) * 4);  // 12,582,912 B
    CHECK(k3.held_map_bytes == k3.map_bytes);                   // what local_maps allocates at that shape
    const Report r = run_cp({{"tokens", "80"}, {"ranks", "3"}, {"preset", "kimi-k3"}});
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "bytes_per_rank_preset") == 12582912.0);
    CHECK(test::scalar_of(r, "bytes_per_rank_preset_model") == 69 * 12582912.0);
}

TEST_CASE("cp: every run is within the run limits, the longest prompt over the most ranks included") {
    test::estimate_within_limits("cp");
    test::estimate_within_limits("cp", {{"tokens", "4096"}, {"ranks", "64"}, {"chunk", "256"}});
}
