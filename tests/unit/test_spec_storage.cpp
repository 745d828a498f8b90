// Storage accounting of speculative decoding (core/spec/storage.h) against the figures of
// reference/kda.md §6, and the runnable model's records against the accounting.
#include <doctest/doctest.h>

#include <cmath>

#include "core/model/dims.h"
#include "core/spec/records.h"
#include "core/spec/storage.h"

using namespace k3;
using namespace k3::spec;

namespace {
ModelConfig kimi() { return *model_preset("kimi-linear-48b"); }
double round2(double x) { return std::round(x * 100) / 100; }
}  // namespace

TEST_CASE("spec storage: Kimi-Linear snapshot and minimal exact record (kda.md §6)") {
    const ModelConfig c = kimi();
    CHECK(snapshot_bytes_per_layer(c) == 2170880);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::minimal_exact) == 41088);
    const SpecStorage s = spec_storage(c, RecordVariant::minimal_exact, 4, 1);
    CHECK(s.snapshots_extra_per_layer == 8683520);
    CHECK(s.projection_total_per_layer == 2335232);
    CHECK(s.snapshots_total_per_layer == 10854400);
    CHECK(round2(s.ratio_n_snapshots) == 3.72);
    CHECK(round2(s.ratio_counting_confirmed) == 4.65);
    CHECK(std::round(s.ratio_per_token * 10) / 10 == 52.8);
    // All 20 KDA layers at N = 4: 173,670,400 B of snapshots against 3,287,040 B of records (extra).
    CHECK(s.linear_layers == 20);
    CHECK(s.per_sequence(s.snapshots_extra_per_layer) == 173670400);
    CHECK(s.per_sequence(s.records_extra_per_layer) == 3287040);
}

TEST_CASE("spec storage: every variant's bytes of the kda.md §6 table at Kimi-Linear dimensions") {
    const ModelConfig c = kimi();
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::core_only) == 32896);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::minimal_exact) == 41088);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::raw_gates) == 32832);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::no_conv_recompute) == 57472);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::layer_input) == 4608);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::delta) == 40960);
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::delta_conv) == 40960 + 24576);
    // Per-token ratios snapshot / record: (a) 66.0x, (b) 52.8x, (b') 66.1x, (c) 37.8x, (d) 471x.
    auto per_token = [&](RecordVariant v) { return spec_storage(c, v, 4, 1).ratio_per_token; };
    CHECK(std::round(per_token(RecordVariant::core_only) * 10) / 10 == 66.0);
    CHECK(std::round(per_token(RecordVariant::raw_gates) * 10) / 10 == 66.1);
    CHECK(std::round(per_token(RecordVariant::no_conv_recompute) * 10) / 10 == 37.8);
    CHECK(std::round(per_token(RecordVariant::layer_input)) == 471);
    // (a) against S alone: 63.8x.
    CHECK(std::round(2097152.0 / 32896 * 10) / 10 == 63.8);
}

TEST_CASE("spec storage: counting the confirmed state, N = 1, 8, 16 (kda.md §6)") {
    const ModelConfig c = kimi();
    struct Row {
        int N;
        uint64_t snaps, proj;
        double ratio;
    };
    for (const Row& r : {Row{1, 4341760, 2211968, 1.96}, Row{4, 10854400, 2335232, 4.65},
                         Row{8, 19537920, 2499584, 7.82}, Row{16, 36904960, 2828288, 13.05}}) {
        CAPTURE(r.N);
        const SpecStorage s = spec_storage(c, RecordVariant::minimal_exact, r.N, 1);
        CHECK(s.snapshots_total_per_layer == r.snaps);
        CHECK(s.projection_total_per_layer == r.proj);
        CHECK(round2(s.ratio_counting_confirmed) == r.ratio);
        CHECK(s.ratio_counting_confirmed < r.N + 1);  // the confirmed state is paid on both sides
    }
    // With N = 1 the saving is under 2x, whichever convention.
    const SpecStorage one = spec_storage(c, RecordVariant::minimal_exact, 1, 1);
    CHECK(one.ratio_counting_confirmed < 2.0);
    CHECK(one.ratio_n_snapshots < 1.0);
}

TEST_CASE("spec storage: per sequence and per fleet scale by layers and running requests; the ring") {
    const ModelConfig c = kimi();
    const SpecStorage s = spec_storage(c, RecordVariant::minimal_exact, 4, 128, 16);
    CHECK(s.per_sequence(s.snapshot_per_layer) == 43417600);  // the §5 state per sequence
    CHECK(s.per_fleet(s.snapshots_extra_per_layer) == 128ull * 173670400);
    CHECK(s.per_fleet(s.projection_total_per_layer) == 128ull * 20 * 2335232);
    CHECK(s.ring_total_per_layer == 2170880 + 16 * 41088);
    // Qwen3-Next (GDN): one gate per head, 36 linear layers, the serving.md §3 state of 73.7 MiB.
    const ModelConfig q = *model_preset("qwen3-next-80b");
    CHECK(gate_elements(q) == 32);
    const SpecStorage sq = spec_storage(q, RecordVariant::core_only, 4, 128);
    CHECK(std::fabs(double(sq.per_sequence(sq.snapshot_per_layer)) / (1024.0 * 1024.0) - 73.7) < 0.05);
    // k (16 x 128 bf16) + v (32 x 128 bf16) + g (32 fp32) + beta (32 fp32)
    CHECK(sq.record_per_token == 4096 + 8192 + 128 + 128);
}

TEST_CASE("spec storage: the runnable model's records are exactly the accounted bytes") {
    for (const char* id : {"tiny", "small"}) {
        const ModelConfig c = *model_preset(id);
        const model::KdaDims d = model::kda_dims(c);
        for (const auto& v : record_variants()) {
            CAPTURE(std::string(id));
            CAPTURE(std::string(v.id));
            const RecordLayout L = RecordLayout::of(d, v.variant);
            // floats x 4 = the record's fields + its conv window columns (RecoverSSM's raw rows, which
            // vLLM counts in the widened conv window, not in the record).
            const uint64_t columns = uint64_t(record_conv_columns(v.variant)) * conv_column_bytes(c);
            CHECK(uint64_t(L.floats) * 4 == record_bytes_per_token_per_layer(c, v.variant) + columns);
            CHECK(uint64_t(L.floats) * 4 == held_bytes_per_token_per_layer(c, v.variant));
            CHECK(columns ==
                  (v.variant == RecordVariant::recoverssm ? d.window_floats() / d.window_rows() * 4 : 0));
        }
    }
}

TEST_CASE(
    "spec storage: Kimi-K3's RecoverSSM record is 1,024 B per head; its conv column is held beside it") {
    const ModelConfig c = *model_preset("kimi-k3");
    CHECK(record_bytes_per_token_per_layer(c, RecordVariant::recoverssm) == 98304);  // kimi_k3.md §3.3
    CHECK(conv_column_bytes(c) == 73728);                                            // 36,864 bf16
    CHECK(held_bytes_per_token_per_layer(c, RecordVariant::recoverssm) == 98304 + 73728);
    const SpecStorage s = spec_storage(c, RecordVariant::recoverssm, 7, 1, 16);
    CHECK(s.record_per_token == 98304);
    CHECK(s.projection_total_per_layer == 6512640 + 7 * (98304 + 73728));
    CHECK(s.ring_total_per_layer == 6512640 + 16 * (98304 + 73728));
    CHECK(held_bytes_per_token_per_layer(c, RecordVariant::minimal_exact) ==
          record_bytes_per_token_per_layer(c, RecordVariant::minimal_exact));
}

TEST_CASE("spec storage: variant ids parse back and the exactness claims are the documented ones") {
    for (const auto& v : record_variants()) {
        REQUIRE(parse_variant(v.id));
        CHECK(*parse_variant(v.id) == v.variant);
        CHECK(&variant_info(v.variant) == &v);
        CHECK(v.exact == v.restores_window);  // S is exact in every variant; the window decides
    }
    CHECK(!parse_variant("snapshot"));
    CHECK(variant_info(RecordVariant::minimal_exact).exact);
    CHECK(!variant_info(RecordVariant::core_only).exact);
    CHECK(!variant_info(RecordVariant::delta).exact);
    CHECK(variant_info(RecordVariant::recoverssm).exact);  // the fold rebuilds the windows too
}
