// Module 2 `memory`: the model the parameters describe and its exact byte accounting.
#include "core/modules/memory/memory.h"

namespace k3 {

ModelConfig memory_model(const MemoryParams& p) {
    if (p.preset != ModelPreset::custom) return *model_preset(p.preset);
    const CustomModel& m = p.custom;
    ModelConfig c;
    c.id = "custom";
    c.name = "custom";
    c.layers = hybrid_pattern(m.layers, m.attn_every, m.attn_last);
    c.lin_heads = m.heads;
    c.lin_v_heads = m.v_heads;
    c.head_k = m.head_k;
    c.head_v = m.head_v;
    c.conv_width = m.conv_width;
    c.state_dtype = m.state_dtype;
    c.conv_dtype = m.conv_dtype;
    c.attn_kind = m.attn_kind;
    c.mla_latent = m.mla_latent;
    c.mla_rope = m.mla_rope;
    c.kv_heads = m.kv_heads;
    c.attn_head_dim = m.attn_head_dim;
    c.kv_dtype = m.kv_dtype;
    return c;
}

MemoryResult run_memory(const MemoryParams& p) {
    MemoryResult m;
    m.model = memory_model(p);
    m.account = account_memory(m.model);
    // Sum the layers one by one (the way the pool allocates them), to compare with the closed form.
    for (LayerKind k : m.model.layers)
        m.layer_by_layer_bytes += k == LayerKind::linear
                                      ? double(m.account.state_bytes_per_layer)
                                      : double(m.account.kv_bytes_per_token_per_layer) * double(p.context);
    m.custom_ignored = p.preset != ModelPreset::custom && !(p.custom == CustomModel{});
    return m;
}

}  // namespace k3
