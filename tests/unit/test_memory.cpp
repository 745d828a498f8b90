// Module 2 `memory`: the reference figures of reference/kda.md §5 and reference/serving.md §7.
#include <doctest/doctest.h>

#include <cmath>

#include "core/experiments/registry.h"
#include "core/model/accounting.h"

using namespace k3;

TEST_CASE("Kimi-Linear-48B-A3B accounting") {
    const auto c = *model_preset("kimi-linear-48b");
    CHECK(c.n_linear() == 20);
    CHECK(c.n_attention() == 7);
    // 0-indexed MLA layers 3, 7, 11, 15, 19, 23, 26
    for (int i : {3, 7, 11, 15, 19, 23, 26}) CHECK(c.layers[size_t(i)] == LayerKind::attention);
    const auto a = account_memory(c);
    CHECK(a.recurrent_bytes_per_layer == 2097152);
    CHECK(a.conv_bytes_per_layer == 73728);
    CHECK(a.state_bytes_per_layer == 2170880);
    CHECK(a.state_bytes == 43417600);
    CHECK(a.kv_bytes_per_token == 8064);
    CHECK(a.baseline_kv_bytes_per_token == 31104);
    CHECK(a.total_bytes(4096) == 76447744);
    CHECK(a.total_bytes(1048576) == 8499134464.0);
    CHECK(std::round(a.state_equivalent_tokens()) == 5384);
    CHECK(a.total_bytes(1048576) / a.baseline_bytes(1048576) == doctest::Approx(0.2606).epsilon(1e-3));
}

TEST_CASE("Qwen3-Next-80B-A3B accounting") {
    const auto a = account_memory(*model_preset("qwen3-next-80b"));
    CHECK(a.linear_layers == 36);
    CHECK(a.attention_layers == 12);
    CHECK(a.state_bytes_per_layer == 2146304);
    CHECK(a.state_bytes == 77266944);  // 73.69 MiB
    CHECK(a.kv_bytes_per_token == 24576);
    CHECK(std::round(a.state_equivalent_tokens()) == 3144);
}

TEST_CASE("memory module report: the issue's acceptance figures") {
    const Experiment& e = *find_experiment("memory");
    auto pp = parse_params(e.params, {{"preset", "kimi-linear-48b"}, {"context", "1048576"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const Report r = run_to_end(e, pp.params);
    CHECK(r.find_scalar("state_bytes")->value == 43417600);
    CHECK(r.find_scalar("kv_bytes_per_token")->value == 8064);
    CHECK(r.find_scalar("total_bytes")->value == 8499134464.0);
    CHECK(r.find_scalar("baseline_bytes")->value == 31104.0 * 1048576);
    CHECK(r.find_scalar("ratio_vs_baseline")->value == doctest::Approx(0.261).epsilon(2e-3));
    CHECK(r.find_scalar("break_even_tokens")->value == 5384);
    // 40 GiB: 5 hybrid sequences of 7.9 GiB, 1 all-attention sequence of 30.4 GiB
    CHECK(r.find_scalar("sequences_in_budget")->value == 5);
    CHECK(r.find_scalar("baseline_sequences_in_budget")->value == 1);
    CHECK(r.all_checks_passed());
    CHECK(r.checks.size() >= 4);
}

TEST_CASE("memory module: custom equals the preset it copies; checks can fail") {
    const Experiment& e = *find_experiment("memory");
    auto custom = parse_params(e.params, {{"preset", "custom"}}, RangePolicy::strict);
    const Report rc = run_to_end(e, custom.params);
    CHECK(rc.find_scalar("state_bytes")->value == 43417600);  // custom defaults are Kimi's dimensions
    CHECK(rc.find_scalar("kv_bytes_per_token")->value == 8064);
    auto q = parse_params(e.params, {{"preset", "custom"}, {"attn_kind", "gqa"}, {"heads", "16"}, {"layers", "48"},
                                     {"attn_last", "0"}},
                          RangePolicy::strict);
    const Report rq = run_to_end(e, q.params);
    CHECK(rq.find_scalar("state_bytes")->value == 77266944);
    CHECK(rq.find_scalar("kv_bytes_per_token")->value == 24576);
    auto bad = parse_params(e.params, {{"preset", "custom"}, {"heads", "3"}}, RangePolicy::strict);
    CHECK_FALSE(e.check(bad.params).empty());
}
