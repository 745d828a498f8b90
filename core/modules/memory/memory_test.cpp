// Module 2 `memory`: the reference figures of reference/kda.md §5 and reference/serving.md §7.
#include <doctest/doctest.h>

#include <cmath>

#include "core/modules/memory/memory.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

TEST_CASE("memory: Kimi-Linear-48B-A3B accounting") {
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

TEST_CASE("memory: Qwen3-Next-80B-A3B accounting") {
    const auto a = account_memory(*model_preset("qwen3-next-80b"));
    CHECK(a.linear_layers == 36);
    CHECK(a.attention_layers == 12);
    CHECK(a.state_bytes_per_layer == 2146304);
    CHECK(a.state_bytes == 77266944);  // 73.69 MiB
    CHECK(a.kv_bytes_per_token == 24576);
    CHECK(std::round(a.state_equivalent_tokens()) == 3144);
}

TEST_CASE("memory: Kimi-K3, whole and per GPU, bf16 and fp8 (reference/kimi_k3.md §2)") {
    const auto c = *model_preset("kimi-k3");
    CHECK(c.n_linear() == 69);
    CHECK(c.n_attention() == 24);
    CHECK(c.conv_channels() == 36864);
    // 1-based MLA layers 4, 8, ..., 92 and 93: the last two are both MLA
    for (int i = 1; i <= 93; ++i)
        CHECK((c.layers[size_t(i - 1)] == LayerKind::attention) == (i % 4 == 0 || i == 93));
    const Report r = test::run_module("memory", {{"preset", "kimi-k3"}});
    CHECK(test::scalar_of(r, "state_bytes") == 449372160);
    CHECK(test::scalar_of(r, "state_bytes_per_layer") == 6512640);
    CHECK(test::scalar_of(r, "kv_bytes_per_token") == 27648);
    CHECK(test::scalar_of(r, "baseline_kv_bytes_per_token") == 107136);
    CHECK(test::scalar_of(r, "break_even_tokens") == 16253);
    test::all_checks_pass(r);
    CHECK(test::check_keyed(r, "kimi_k3_reference_figures").passed);
    // Another KV dtype changes the figures, not the published ones: those checks are not made then.
    const Report kimi_fp8 = test::run_module("memory", {{"preset", "kimi-linear-48b"}, {"kv_dtype", "fp8"}});
    CHECK(test::scalar_of(kimi_fp8, "kv_bytes_per_token") == 4032);
    CHECK(kimi_fp8.find_check("kimi_linear_reference_figures") == nullptr);
    test::all_checks_pass(kimi_fp8);
    const Report fp8 = test::run_module("memory", {{"preset", "kimi-k3"}, {"kv_dtype", "fp8"}});
    CHECK(test::scalar_of(fp8, "kv_bytes_per_token") == 13824);
    CHECK(test::scalar_of(fp8, "break_even_tokens") == 32507);
    // TP8: 12 heads per rank; the MLA latent stays whole on every rank
    const Report tp8 = test::run_module("memory", {{"preset", "kimi-k3"}, {"tp", "8"}});
    CHECK(test::scalar_of(tp8, "state_bytes_per_layer") == 814080);
    CHECK(test::scalar_of(tp8, "kv_bytes_per_token") == 27648);
    test::all_checks_pass(tp8);
    const Experiment& e = *find_experiment("memory");
    auto bad = parse_params(e.params, {{"preset", "kimi-k3"}, {"tp", "5"}}, RangePolicy::strict);
    REQUIRE(e.check(bad.params).size() == 1);
    CHECK(e.check(bad.params)[0].key == "tp");
}

TEST_CASE("memory: the report's acceptance figures at 1M tokens") {
    const Report r = test::run_module("memory", {{"preset", "kimi-linear-48b"}, {"context", "1048576"}});
    CHECK(test::scalar_of(r, "state_bytes") == 43417600);
    CHECK(test::scalar_of(r, "kv_bytes_per_token") == 8064);
    CHECK(test::scalar_of(r, "total_bytes") == 8499134464.0);
    CHECK(test::scalar_of(r, "baseline_bytes") == 31104.0 * 1048576);
    CHECK(test::scalar_of(r, "ratio_vs_baseline") == doctest::Approx(0.261).epsilon(2e-3));
    CHECK(test::scalar_of(r, "break_even_tokens") == 5384);
    // 40 GiB: 5 hybrid sequences of 7.9 GiB, 1 all-attention sequence of 30.4 GiB
    CHECK(test::scalar_of(r, "sequences_in_budget") == 5);
    CHECK(test::scalar_of(r, "baseline_sequences_in_budget") == 1);
    test::all_checks_pass(r);
    CHECK(test::check_keyed(r, "kimi_linear_reference_figures").passed);
}

TEST_CASE("memory: custom equals the preset it copies; bad heads are refused") {
    MemoryParams p;
    p.preset = ModelPreset::custom;
    const MemoryResult kimi = run_memory(p);  // custom defaults are Kimi's dimensions
    CHECK(kimi.account.state_bytes == 43417600);
    CHECK(kimi.account.kv_bytes_per_token == 8064);
    p.custom.attn_kind = AttnKind::gqa;
    p.custom.heads = 16;
    p.custom.layers = 48;
    p.custom.attn_last = false;
    const MemoryResult qwen = run_memory(p);
    CHECK(qwen.account.state_bytes == 77266944);
    CHECK(qwen.account.kv_bytes_per_token == 24576);
    const Experiment& e = *find_experiment("memory");
    auto bad = parse_params(e.params, {{"preset", "custom"}, {"heads", "3"}}, RangePolicy::strict);
    const auto issues = e.check(bad.params);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].key == "v_heads");
}

TEST_CASE("memory: custom dimensions with a preset are ignored, and the report says so") {
    MemoryParams p;
    p.custom.heads = 16;
    CHECK(run_memory(p).custom_ignored);
    CHECK_FALSE(run_memory(MemoryParams{}).custom_ignored);
}

TEST_CASE("memory: every check holds intact and fails when falsified" * test::native_only()) {
    test::all_checks_proven("memory", 6);
}

TEST_CASE("memory: Kimi-K3 is the default model") {
    CHECK(MemoryParams{}.preset == ModelPreset::kimi_k3);
    const Report r = test::run_module("memory", {});
    CHECK(test::scalar_of(r, "state_bytes") == 449372160);
    CHECK(test::check_keyed(r, "kimi_k3_reference_figures").passed);
}

TEST_CASE("memory: every run is closed form, within the run limits at its largest parameters") {
    test::estimate_within_limits("memory");
    const RunCost c = test::estimate_within_limits("memory", {{"preset", "custom"},
                                                              {"layers", "256"},
                                                              {"heads", "256"},
                                                              {"v_heads", "256"},
                                                              {"head_k", "1024"},
                                                              {"head_v", "1024"},
                                                              {"context", "16777216"}});
    CHECK(c.counted == "256 layers accounted and recounted (closed form)");
}
