// What it costs to move a paused request to another instance (reference/serving.md §4), by strategy:
//
//   move_all   send everything: the KDA state (S and conv windows of every linear layer), the attention
//              KV of all `context` tokens, the token ids and the sampler. Nothing is recomputed.
//   move_kv    send the attention KV up to the nearest state checkpoint the DESTINATION already holds
//              (a prefix-cache checkpoint, a host-tier replica) plus token ids and sampler; the
//              destination restores the checkpoint and recomputes the `checkpoint_distance` tokens after
//              it, which rebuilds their KV and the KDA state (recomputing needs the KV before it first,
//              so transfer and recompute add up). No KDA state crosses the link.
//   recompute  send only token ids and sampler; the destination prefills the whole context again
//              (vLLM's preemption by recompute).
//
// Bytes are exact: the size of the blob (blob_layout.h) the writer produces for that strategy, in the
// configuration's dtypes (Kimi-Linear: fp32 state, bf16 conv windows and MLA cache). Times are either
// ROOFLINE ESTIMATES from a hardware preset (core/model/roofline.h; say so wherever they are shown) or
// derived from a measured prefill speed on this device. Transfer time is bytes / link bandwidth (line
// rate, no latency or protocol overhead).
//
//   auto c = lifecycle::migration_costs(*model_preset("kimi-linear-48b"), {131072, 2048},
//                                       *link_preset("ib-ndr"), *hardware_preset("h100"));
//   c.fastest();                       // MigrationStrategy::move_all, ::move_kv or ::recompute
//   c[MigrationStrategy::move_kv].total_s;
#pragma once

#include <array>

#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3::lifecycle {

enum class MigrationStrategy : uint8_t { move_all, move_kv, recompute };
inline constexpr std::array<MigrationStrategy, 3> kMigrationStrategies = {
    MigrationStrategy::move_all, MigrationStrategy::move_kv, MigrationStrategy::recompute};
const char* strategy_id(MigrationStrategy s);     // "move_all", "move_kv", "recompute"
const char* strategy_title(MigrationStrategy s);  // "move everything", ...

// The request to move.
struct MigrationCase {
    double context = 0;              // tokens the request holds: its KV rows and its state's position
    double checkpoint_distance = 0;  // tokens from the nearest state checkpoint at the destination to
                                     // `context`; clamped to [0, context]; context = no checkpoint
};

struct StrategyCost {
    MigrationStrategy strategy = MigrationStrategy::move_all;
    double bytes = 0;             // over the link: the exact blob size (header, sections, CRC)
    double state_bytes = 0;       //   of which KDA state (S + conv windows)
    double kv_bytes = 0;          //   of which attention KV
    double kv_tokens = 0;         // KV rows moved
    double recompute_tokens = 0;  // tokens run again at the destination
    double recompute_flops = 0;   // their work: flops_per_token (roofline.h) summed over them
    double transfer_s = 0;        // bytes / link bandwidth
    double recompute_s = 0;       // roofline estimate, or tokens / measured speed
    double total_s = 0;           // transfer_s + recompute_s
};

struct MigrationCosts {
    std::array<StrategyCost, 3> by;  // indexed by MigrationStrategy
    const StrategyCost& operator[](MigrationStrategy s) const { return by[size_t(s)]; }
    // Least total time; on a tie the fewer bytes, then the earlier strategy.
    MigrationStrategy fastest() const;
};

// How the destination runs the recompute, for the roofline estimate:
//   alone     as its own prefill: prefill_cost() of roofline.h, which streams all weights once (for
//             Kimi-Linear about 96 GB, a floor of ~36 ms on an H100 however few tokens are recomputed);
//   in_batch  folded into batches the destination runs anyway (chunked prefill): the weights are
//             streamed for the batch, so only the FLOPs and the request's own KV and state traffic count.
enum class RecomputeRegime : uint8_t { alone, in_batch };

// Roofline estimate: recompute_s = prefill_cost(cfg, hw, tokens, tokens already there, eff).seconds
// (in_batch: prefill_cost_in_batch, without the weight traffic). cfg needs active_params and
// total_params (the accounting presets have them).
MigrationCosts migration_costs(const ModelConfig& cfg, const MigrationCase& mc, const Link& link,
                               const Hardware& hw, const Efficiency& eff = {},
                               RecomputeRegime regime = RecomputeRegime::alone);

// Measured speed: recompute_s = tokens / prefill_tokens_per_s (> 0), transfer at link_bytes_per_s (> 0).
// recompute_flops still uses flops_per_token: set cfg.active_params for a runnable model
// (ModelWeights::parameters()).
MigrationCosts migration_costs_measured(const ModelConfig& cfg, const MigrationCase& mc,
                                        double link_bytes_per_s, double prefill_tokens_per_s);

// The checkpoint distance up to which move_kv is at least as fast as move_all under the roofline
// estimate: the last distance before the first one at which it loses (0 when it only wins with nothing
// to recompute; `context` when it always wins), found by doubling then bisection.
double move_kv_break_even_distance(const ModelConfig& cfg, double context, const Link& link,
                                   const Hardware& hw, const Efficiency& eff = {},
                                   RecomputeRegime regime = RecomputeRegime::alone);

}  // namespace k3::lifecycle
