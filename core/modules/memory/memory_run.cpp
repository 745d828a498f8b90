// Module 2 `memory`: the model the parameters describe and its exact byte accounting.
#include "core/modules/memory/memory.h"

namespace k3 {

namespace {

ModelConfig custom_model(const CustomModel& m) {
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
    c.kv_dtype = DType::bf16;
    return c;
}

}  // namespace

ModelConfig memory_model_tp1(const MemoryParams& p) {
    ModelConfig c = p.preset == ModelPreset::custom ? custom_model(p.custom) : *model_preset(p.preset);
    c.kv_dtype = resolve_kv_dtype(p.kv_dtype, c.kv_dtype);
    return c;
}

// One rank's share under tensor parallelism (core/model/tp_shard.h).
ModelConfig memory_model(const MemoryParams& p) { return shard_for_tp(memory_model_tp1(p), p.tp); }

// The accounting, damaged as the falsifier says.
static MemoryAccount account_falsified(const MemoryParams& p, const ModelConfig& c) {
    if (p.falsify == MemoryFalsify::wrong_model)
        return account_memory(*model_preset(p.preset == ModelPreset::qwen3_next_80b
                                                ? ModelPreset::kimi_linear_48b
                                                : ModelPreset::qwen3_next_80b));
    ModelConfig d = c;
    if (p.falsify == MemoryFalsify::kv_dtype) d.kv_dtype = DType::fp32;
    MemoryAccount a = account_memory(d);
    if (p.falsify == MemoryFalsify::state_size) {
        a.state_bytes_per_layer += 64;
        a.state_bytes = a.state_bytes_per_layer * uint64_t(a.linear_layers);
    }
    return a;
}

MemoryResult run_memory(const MemoryParams& p) {
    MemoryResult m;
    m.model = memory_model(p);
    m.account = account_falsified(p, m.model);
    m.recount = recount_memory(m.model);
    m.custom_ignored = p.preset != ModelPreset::custom && !(p.custom == CustomModel{});
    return m;
}

}  // namespace k3
