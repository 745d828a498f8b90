// How an instance of `gpus` ranks lays out attention's KV and the linear layers' state, as the engines
// run it (reference/kimi_k3.md §2.1, the MLA cache entry and "replicated on every TP rank"; SGLang
// --enable-dp-attention, vLLM's DP attention).
//
// Tensor parallel attention (the default): every rank runs every request. shard_for_tp gives one rank's
// share: an MLA latent is one KV "head" each rank keeps whole (replicated), GQA K/V heads split up to
// the number of KV heads and replicate beyond, the linear layers' state splits by heads. The ranks run
// in lockstep, so the instance holds as many tokens as one rank's memory holds of that rank's KV.
// DP attention: each rank runs attention (and the linear layers) for its own requests with all the
// heads, so a token's KV and a request's state live whole on one rank; requests are split across the
// ranks (taken as balanced: the ranks' pools are merged, per-rank imbalance is not modelled).
//
// Bytes "of the instance" are summed over its ranks: a TP token of MLA KV weighs ranks x the latent.
#pragma once

#include <string>

#include "core/memory/pool.h"
#include "core/model/accounting.h"
#include "core/model/config.h"

namespace k3 {

struct TpLayout {
    int ranks = 1;
    bool attention_dp = false;
    MemoryAccount rank;  // what a rank holding a request holds for it (shard_for_tp, or whole under DP)
    int copies = 1;      // ranks holding each token's KV and each request's state share: TP ranks, DP 1

    uint64_t rank_kv_bytes_per_token() const { return rank.kv_bytes_per_token; }
    uint64_t rank_state_bytes() const { return rank.state_bytes; }
    uint64_t kv_bytes_per_token() const { return rank.kv_bytes_per_token * uint64_t(copies); }
    uint64_t state_bytes() const { return rank.state_bytes * uint64_t(copies); }
    // The instance's working pool in instance bytes (a rank's per-layer bytes x copies).
    PoolModel pool_model() const;
    // "TP 2: ..." / "DP attention over 2 ranks: ..." (the report's note).
    std::string describe(const ModelConfig& whole) const;
};

TpLayout tp_layout(const ModelConfig& whole, int gpus, bool attention_dp);
// Why the layout cannot run ("" when it can): TP must divide the linear heads.
std::string tp_layout_error(const ModelConfig& whole, int gpus, bool attention_dp);

}  // namespace k3
