// Migration cost accounting (core/lifecycle/migration_cost.h): exact blob bytes per strategy against
// the memory accounting, recompute times against the roofline, and the break-even distance.
#include <doctest/doctest.h>

#include "core/lifecycle/blob_layout.h"
#include "core/lifecycle/migration_cost.h"
#include "core/model/accounting.h"

using namespace k3;
using namespace k3::lifecycle;

TEST_CASE("lifecycle cost: blob sizes of Kimi-Linear agree with the memory accounting") {
    const ModelConfig c = *model_preset("kimi-linear-48b");
    const MemoryAccount a = account_memory(c);
    const BlobLayout l = BlobLayout::of(c);
    const uint64_t state = (l.recurrent_bytes_per_layer() + l.conv_bytes_per_layer()) * l.linear_layers;
    CHECK(state == a.state_bytes);
    CHECK(state == 43417600u);
    CHECK(l.kv_bytes_per_token_per_layer() * l.attention_layers == a.kv_bytes_per_token);
    CHECK(l.recurrent_bytes_per_layer() == a.recurrent_bytes_per_layer);
    CHECK(l.conv_bytes_per_layer() == a.conv_bytes_per_layer);
    CHECK(l.problem().empty());
    const uint64_t P = 131072;
    // By hand: header + CRC, 20 S and 20 conv sections, 7 KV sections, tokens (P + 1 ids), sampler.
    const uint64_t want =
        112 + 4 + 20 * (16 + 2097152) + 20 * (16 + 73728) + 7 * (16 + P * 1152) + 16 + 4 * (P + 1) + 16 + 48;
    CHECK(blob_bytes(l, P, P + 1, kBlobAll) == want);
    CHECK(blob_bytes(l, P, 0, 0) == 116);
}

TEST_CASE("lifecycle cost: the three strategies of a Kimi-Linear request at 128k tokens") {
    const ModelConfig c = *model_preset("kimi-linear-48b");
    const Link ib = *link_preset("ib-ndr");
    const Hardware h100 = *hardware_preset("h100");
    const double P = 131072, d = 2048;
    const MigrationCosts m = migration_costs(c, {P, d}, ib, h100);
    const StrategyCost &all = m[MigrationStrategy::move_all], &kv = m[MigrationStrategy::move_kv],
                       &re = m[MigrationStrategy::recompute];
    const BlobLayout l = BlobLayout::of(c);
    CHECK(all.strategy == MigrationStrategy::move_all);
    CHECK(all.bytes == double(blob_bytes(l, uint64_t(P), uint64_t(P) + 1, kBlobAll)));
    CHECK(all.state_bytes == 43417600.0);
    CHECK(all.kv_bytes == P * 8064);
    CHECK(all.recompute_tokens == 0);
    CHECK(all.recompute_s == 0);
    CHECK(all.transfer_s == doctest::Approx(all.bytes / 50e9));
    CHECK(kv.state_bytes == 0);
    CHECK(kv.kv_tokens == P - d);
    CHECK(kv.recompute_tokens == d);
    CHECK(kv.recompute_s == doctest::Approx(prefill_cost(c, h100, d, P - d).seconds));
    CHECK(kv.total_s == doctest::Approx(kv.transfer_s + kv.recompute_s));
    CHECK(re.kv_bytes == 0);
    CHECK(re.bytes == double(blob_bytes(l, 0, uint64_t(P) + 1, kBlobTokens | kBlobSampler)));
    CHECK(re.recompute_tokens == P);
    CHECK(re.recompute_flops == doctest::Approx(prefill_cost(c, h100, P, 0).flops));
    // 1.1 GB over InfiniBand is tens of milliseconds; prefilling 128k tokens is seconds.
    CHECK(all.total_s < 0.05);
    CHECK(re.total_s > 1.0);
    CHECK(m.fastest() == MigrationStrategy::move_all);
    // With the checkpoint exactly at the position nothing is recomputed and the state stays home.
    const MigrationCosts z = migration_costs(c, {P, 0}, ib, h100);
    CHECK(z.fastest() == MigrationStrategy::move_kv);
    CHECK(z[MigrationStrategy::move_all].bytes - z[MigrationStrategy::move_kv].bytes == 43417600.0 + 40 * 16);
    // Distances beyond the context clamp to it.
    const MigrationCosts far = migration_costs(c, {P, 10 * P}, ib, h100);
    CHECK(far[MigrationStrategy::move_kv].recompute_tokens == P);
    CHECK(far[MigrationStrategy::move_kv].recompute_s == doctest::Approx(re.recompute_s));
}

TEST_CASE("lifecycle cost: measured speed and the break-even checkpoint distance") {
    const ModelConfig c = *model_preset("kimi-linear-48b");
    const MigrationCosts m = migration_costs_measured(c, {1000, 100}, 1e9, 500);
    CHECK(m[MigrationStrategy::move_kv].recompute_s == doctest::Approx(100.0 / 500));
    CHECK(m[MigrationStrategy::recompute].recompute_s == doctest::Approx(1000.0 / 500));
    CHECK(m[MigrationStrategy::move_all].transfer_s ==
          doctest::Approx(m[MigrationStrategy::move_all].bytes / 1e9));

    const Link eth = *link_preset("eth-100");
    const Hardware h100 = *hardware_preset("h100");
    for (RecomputeRegime rg : {RecomputeRegime::alone, RecomputeRegime::in_batch}) {
        const double P = 131072;
        const double be = move_kv_break_even_distance(c, P, eth, h100, {}, rg);
        auto wins = [&](double d) {
            const MigrationCosts x = migration_costs(c, {P, d}, eth, h100, {}, rg);
            return x[MigrationStrategy::move_kv].total_s <= x[MigrationStrategy::move_all].total_s;
        };
        CHECK(wins(be));
        CHECK_FALSE(wins(be + 1));
        if (rg == RecomputeRegime::alone)
            CHECK(be == 0);  // the weight-streaming floor alone exceeds the state transfer
        else
            CHECK(be > 0);
    }
}
