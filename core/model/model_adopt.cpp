// Model::adopt_kv: a sequence takes over KV that a prefix cache lent it (core/cache/kv_pages.h).
#include "core/model/model.h"

namespace k3::model {

std::string Model::adopt_kv(Sequence& seq) const {
    const PagePool& pool = seq.pool();
    const PoolModel& pm = pool.model();
    if (pm.kv_bytes_per_token_per_layer != pool_model_.kv_bytes_per_token_per_layer ||
        pm.attention_layers != pool_model_.attention_layers ||
        pm.state_bytes_per_layer != pool_model_.state_bytes_per_layer ||
        pm.linear_layers != pool_model_.linear_layers)
        return "the sequence's pool was made for another model geometry";
    if (pool.state_owner(seq.state()) != seq.owner()) return "the sequence's state slot is no longer its own";
    const uint64_t tokens = pool.kv_tokens(seq.owner());
    if (tokens > options_.max_context)
        return "adopted KV of " + std::to_string(tokens) + " tokens exceeds max_context " +
               std::to_string(options_.max_context);
    seq.position_ = tokens;
    return {};
}

}  // namespace k3::model
