// core/boundaries (module 14's economics): the currency, each method's costs against the core code
// they are built from, sign changes and their agreement checks, the reuse-mix workload. The module's
// own tests are core/modules/boundaries/boundaries_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/boundaries/economics.h"
#include "core/boundaries/grid.h"
#include "core/experiments/registry.h"
#include "core/fleet/workload.h"
#include "core/model/accounting.h"

using namespace k3;
using namespace k3::boundaries;
using lifecycle::MigrationStrategy;

namespace {

const ModelConfig& kimi() {
    static const ModelConfig c = *model_preset("kimi-linear-48b");
    return c;
}
const Hardware& h100() {
    static const Hardware h = *hardware_preset("h100");
    return h;
}

}  // namespace

TEST_CASE("boundaries currency: rent, copies, recompute and a checkpoint in GPU-seconds") {
    const Hardware& h = h100();
    CHECK(memory_rent(h.mem_bytes, 1, h) == 1);  // all of a device's memory for a second
    CHECK(memory_rent(1e9, 30, h) == doctest::Approx(30e9 / 80e9));
    CHECK(copy_seconds(1e9, h) == doctest::Approx(2e9 / (3.35e12 * 0.8)));
    CHECK(recompute_seconds_per_token(kimi(), h, 0) ==
          doctest::Approx(flops_per_token(kimi(), 0) / (989.4e12 * 0.5)));
    const double state = 43417600;
    CHECK(checkpoint_cost(kimi(), h, 30) == doctest::Approx(copy_seconds(state, h) + state * 30 / 80e9));
}

TEST_CASE("boundaries map 1: a cached prefix saves its in-batch prefill and pays rent for KV and state") {
    const PrefixCacheValue v = prefix_cache_value(kimi(), h100(), 8192, 30);
    CHECK(v.saved == prefill_cost_in_batch(kimi(), h100(), 8192, 0).seconds);
    CHECK(v.kv_rent == doctest::Approx(8192.0 * 8064 * 30 / 80e9));
    CHECK(v.checkpoint == checkpoint_cost(kimi(), h100(), 30));
    CHECK(v.net(v.break_even_reuse()) == doctest::Approx(0).epsilon(1e-12));
    CHECK(v.net(1) > 0);
    CHECK(v.net(0) < 0);
    // Longer residence, more rent: the reuse needed only grows.
    CHECK(prefix_cache_value(kimi(), h100(), 8192, 300).break_even_reuse() > v.break_even_reuse());
    // A short prefix never pays: its checkpoint alone outweighs its prefill.
    CHECK(prefix_cache_value(kimi(), h100(), 64, 30).break_even_reuse() > 1);
}

TEST_CASE("boundaries map 2: halving the interval trades recompute for checkpoints") {
    const double tok = recompute_seconds_per_token(kimi(), h100(), 4096);
    const double ck = checkpoint_cost(kimi(), h100(), 30);
    const Densify d = densify(kimi(), h100(), 1000, 0.5, 4096, 30);
    CHECK(d.saved == doctest::Approx(1000 * tok));
    CHECK(d.cost == doctest::Approx(0.5 * ck));
    CHECK(densify(kimi(), h100(), 0, 1, 4096, 30).net() < 0);
    CHECK(densify(kimi(), h100(), 100, 0, 4096, 30).net() > 0);
}

TEST_CASE("boundaries map 3: replay vs snapshots holds module 7's bytes and crosses with the step length") {
    CHECK(expected_kept_tokens(4, 0) == 1);
    CHECK(expected_kept_tokens(4, 1) == 4);
    CHECK(expected_kept_tokens(4, 0.5) == 1.875);
    const double step = decode_step_cost(kimi(), h100(), 64, 8192).seconds;
    const ReplayVsSnapshots r = replay_vs_snapshots(kimi(), h100(), 4, 0.5, step);
    // reference/kda.md §6, 20 KDA layers: (N + 1) snapshots against one state + N minimal exact records.
    CHECK(r.snapshot_bytes == 20.0 * 10854400);
    CHECK(r.replay_bytes == 20.0 * 2335232);
    CHECK(r.snapshot_work == doctest::Approx(4 * 20 * 2170880.0 / (3.35e12 * 0.8)));
    CHECK(r.snapshot_rent == doctest::Approx(r.snapshot_bytes * step / 80e9));
    CHECK(r.net() > 0);
    // The same ratios as module 7's report.
    const Experiment& e = *find_experiment("spec-storage");
    auto pp = parse_params(
        e.params,
        {{"demo", "0"}, {"preset", "kimi-linear-48b"}, {"draft_len", "4"}, {"variant", "minimal_exact"}},
        RangePolicy::strict);
    REQUIRE(pp.ok());
    const Report m7 = run_to_end(e, pp.params);
    CHECK(r.snapshot_bytes / r.replay_bytes ==
          doctest::Approx(m7.find_scalar("ratio_counting_confirmed")->value));
    CHECK((r.snapshot_bytes - r.snapshot_bytes / 5) / r.replay_bytes ==
          doctest::Approx(m7.find_scalar("ratio_n_snapshots")->value));
    // N = 1 with a short step: re-reading the state costs more than holding a second one.
    const double short_step = decode_step_cost(kimi(), h100(), 1, 8192).seconds;
    CHECK(replay_vs_snapshots(kimi(), h100(), 1, 0, short_step).net() < 0);
    CHECK(replay_vs_snapshots(kimi(), h100(), 4, 0, short_step).net() > 0);
    // Acceptance only adds replayed steps: never helps replay.
    CHECK(replay_vs_snapshots(kimi(), h100(), 8, 1, step).net() <=
          replay_vs_snapshots(kimi(), h100(), 8, 0, step).net());
}

TEST_CASE("boundaries map 4: one rank is the plain prefill; short prompts lose, long ones gain") {
    const Link nv = *link_preset("nvlink4"), eth = *link_preset("eth-100");
    for (int n : {1, 300, 4096, 100000}) {
        const CpPrefill one = cp_prefill(kimi(), h100(), nv, n, 1);
        CHECK(one.speedup() == 1);
        CHECK(one.single_s == prefill_cost(kimi(), h100(), n, 0).seconds);
        CHECK(one.scan_s + one.map_exchange_s + one.kv_exchange_s == 0);
    }
    CHECK(cp_prefill(kimi(), h100(), nv, 256, 2).speedup() < 1);  // both ranks stream all the weights
    const CpPrefill big = cp_prefill(kimi(), h100(), nv, 65536, 8);
    CHECK(big.speedup() > 2);
    CHECK(big.speedup() < 8);  // the last rank's attention spans the whole prompt
    CHECK(big.map_exchange_s == doctest::Approx(3 * 4194304.0 * 20 / 450e9));  // ceil(log2 8) rounds of 4 MiB
    CHECK(big.kv_exchange_s == doctest::Approx(7 * 65536 * 8064.0 / 450e9));
    // A slower link never speeds anything up.
    for (int R : {2, 8, 64})
        for (int n : {512, 8192})
            CHECK(cp_prefill(kimi(), h100(), eth, n, R).speedup() <=
                  cp_prefill(kimi(), h100(), nv, n, R).speedup());
}

TEST_CASE(
    "boundaries map 5: move vs recompute follows lifecycle::migration_costs and only improves with "
    "bandwidth") {
    for (double P : {300.0, 4096.0, 131072.0}) {
        double last = 0;
        for (double bw = 1e8; bw <= 1e12; bw *= 3) {
            const MoveVsRecompute m = move_vs_recompute(kimi(), h100(), bw, P, -1);
            const lifecycle::MigrationCosts d = lifecycle::migration_costs(
                kimi(), {P, P}, Link{"", "", bw}, h100(), {}, lifecycle::RecomputeRegime::in_batch);
            CHECK(m.best_move == MigrationStrategy::move_all);
            CHECK(m.best_move_s == d[MigrationStrategy::move_all].total_s);
            CHECK(m.recompute_s == d[MigrationStrategy::recompute].total_s);
            CHECK(m.advantage() >= last);
            last = m.advantage();
        }
    }
    // A replica at the exact position: moving the KV alone is strictly better than moving the state too.
    CHECK(move_vs_recompute(kimi(), h100(), 50e9, 32768, 0).best_move == MigrationStrategy::move_kv);
    // ... and a checkpoint as far back as the context is no checkpoint.
    CHECK(move_vs_recompute(kimi(), h100(), 50e9, 32768, 32768).best_move == MigrationStrategy::move_all);
    // move_kv_break_even_distance splits the distances where moving only the KV wins.
    const Link ib = *link_preset("ib-ndr");
    const double be = lifecycle::move_kv_break_even_distance(kimi(), 32768, ib, h100(), {},
                                                             lifecycle::RecomputeRegime::in_batch);
    for (double d : {0.0, 1.0, 8.0, be, be + 1, 64.0, 512.0, 4096.0}) {
        const lifecycle::MigrationCosts m = lifecycle::migration_costs(kimi(), {32768, d}, ib, h100(), {},
                                                                       lifecycle::RecomputeRegime::in_batch);
        CHECK((m[MigrationStrategy::move_kv].total_s <= m[MigrationStrategy::move_all].total_s) == (d <= be));
    }
}

TEST_CASE("boundaries grid: axes, sign changes, both signs") {
    const auto lg = log_axis(64, 262144, 7);
    CHECK(lg.front() == 64);
    CHECK(lg.back() == 262144);
    CHECK(lg[1] == doctest::Approx(256));
    const auto il = integer_log_axis(1, 64, 40);
    for (size_t i = 1; i < il.size(); ++i) CHECK(il[i] > il[i - 1]);
    CHECK(linear_axis(0, 1, 5)[2] == 0.5);
    CHECK(linear_axis(3, 9, 1) == std::vector<double>{3});

    const auto a = first_sign_change([](double x) { return x - 3.7; }, 1, 10, false);
    REQUIRE(a);
    CHECK(a->x == doctest::Approx(3.7));
    CHECK(a->pays_above);
    const auto b = first_sign_change([](double x) { return 1000 / x - 1; }, 1, 1e6, true);
    REQUIRE(b);
    CHECK(b->x == doctest::Approx(1000));
    CHECK_FALSE(b->pays_above);
    const auto c = first_sign_change_int([](double x) { return x - 10; }, 1, 1000);
    REQUIRE(c);
    CHECK(c->x == 10);
    CHECK_FALSE(first_sign_change([](double) { return 1.0; }, 1, 10, false));

    CHECK(has_both_signs({-1, NAN, 2}, 0));
    CHECK_FALSE(has_both_signs({1, NAN, 2}, 0));
}

TEST_CASE("reuse-mix workload: the chosen share starts with a shared prefix, the rest share nothing") {
    ReuseMixConfig c;
    c.requests = 200;
    c.reuse_share = 0.25;
    c.prefixes = 4;
    const Workload w = reuse_mix_workload(c);
    REQUIRE(w.requests.size() == 200);
    uint32_t shared = 0;
    for (size_t i = 0; i < w.requests.size(); ++i) {
        const Request& r = w.requests[i];
        if (i > 0) CHECK(r.arrival_ms >= w.requests[i - 1].arrival_ms);
        uint64_t longest = 0;
        for (size_t j = 0; j < w.requests.size(); ++j)
            if (j != i)
                longest = std::max(longest, common_prefix(*r.tokens, *w.requests[j].tokens, 0, r.prompt_len));
        CHECK((longest == 0 || longest == c.prefix_len));
        shared += longest == c.prefix_len;
    }
    CHECK(shared == 50);
    const Workload again = reuse_mix_workload(c);
    CHECK(again.requests.back().tokens->to_vector() == w.requests.back().tokens->to_vector());
    c.reuse_share = 0;
    CHECK(reuse_mix_workload(c).requests.size() == 200);
}
