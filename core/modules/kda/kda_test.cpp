// Module 1 `kda`: its declaration and report keys, its checks, determinism of everything outside
// "timing", and the run estimate that refuses runs beyond the run limits.
#include <doctest/doctest.h>

#include <string>

#include "core/model/model_cache.h"
#include "core/modules/kda/kda.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

namespace {

// The module run as the CLI runs it; the parameters must raise no issue, not even a warning. Without
// the runnable model unless `kv` names one (one test runs it).
Report run_kda(std::vector<std::pair<std::string, std::string>> kv) {
    bool model = false;
    for (const auto& [k, v] : kv) model |= k == "model";
    if (!model) kv.push_back({"model", "none"});
    return test::run_module("kda", kv, /*warnings_ok=*/false);
}

}  // namespace

TEST_CASE("kda: declared as module 1 with its parameter keys") {
    const Experiment* e = find_experiment("kda");
    REQUIRE(e);
    CHECK(e->number == 1);
    CHECK(e->component == "foundation");
    for (const char* key : {"heads", "k", "v", "tokens", "chunk", "seed", "gate_strength", "group"}) {
        bool found = false;
        for (const auto& p : e->params) found |= p.key == key;
        CHECK_MESSAGE(found, key);
    }
    CHECK(!e->how_it_works.empty());
    CHECK(!e->where_it_does_not_pay.empty());
}

TEST_CASE("kda: a small run passes its checks and reports its error, bits and throughput keys") {
    const Report r = run_kda(
        {{"heads", "2"}, {"group", "2"}, {"k", "20"}, {"v", "36"}, {"tokens", "70"}, {"chunk", "16"}});
    CHECK(r.all_checks_passed());
    CHECK(r.checks.size() == 5);
    for (const char* key :
         {"recurrent_close_to_fp64", "chunked_close_to_fp64", "decode_steps_reproduce_prefill",
          "split_prefill_off_grid_close_to_fp64", "affine_map_gives_final_state"})
        CHECK_MESSAGE(test::check_keyed(r, key).passed, key);
    // Scalar against SIMD only where there are SIMD kernels, and under timing: the builds' reports agree.
    // So are the FMA variants' check, where the build has them.
    CHECK(r.timing.checks.size() == (kda::simd_enabled() ? 1u : 0u) + (kda::fma_enabled() ? 1u : 0u));
    if (kda::simd_enabled()) CHECK(test::check_keyed(r, "scalar_simd_same_bits").passed);
    if (kda::fma_enabled()) CHECK(test::check_keyed(r, "fma_close_to_fp64").passed);
    for (const char* key :
         {"rel_err_recurrent", "rel_err_chunked", "max_abs_chunked_vs_recurrent", "bits_digest"})
        CHECK_MESSAGE(r.find_scalar(key), key);
    CHECK(test::scalar_of(r, "rel_err_recurrent") < 1e-5);
    CHECK(test::scalar_of(r, "rel_err_chunked") < 1e-5);
    CHECK(test::scalar_of(r, "rel_err_recurrent") > 0);  // fp32 is not fp64: a real comparison
    bool rec = false, ch = false, arch = false;
    for (const auto& s : r.timing.scalars) {
        rec |= s.key == "head_tokens_per_s_recurrent" && s.value > 0;
        ch |= s.key == "head_tokens_per_s_chunked" && s.value > 0;
    }
    for (const auto& t : r.timing.texts) arch |= t.key == "simd_arch" && !t.text.empty();
    CHECK(rec);
    CHECK(ch);
    CHECK(arch);
    // The device's limits and every timed kernel's fraction of its own.
    for (const char* key :
         {"device_mul_add_flops", "device_rmw_L1", "device_rmw_memory", "device_rmw_working_set",
          "fraction_of_limit_decode", "fraction_of_limit_chunked"}) {
        const Scalar* s = nullptr;
        for (const auto& x : r.timing.scalars)
            if (x.key == key) s = &x;
        CHECK_MESSAGE((s && s->value > 0), key);
    }
    REQUIRE(r.timing.tables.size() == 1);
    CHECK(r.timing.tables[0].rows.size() == (kda::fma_enabled() ? 9u : 7u));
    REQUIRE(!r.series.empty());
    CHECK(r.series[0].x.size() >= 5);  // error against chunk size: 1, 2, 4, ..., 64, 70
    CHECK(r.timing.series.size() >= 2);
}

TEST_CASE("kda: the runnable model's prefill and decode on the device's roofline") {
    const Report r = run_kda(
        {{"heads", "1"}, {"k", "16"}, {"v", "16"}, {"tokens", "16"}, {"chunk", "16"}, {"model", "tiny"}});
    CHECK(r.all_checks_passed());
    REQUIRE(r.timing.tables.size() == 2);
    const Table& t = r.timing.tables[1];
    CHECK(t.name.find("tiny") != std::string::npos);
    REQUIRE(t.rows.size() == 2);
    for (const auto& row : t.rows) {
        CHECK(std::get<double>(row[1]) > 0);  // tokens/s
        CHECK(std::get<double>(row[3]) > 0);  // its limit
    }
    // prefill batches the weights: far more arithmetic per byte than decode
    CHECK(std::get<double>(t.rows[0][2]) > 10 * std::get<double>(t.rows[1][2]));
    bool weights = false;
    for (const auto& s : r.timing.scalars) weights |= s.key == "device_read_weights" && s.value > 0;
    CHECK(weights);
}

TEST_CASE("kda: the run estimate's parameter counts are the runnable models'") {
    for (KdaModel m : {KdaModel::k3_tiny, KdaModel::tiny}) {
        std::string error;
        const auto model = model::cached_model({.preset = kda_model_preset(m)}, &error);
        REQUIRE_MESSAGE(model, error);
        CHECK(double(model->weights().parameters()) == kda_model_parameters(m));
    }
}

TEST_CASE("kda: small's parameter count is the runnable model's" * test::native_only()) {
    std::string error;
    const auto model = model::cached_model({.preset = "small"}, &error);
    REQUIRE_MESSAGE(model, error);
    CHECK(double(model->weights().parameters()) == kda_model_parameters(KdaModel::small));
}

TEST_CASE("kda: everything outside timing is the same on a second run") {
    const std::vector<std::pair<std::string, std::string>> kv = {
        {"heads", "1"}, {"k", "16"},       {"v", "16"},  {"tokens", "40"},
        {"chunk", "8"}, {"gate", "model"}, {"seed", "7"}};
    const Report a = run_kda(kv), b = run_kda(kv);
    CHECK(test::without_timing(a) == test::without_timing(b));
    // and a different seed changes the digest
    auto kv2 = kv;
    kv2.back().second = "8";
    const Report c = run_kda(kv2);
    CHECK(test::scalar_of(c, "bits_digest") != test::scalar_of(a, "bits_digest"));
}

TEST_CASE("kda: extreme gates still pass (stress of the chunked kernel)") {
    const Report r = run_kda({{"heads", "1"},
                              {"k", "32"},
                              {"v", "32"},
                              {"tokens", "130"},
                              {"chunk", "64"},
                              {"gate_strength", "60"}});
    CHECK(r.all_checks_passed());
    CHECK(test::check_keyed(r, "chunked_close_to_fp64").passed);
}

TEST_CASE("kda: each falsifier fails every check it names (a small run)" * test::native_only()) {
    test::falsifiers_fail_their_checks(
        "kda",
        {{"heads", "1"}, {"k", "16"}, {"v", "24"}, {"tokens", "40"}, {"chunk", "8"}, {"model", "none"}});
}

TEST_CASE("kda: the run estimate keeps the defaults within the limits and refuses larger runs") {
    test::estimate_within_limits("kda");
    // The most heads, the widest state and the longest run: past the time and the memory limits.
    const std::string both = test::estimate_refuses(
        "kda", {{"heads", "64"}, {"group", "8"}, {"k", "256"}, {"v", "256"}, {"tokens", "65536"}}, "tokens");
    CHECK(both.find("head-tokens") != std::string::npos);
    // A long chunk alone: the pair matrices grow with it (25 s natively).
    test::estimate_refuses("kda", {{"tokens", "4096"}, {"chunk", "1024"}}, "tokens");
}

TEST_CASE("kda: a chunk longer than the run is a warning on the chunk") {
    const Experiment& e = *find_experiment("kda");
    auto pp = parse_params(e.params, {{"tokens", "16"}, {"chunk", "64"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const auto issues = e.check(pp.params);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].level == ParamIssue::warning);
    CHECK(issues[0].key == "chunk");
}
