#include "core/model/pool_model.h"

namespace k3 {

PoolModel pool_model(const MemoryAccount& a) {
    PoolModel m;
    m.linear_layers = a.linear_layers;
    m.attention_layers = a.attention_layers;
    m.state_bytes_per_layer = a.state_bytes_per_layer;
    m.recurrent_bytes_per_layer = a.recurrent_bytes_per_layer;
    m.kv_bytes_per_token_per_layer = a.kv_bytes_per_token_per_layer;
    return m;
}

VllmStatePage vllm_state_page(const ModelConfig& c, int draft_len, bool recoverssm, bool draft_columns) {
    VllmStatePage p;
    const uint64_t n = uint64_t(draft_len > 0 ? draft_len : 0);
    const uint64_t columns = uint64_t(c.conv_width > 1 ? c.conv_width - 1 : 0) + (draft_columns ? n : 0);
    p.conv_bytes = columns * uint64_t(c.conv_channels()) * dtype_bytes(c.conv_dtype);
    p.recurrent_bytes =
        uint64_t(c.lin_v_heads) * uint64_t(c.head_k) * uint64_t(c.head_v) * dtype_bytes(c.state_dtype);
    if (recoverssm) {
        const uint64_t records = uint64_t(c.lin_v_heads) * (1 + n);
        p.correction_bytes = records * uint64_t(c.head_v) * dtype_bytes(DType::fp32);
        p.key_gate_bytes = records * 2ull * uint64_t(c.head_k) * dtype_bytes(DType::bf16);
    }
    return p;
}

PoolModel vllm_pool_model(const ModelConfig& rank, const VllmStatePage& page) {
    PoolModel m = pool_model(rank);
    m.state_bytes_per_layer = page.bytes();
    m.recurrent_bytes_per_layer = page.recurrent_bytes;
    return m;
}

}  // namespace k3
