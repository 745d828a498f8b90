#include "core/boundaries/economics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cp/context_parallel.h"
#include "core/cp/work.h"
#include "core/model/accounting.h"

namespace k3::boundaries {

double memory_rent(double bytes, double seconds, const Hardware& hw) {
    return bytes * seconds / hw.mem_bytes;
}

double copy_seconds(double bytes, const Hardware& hw, const Efficiency& eff) {
    return work_cost(0, 2 * bytes, hw, eff).seconds;
}

double recompute_seconds_per_token(const ModelConfig& c, const Hardware& hw, double context,
                                   const Efficiency& eff) {
    return work_cost(flops_per_token(c, context), 0, hw, eff).seconds;
}

double checkpoint_cost(const ModelConfig& c, const Hardware& hw, double residence_s, const Efficiency& eff) {
    const double state = double(account_memory(c).state_bytes);
    return copy_seconds(state, hw, eff) + memory_rent(state, residence_s, hw);
}

// ---- 1 ----

double PrefixCacheValue::break_even_reuse() const {
    return saved > 0 ? cost() / saved : std::numeric_limits<double>::infinity();
}

PrefixCacheValue prefix_cache_value(const ModelConfig& c, const Hardware& hw, double prefix_tokens,
                                    double residence_s, const Efficiency& eff) {
    PrefixCacheValue v;
    v.saved = prefill_cost_in_batch(c, hw, prefix_tokens, 0, eff).seconds;
    v.kv_rent = memory_rent(prefix_tokens * double(account_memory(c).kv_bytes_per_token), residence_s, hw);
    v.checkpoint = checkpoint_cost(c, hw, residence_s, eff);
    return v;
}

// ---- 2 ----

Densify densify(const ModelConfig& c, const Hardware& hw, double fewer_recomputed, double more_checkpoints,
                double context, double residence_s, const Efficiency& eff) {
    return {fewer_recomputed * recompute_seconds_per_token(c, hw, context, eff),
            more_checkpoints * checkpoint_cost(c, hw, residence_s, eff)};
}

// ---- 3 ----

double expected_kept_tokens(int draft_len, double accept) {
    double kept = 0, p = 1;
    for (int i = 0; i < draft_len; ++i, p *= accept) kept += p;
    return kept;
}

ReplayVsSnapshots replay_vs_snapshots(const ModelConfig& c, const Hardware& hw, int draft_len, double accept,
                                      double step_s, const Efficiency& eff, spec::RecordVariant v) {
    const spec::SpecStorage s = spec::spec_storage(c, v, draft_len, 1);
    const double L = double(s.linear_layers), N = double(draft_len);
    const double snap = double(s.snapshot_per_layer), rec = double(s.record_per_token);
    // The recurrent step of one token in every linear layer: flops_per_token of a model with no
    // parameters at context 0 is exactly its linear-layer core.
    ModelConfig core_only = c;
    core_only.active_params = 0;
    const double step_flops = flops_per_token(core_only, 0);
    ReplayVsSnapshots r;
    r.kept = expected_kept_tokens(draft_len, accept);
    r.snapshot_bytes = double(s.per_sequence(s.snapshots_total_per_layer));
    r.replay_bytes = double(s.per_sequence(s.projection_total_per_layer));
    r.snapshot_work = work_cost(0, N * snap * L, hw, eff).seconds;
    r.replay_work = work_cost(0, N * rec * L, hw, eff).seconds +
                    work_cost(r.kept * step_flops, (2 * snap + r.kept * rec) * L, hw, eff).seconds;
    r.snapshot_rent = memory_rent(r.snapshot_bytes, step_s, hw);
    r.replay_rent = memory_rent(r.replay_bytes, step_s, hw);
    return r;
}

ReplayVsSnapshots recoverssm_vs_snapshots(const ModelConfig& c, const Hardware& hw, int draft_tokens,
                                          double accept, double step_s, bool align, const Efficiency& eff) {
    using spec::RecordVariant;
    const spec::VllmPages p = spec::vllm_pages(spec::vllm_kda_page_tensors(c, draft_tokens), draft_tokens);
    const double L = double(c.n_linear()), T = 1.0 + double(draft_tokens);
    const double rec = double(spec::record_bytes_per_token_per_layer(c, RecordVariant::recoverssm));
    ModelConfig core_only = c;  // the fold of a record is the recurrent step of its token
    core_only.active_params = 0;
    const double step_flops = flops_per_token(core_only, 0);
    ReplayVsSnapshots r;
    r.kept = expected_kept_tokens(draft_tokens + 1, accept);
    r.snapshot_bytes = double(align ? p.snapshot_align : p.snapshot_none) * L;
    r.replay_bytes = double(align ? p.recoverssm_align : p.recoverssm_none) * L;
    r.snapshot_work = work_cost(0, T * double(p.state) * L, hw, eff).seconds;
    r.replay_work = work_cost(0, T * rec * L, hw, eff).seconds +
                    work_cost(r.kept * step_flops, (2 * double(p.state) + r.kept * rec) * L, hw, eff).seconds;
    r.snapshot_rent = memory_rent(r.snapshot_bytes, step_s, hw);
    r.replay_rent = memory_rent(r.replay_bytes, step_s, hw);
    return r;
}

// ---- 4 ----

CpPrefill cp_prefill(const ModelConfig& c, const Hardware& hw, const Link& link, int tokens_per_rank,
                     int ranks, const Efficiency& eff, int chunk) {
    const double n = double(tokens_per_rank), T = n * double(ranks);
    CpPrefill r;
    r.single_s = prefill_cost(c, hw, T, 0, eff).seconds;
    r.rank_s = prefill_cost(c, hw, n, T - n, eff).seconds;
    if (ranks == 1) return r;
    const kda::Shape s{c.lin_heads, c.lin_v_heads, c.head_k, c.head_v};
    const cp::CpCost k = cp::cp_cost(cp::Variant::kda, s, std::vector<int>(size_t(ranks), tokens_per_rank),
                                     chunk, cp::Combiner::scan, cp::Fixup::rerun);
    // Multiply-adds beyond running its own slice (which prefill_cost counts), two FLOPs each.
    const double extra = k.critical() - cp::run_work(cp::Variant::kda, s, tokens_per_rank, chunk);
    const double L = double(c.n_linear());
    r.scan_s = work_cost(2 * extra * L, 0, hw, eff).seconds;
    r.map_exchange_s = transfer_seconds(k.bytes_busiest_rank * L, link);
    r.kv_exchange_s = transfer_seconds((T - n) * double(account_memory(c).kv_bytes_per_token), link);
    return r;
}

// ---- 5 ----

MoveVsRecompute move_vs_recompute(const ModelConfig& c, const Hardware& hw, double link_bytes_per_s,
                                  double context, double checkpoint_distance, const Efficiency& eff,
                                  lifecycle::RecomputeRegime regime) {
    using lifecycle::MigrationStrategy;
    const Link link{"", "", link_bytes_per_s};
    MoveVsRecompute m;
    const bool checkpoint = checkpoint_distance >= 0 && checkpoint_distance < std::floor(context);
    m.costs = lifecycle::migration_costs(c, {context, checkpoint ? checkpoint_distance : context}, link, hw,
                                         eff, regime);
    const auto& all = m.costs[MigrationStrategy::move_all];
    const auto& kv = m.costs[MigrationStrategy::move_kv];
    // As MigrationCosts::fastest: least time, then fewer bytes.
    const bool kv_better =
        checkpoint && (kv.total_s < all.total_s || (kv.total_s == all.total_s && kv.bytes < all.bytes));
    m.best_move = kv_better ? MigrationStrategy::move_kv : MigrationStrategy::move_all;
    m.best_move_s = m.costs[m.best_move].total_s;
    m.recompute_s = m.costs[MigrationStrategy::recompute].total_s;
    return m;
}

}  // namespace k3::boundaries
