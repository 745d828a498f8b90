#include "core/fleet/tp_layout.h"

#include <algorithm>

#include "core/model/pool_model.h"
#include "core/model/tp_shard.h"

namespace k3 {

TpLayout tp_layout(const ModelConfig& whole, int gpus, bool attention_dp) {
    TpLayout l;
    l.ranks = std::max(gpus, 1);
    l.attention_dp = attention_dp;
    l.copies = attention_dp ? 1 : l.ranks;
    l.rank = account_memory(attention_dp ? whole : shard_for_tp(whole, l.ranks));
    return l;
}

std::string tp_layout_error(const ModelConfig& whole, int gpus, bool attention_dp) {
    return attention_dp ? std::string() : tp_shard_error(whole, std::max(gpus, 1));
}

PoolModel TpLayout::pool_model() const {
    PoolModel m = k3::pool_model(rank);
    const uint64_t n = uint64_t(copies);
    m.state_bytes_per_layer *= n;
    m.recurrent_bytes_per_layer *= n;
    m.kv_bytes_per_token_per_layer *= n;
    return m;
}

std::string TpLayout::describe(const ModelConfig& whole) const {
    const bool mla = whole.attn_kind == AttnKind::mla;
    if (attention_dp)
        return "DP attention over " + std::to_string(ranks) +
               " rank(s): each rank runs attention and the linear layers for its own requests with all "
               "the heads, holding their KV and states whole; requests are split across the ranks (taken "
               "as balanced)";
    if (ranks == 1) return "one GPU: the whole KV and state on one rank";
    const std::string kv = mla ? "the MLA latent (one KV head) is replicated on every rank"
                               : "the " + std::to_string(whole.kv_heads) + " KV heads are split " +
                                     (whole.kv_heads >= ranks ? std::string("across the ranks")
                                                              : "one per rank and replicated beyond");
    return "TP " + std::to_string(ranks) + ": " + kv + "; the " + whole.linear_name +
           " state is sharded by heads (1/" + std::to_string(ranks) + " per rank)";
}

}  // namespace k3
