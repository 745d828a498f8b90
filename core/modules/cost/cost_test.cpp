// Module 15 `cost`: the deployment's figures against the step model and its calibration, speculative
// decoding's TPOT and memory, the refusals, and the check audit.
#include <doctest/doctest.h>

#include "core/modules/cost/cost.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

namespace {

const CalibrationRow& row_of(const std::string& id) {
    static const std::vector<CalibrationRow> rows = calibration_table(kFittedFactors);
    for (const CalibrationRow& r : rows)
        if (r.point->id == id) return r;
    FAIL("no calibration point " << id);
    return rows.front();
}

}  // namespace

TEST_CASE("cost: the default is TensorRT-LLM's Kimi-K3 TEP16 point, estimated as the calibration does") {
    const Report r = test::run_module("cost", {});
    test::all_checks_pass(r);
    test::check_keys_unique(r);
    CHECK(test::scalar_of(r, "tpot_ms") == doctest::Approx(row_of("TRT TEP16 TPOT").estimated_s * 1e3));
    CHECK(test::scalar_of(r, "ttft_ms") == doctest::Approx(row_of("TRT TEP16 TTFT").estimated_s * 1e3));
    // Output tokens per GPU and the dollars follow from the throughput and the price.
    const double out = test::scalar_of(r, "output_tokens_per_s");
    CHECK(test::scalar_of(r, "tokens_per_s_per_gpu") == doctest::Approx(out / 16));
    // The input's and the output's dollars together pay the GPU-hours of the benchmark: per prompt,
    // 16 GPUs at 4 USD an hour for output / throughput seconds.
    const double paid = test::scalar_of(r, "usd_per_m_input_tokens") * 8192 +
                        test::scalar_of(r, "usd_per_m_output_tokens") * 1024;
    CHECK(paid == doctest::Approx(1e6 * 4.0 * 16 / 3600 * 1024 / out).epsilon(1e-9));
    CHECK(test::scalar_of(r, "usd_per_m_output_tokens") > test::scalar_of(r, "usd_per_m_input_tokens"));
    CHECK(test::scalar_of(r, "calibration_points") == double(calibration_points().size()));
    REQUIRE(test::table_named(r, "Calibration") != nullptr);
    CHECK(test::table_named(r, "Calibration")->rows.size() == calibration_points().size());
    CHECK(test::table_named(r, "Decode step terms")->rows.size() == size_t(kStepTerms) + 1);
    const Report dep =
        test::run_module("cost", {{"tp", "1"}, {"dp_attention", "true"}, {"concurrency", "64"}});
    CHECK(test::scalar_of(dep, "tpot_ms") == doctest::Approx(row_of("TRT DEP16 TPOT").estimated_s * 1e3));
    test::all_checks_pass(dep);
}

TEST_CASE("cost: speculative decoding gives acceptance-length tokens a step; its pages cost memory") {
    const std::vector<std::pair<std::string, std::string>> q = {
        {"preset", "qwen3-next-80b"}, {"gpu", "h100"}, {"gpus", "4"}, {"tp", "4"}, {"ep", "1"},
        {"engine", "sglang"}};
    auto with = [&](std::vector<std::pair<std::string, std::string>> more) {
        more.insert(more.end(), q.begin(), q.end());
        return test::run_module("cost", more);
    };
    const Report plain = with({}),
                 snap = with({{"draft_len", "3"}, {"acceptance_len", "2.5"}, {"spec_memory", "snapshots"}});
    const Report rec = with({{"draft_len", "3"}, {"acceptance_len", "2.5"}});
    CHECK(test::scalar_of(snap, "tpot_ms") < test::scalar_of(plain, "tpot_ms"));
    // One request alone: its steps each give 2.5 tokens, at contexts whose mean is the step's.
    const Report one = with({{"draft_len", "3"}, {"acceptance_len", "2.5"}, {"concurrency", "1"}});
    CHECK(test::scalar_of(one, "tpot_ms") ==
          doctest::Approx(test::scalar_of(one, "step_ms") / 2.5).epsilon(0.005));
    CHECK(test::scalar_of(snap, "step_ms") > test::scalar_of(plain, "step_ms"));
    CHECK(test::scalar_of(plain, "scratch_gib") == 0);
    CHECK(test::scalar_of(snap, "scratch_gib") > test::scalar_of(rec, "scratch_gib"));
    CHECK(test::scalar_of(rec, "scratch_gib") > 0);
    CHECK(test::scalar_of(snap, "max_batch") <= test::scalar_of(rec, "max_batch"));
    CHECK(test::scalar_of(rec, "max_batch") < test::scalar_of(plain, "max_batch"));
    test::all_checks_pass(snap);
}

TEST_CASE("cost: refuses what cannot run, naming the limit") {
    const Experiment& e = *find_experiment("cost");
    auto issues = [&](std::vector<std::pair<std::string, std::string>> kv) {
        auto pp = parse_params(e.params, kv, RangePolicy::strict);
        REQUIRE(pp.ok());
        return e.check(pp.params);
    };
    auto first_key = [&](std::vector<std::pair<std::string, std::string>> kv) {
        const auto v = issues(std::move(kv));
        return v.empty() ? std::string() : v[0].key;
    };
    CHECK(issues({}).empty());
    CHECK(first_key({{"tp", "5"}}) == "tp");
    CHECK(first_key({{"gpus", "2"}, {"tp", "2"}, {"ep", "2"}}) == "gpus");  // 2.78T does not fit on two
    CHECK(first_key({{"ep", "3"}}) == "ep");
    CHECK(first_key({{"concurrency", "60000"}}) == "concurrency");
    CHECK(first_key({{"draft_len", "2"}, {"acceptance_len", "3.5"}}) == "acceptance_len");
    CHECK(first_key({{"acceptance_len", "2"}}) == "acceptance_len");
    CHECK(first_key({{"tp", "16"}, {"dp_attention", "true"}}) == "tp");
}

TEST_CASE("cost: every check proven by its falsifier" * test::native_only()) {
    test::all_checks_proven("cost", 8);
}
