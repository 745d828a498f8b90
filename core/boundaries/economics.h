// What each method costs and saves, in one currency, for module 14's break-even maps (README's module table,
// module 14). Everything is built from the core's own accounting: bytes from core/model/accounting.h
// and core/spec/storage.h, times from the roofline of core/model/roofline.h, context-parallel work and
// bytes from core/cp/work.h, move costs from core/lifecycle/migration_cost.h. Every time is a ROOFLINE
// ESTIMATE for a hardware preset, not a measurement.
//
// The currency is the GPU-second (GPU s) of one device of the preset:
//   work    its roofline time (work_cost): the device is busy for that long;
//   memory  rent: bytes held x seconds held / device memory. Holding all of a device's memory for one
//           second costs one GPU s: memory that holds a cache entry cannot hold running requests.
// Context parallelism and migration are latency questions and are compared in seconds instead.
#pragma once

#include "core/lifecycle/migration_cost.h"
#include "core/model/config.h"
#include "core/model/roofline.h"
#include "core/spec/storage.h"

namespace k3::boundaries {

// ---- the currency ----
double memory_rent(double bytes, double seconds, const Hardware& hw);
// Copying `bytes` within device memory: read and written once.
double copy_seconds(double bytes, const Hardware& hw, const Efficiency& eff = {});
// The compute of one token recomputed after `context` tokens inside running batches (its FLOPs).
double recompute_seconds_per_token(const ModelConfig& c, const Hardware& hw, double context,
                                   const Efficiency& eff = {});
// Writing one state checkpoint (a copy of the running state) and holding it for residence_s.
double checkpoint_cost(const ModelConfig& c, const Hardware& hw, double residence_s,
                       const Efficiency& eff = {});

// ---- 1. prefix caching with a checkpoint at the prefix end ----
// Caching a finished request's prefix of P tokens: its attention KV and one state checkpoint at P, held
// for residence_s. If a later request reuses it, that request skips the prefill of P tokens.
struct PrefixCacheValue {
    double saved = 0;       // GPU s a hit saves: prefill_cost_in_batch of the P tokens
    double kv_rent = 0;     // GPU s: P x KV bytes per token held for residence_s
    double checkpoint = 0;  // GPU s: checkpoint_cost
    double cost() const { return kv_rent + checkpoint; }
    double net(double reuse_p) const { return reuse_p * saved - cost(); }
    // Reuse probability at which caching breaks even (above 1: never at this length).
    double break_even_reuse() const;
};
PrefixCacheValue prefix_cache_value(const ModelConfig& c, const Hardware& hw, double prefix_tokens,
                                    double residence_s, const Efficiency& eff = {});

// ---- 2. checkpoint interval ----
// Halving the checkpoint interval: per request, `fewer_recomputed` tokens are resumed instead of
// recomputed (at `context` tokens of history on average) and `more_checkpoints` more states are written
// and held for residence_s.
struct Densify {
    double saved = 0;                            // GPU s of recompute avoided
    double cost = 0;                             // GPU s of the extra checkpoints (checkpoint_cost each)
    double net() const { return saved - cost; }  // negative: the denser interval does not pay
};
Densify densify(const ModelConfig& c, const Hardware& hw, double fewer_recomputed, double more_checkpoints,
                double context, double residence_s, const Efficiency& eff = {});

// ---- 3. projection replay vs per-token snapshots ----
// One verification of N tokens (the pending token and N - 1 drafts, module 7's convention) for one
// request, every linear layer. Snapshots: the kernel writes a full state after each of the N tokens and
// the restore is an index move (vLLM). Replay: the kernel writes N records; on commit the confirmed state
// is read, the kept tokens' records are replayed through the recurrent step and the state is written
// back. Both hold their rollback storage for one decode step of step_s.
struct ReplayVsSnapshots {
    double kept = 0;                              // expected tokens kept: 1 + a + ... + a^(N-1)
    double snapshot_bytes = 0, replay_bytes = 0;  // held: (N + 1) snapshots; one state + N records
    double snapshot_work = 0, replay_work = 0;    // GPU s of the HBM traffic and replay compute
    double snapshot_rent = 0, replay_rent = 0;    // GPU s of holding the bytes for step_s
    double snapshot_total() const { return snapshot_work + snapshot_rent; }
    double replay_total() const { return replay_work + replay_rent; }
    double net() const { return snapshot_total() - replay_total(); }  // > 0: replay pays
};
// Tokens kept by a verification of N tokens when each draft is accepted with probability `accept`
// until the first rejection (the pending token is always kept).
double expected_kept_tokens(int draft_len, double accept);
ReplayVsSnapshots replay_vs_snapshots(const ModelConfig& c, const Hardware& hw, int draft_len, double accept,
                                      double step_s, const Efficiency& eff = {},
                                      spec::RecordVariant v = spec::RecordVariant::minimal_exact);

// Kimi-K3's RecoverSSM against vLLM's default snapshots, as vLLM runs them (reference/kimi_k3.md
// §3.1-3.3), for one verification of 1 + n tokens (n draft tokens, num_speculative_tokens), every linear
// layer, pages from spec::vllm_pages. Snapshots: the recurrent state written after each of the 1 + n
// tokens (the conv window rolls back by an offset), 1 + n pages held (2 + n in align mode, prefix
// caching). RecoverSSM: verify reads the
// checkpoint once (as the snapshot kernel reads its start state: not counted on either side) and
// writes one record per position (record_fields(c, recoverssm)); commit re-reads the checkpoint and the
// accepted records, folds them and writes one state; one page held (two in align mode). The conv
// window's work is the same in both and is left out. Held for one decode step of step_s.
ReplayVsSnapshots recoverssm_vs_snapshots(const ModelConfig& c, const Hardware& hw, int draft_tokens,
                                          double accept, double step_s, bool align,
                                          const Efficiency& eff = {});

// ---- 4. context parallelism of a prefill ----
// A prompt of R x n tokens split into R contiguous slices of n tokens (module 9's contiguous split), the
// linear layers made exact by the affine scan with the rerun fix-up, against the whole prompt on one
// rank. Seconds; each rank is one device of the preset.
struct CpPrefill {
    double single_s = 0;        // prefill_cost of all R n tokens on one rank
    double rank_s = 0;          // the last rank: its n tokens after (R - 1) n (its attention sees them all)
    double scan_s = 0;          // its extra linear-layer work: local map and compositions (cp_cost)
    double map_exchange_s = 0;  // the scan's maps it sends, every linear layer, over the link
    double kv_exchange_s = 0;   // attention KV of the earlier tokens it receives (not overlapped)
    double cp_s() const { return rank_s + scan_s + map_exchange_s + kv_exchange_s; }
    double speedup() const { return single_s / cp_s(); }
};
// ranks >= 1, ranks x tokens_per_rank < 2^31. One rank runs its slice directly: speedup exactly 1.
CpPrefill cp_prefill(const ModelConfig& c, const Hardware& hw, const Link& link, int tokens_per_rank,
                     int ranks, const Efficiency& eff = {}, int chunk = 64);

// ---- 5. moving a request against recomputing it ----
// checkpoint_distance: tokens back to a state checkpoint of the request that the destination holds; then
// moving only the KV and recomputing from there (move_kv) is a candidate too. Negative, or not less
// than the context: no such checkpoint (move_kv would recompute everything, i.e. be the recompute).
struct MoveVsRecompute {
    lifecycle::MigrationCosts costs;
    lifecycle::MigrationStrategy best_move = lifecycle::MigrationStrategy::move_all;  // move_all or move_kv
    double recompute_s = 0, best_move_s = 0;
    double advantage() const { return recompute_s / best_move_s; }  // > 1: moving pays
};
MoveVsRecompute move_vs_recompute(const ModelConfig& c, const Hardware& hw, double link_bytes_per_s,
                                  double context, double checkpoint_distance, const Efficiency& eff = {},
                                  lifecycle::RecomputeRegime regime = lifecycle::RecomputeRegime::in_batch);

}  // namespace k3::boundaries
