#include "core/model/accounting.h"

#include <limits>

namespace k3 {

MemoryAccount account_memory(const ModelConfig& c) {
    MemoryAccount a;
    a.linear_layers = c.n_linear();
    a.attention_layers = c.n_attention();
    a.recurrent_bytes_per_layer =
        uint64_t(c.lin_v_heads) * uint64_t(c.head_k) * uint64_t(c.head_v) * dtype_bytes(c.state_dtype);
    a.conv_bytes_per_layer = uint64_t(c.conv_width > 1 ? c.conv_width - 1 : 0) * uint64_t(c.conv_channels()) *
                             dtype_bytes(c.conv_dtype);
    a.state_bytes_per_layer = a.recurrent_bytes_per_layer + a.conv_bytes_per_layer;
    a.state_bytes = a.state_bytes_per_layer * uint64_t(a.linear_layers);
    const uint64_t elems = c.attn_kind == AttnKind::mla
                               ? uint64_t(c.mla_latent + c.mla_rope)
                               : 2ull * uint64_t(c.kv_heads) * uint64_t(c.attn_head_dim);
    a.kv_bytes_per_token_per_layer = elems * dtype_bytes(c.kv_dtype);
    a.kv_bytes_per_token = a.kv_bytes_per_token_per_layer * uint64_t(a.attention_layers);
    a.baseline_kv_bytes_per_token = a.kv_bytes_per_token_per_layer * uint64_t(c.n_layers());
    return a;
}

double MemoryAccount::state_equivalent_tokens() const {
    if (kv_bytes_per_token == 0) return std::numeric_limits<double>::infinity();
    return double(state_bytes) / double(kv_bytes_per_token);
}

double MemoryAccount::baseline_crossover_tokens() const {
    if (baseline_kv_bytes_per_token <= kv_bytes_per_token) return std::numeric_limits<double>::infinity();
    return double(state_bytes) / double(baseline_kv_bytes_per_token - kv_bytes_per_token);
}

}  // namespace k3
