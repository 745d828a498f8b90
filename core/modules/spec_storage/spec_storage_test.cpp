// Module 7 `spec-storage`: its declaration, the default view's figures (Kimi-K3's RecoverSSM, run on the
// runnable model) and the Kimi-Linear view's (reference/kda.md §6), checks passing, determinism outside
// "timing", accounting-only runs of every preset, and every check proven by its falsifier.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/modules/spec_storage/spec_storage.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

TEST_CASE("spec-storage: declared as module 7 with its parameters, texts and headlines") {
    const Experiment* e = find_experiment("spec-storage");
    REQUIRE(e);
    CHECK(e->number == 7);
    CHECK(e->component == "speculative decoding");
    for (const char* k : {"preset", "draft_len", "variant", "running_requests"})
        CHECK_MESSAGE(e->defaults().spec(k) != nullptr, k);
    CHECK(e->how_it_works.find("Sources") != std::string::npos);
    CHECK(e->where_it_does_not_pay.find("N = 1") != std::string::npos);
    REQUIRE(e->headlines.size() == 3);
    CHECK(e->headlines[0].scalar_key == "vllm_ratio_none");  // Kimi-K3 (the defaults), N = 7
    CHECK(e->headlines[1].scalar_key == "ratio_n_snapshots");
    CHECK(e->headlines[2].scalar_key == "ratio_counting_confirmed");
    // The defaults are the flagship: Kimi-K3's RecoverSSM at its deployed draft length.
    const SpecStorageParams d = spec_storage_params().read(e->defaults());
    CHECK(d.preset == ModelPreset::kimi_k3);
    CHECK(d.draft_len == 7);
    CHECK(d.variant == spec::RecordVariant::recoverssm);
    // The Kimi-Linear view's published-figure checks run in the audit.
    REQUIRE(e->audit_params.size() == 1);
}

TEST_CASE("spec-storage: the default run is RecoverSSM, run on the runnable model, beside its closed form") {
    const Report r = test::run_module("spec-storage", {});
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "snapshot_bytes_per_layer") == 6512640);
    CHECK(test::scalar_of(r, "record_bytes_per_token_per_layer") == 98304);
    CHECK(test::scalar_of(r, "linear_layers") == 69);
    // The runnable-model demo ran RecoverSSM itself: bitwise checks, and restore times under timing only.
    for (const char* key : {"copy_equals_replay", "copy_equals_direct", "replay_equals_direct",
                            "variant_exactness_claims", "one_pass_logits_bitwise", "recoverssm_fold_bitwise",
                            "closed_form_within_tolerance", "held_bytes_equal_accounting"})
        CHECK_MESSAGE(test::check_keyed(r, key).passed, key);
    const double err = test::scalar_of(r, "closed_form_rel_error");
    CHECK(err > 0);  // N = 7: the closed form rounds differently
    CHECK(err <= kClosedFormTolerance);
    CHECK(test::scalar_of(r, "closed_form_rel_error_fp64") <= kClosedFormTolerance);
    CHECK(r.timing.series.size() == 4);
    for (const auto& s : r.series) CHECK(s.name.find("ms") == std::string::npos);
}

TEST_CASE("spec-storage: the Kimi-Linear view shows the quarter figure under both conventions") {
    const Report r = test::run_module(
        "spec-storage",
        {{"preset", "kimi-linear-48b"}, {"draft_len", "4"}, {"variant", "minimal_exact"}, {"demo", "0"}});
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "snapshot_bytes_per_layer") == 2170880);
    CHECK(test::scalar_of(r, "record_bytes_per_token_per_layer") == 41088);
    CHECK(std::round(test::scalar_of(r, "ratio_n_snapshots") * 100) == 372);
    CHECK(std::round(test::scalar_of(r, "ratio_counting_confirmed") * 100) == 465);
    CHECK(std::fabs(test::scalar_of(r, "projection_share") - 0.269) < 0.001);
    CHECK(test::check_keyed(r, "kimi_linear_reference_figures").passed);
    CHECK(test::check_keyed(r, "kimi_linear_record_variants").passed);
    // Both conventions are named in the labels.
    CHECK(r.find_scalar("ratio_n_snapshots")->label.find("N snapshots") != std::string::npos);
    CHECK(r.find_scalar("ratio_counting_confirmed")->label.find("confirmed") != std::string::npos);
}

TEST_CASE("spec-storage: deterministic outside timing; accounting-only runs; every preset and variant") {
    const std::vector<std::pair<std::string, std::string>> kv = {{"draft_len", "3"},
                                                                 {"variant", "delta_conv"}};
    const Report a = test::run_module("spec-storage", kv), b = test::run_module("spec-storage", kv);
    CHECK(test::without_timing(a) == test::without_timing(b));
    CHECK(a.all_checks_passed());
    for (const char* preset : {"kimi-linear-48b", "qwen3-next-80b", "tiny", "small"})
        for (const char* v : {"core_only", "layer_input"}) {
            const Report r = test::run_module(
                "spec-storage", {{"preset", preset}, {"variant", v}, {"demo", "0"}, {"draft_len", "8"}});
            CHECK(r.all_checks_passed());
            CHECK(test::scalar_of(r, "ratio_counting_confirmed") > test::scalar_of(r, "ratio_n_snapshots"));
        }
    // A variant that claims S only passes its own (different) checks.
    const Report s_only = test::run_module("spec-storage", {{"variant", "core_only"}});
    CHECK(s_only.all_checks_passed());
    CHECK(test::check_keyed(s_only, "copy_equals_replay").passed);
    CHECK(s_only.find_check("replay_equals_direct") == nullptr);
}

TEST_CASE("spec-storage: Kimi-K3 RecoverSSM record and vLLM's pages (kimi_k3.md §3.3)") {
    const Report r = test::run_module(
        "spec-storage",
        {{"preset", "kimi-k3"}, {"variant", "recoverssm"}, {"draft_len", "7"}, {"demo", "0"}});
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "record_bytes_per_token_per_layer") == 98304);  // 96 x 1,024
    CHECK(test::scalar_of(r, "vllm_snapshot_page_bytes") == 7028736);
    CHECK(test::scalar_of(r, "vllm_recoverssm_page_bytes") == 7815168);
    CHECK(std::round(test::scalar_of(r, "vllm_ratio_none") * 100) == 719);
    CHECK(std::round(test::scalar_of(r, "vllm_ratio_align") * 100) == 405);
    for (const char* key : {"kimi_k3_recoverssm_record", "kimi_k3_vllm_page_table",
                            "vllm_snapshot_page_widens_window", "recoverssm_page_records_equal_records"})
        CHECK_MESSAGE(test::check_keyed(r, key).passed, key);
    // The closed form of §3.3 at N = 1 and N = 8, against the scalars of those runs.
    for (int n : {1, 8}) {
        const Report x = test::run_module("spec-storage", {{"preset", "kimi-k3"},
                                                           {"variant", "recoverssm"},
                                                           {"draft_len", std::to_string(n)},
                                                           {"demo", "0"}});
        const double S = 6291456, C = 73728.0 * (3 + n), R = 98304.0 * (1 + n);
        CHECK(test::scalar_of(x, "vllm_ratio_none") == doctest::Approx((1 + n) * (S + C) / (S + C + R)));
        CHECK(test::scalar_of(x, "vllm_ratio_align") ==
              doctest::Approx((2 + n) * (S + C) / (2 * (S + C + R))));
    }
    // Kimi-Linear's existing figures stay; the recoverssm demo claims exactness and proves it.
    const Report kl = test::run_module("spec-storage", {{"preset", "kimi-linear-48b"}, {"draft_len", "4"}});
    CHECK(kl.all_checks_passed());
    CHECK(test::scalar_of(kl, "record_bytes_per_token_per_layer") == 32768);  // 32 x 1,024
    CHECK(test::check_keyed(kl, "kimi_linear_reference_figures").passed);
    CHECK(test::check_keyed(kl, "replay_equals_direct").passed);
}

TEST_CASE("spec-storage: every check holds intact and fails when falsified" * test::native_only()) {
    test::all_checks_proven("spec-storage", 17);
}

TEST_CASE("spec-storage: every run is within the run limits, the longest draft included") {
    test::estimate_within_limits("spec-storage");
    CHECK(test::estimate_within_limits("spec-storage", {{"demo", "0"}}).counted == "closed form");
    // N = 32 with a ring of 32 (a smaller ring is a warning) and the most running requests.
    test::estimate_within_limits(
        "spec-storage", {{"draft_len", "32"}, {"ring_capacity", "32"}, {"running_requests", "4096"}});
}
