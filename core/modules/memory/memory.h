// Module 2 `memory`: fixed recurrent state against a growing KV cache, per sequence.
#pragma once

#include <cstdint>

#include "core/experiments/module.h"
#include "core/model/accounting.h"

namespace k3 {

// The dimensions used when preset=custom (their defaults are Kimi-Linear-48B-A3B's).
struct CustomModel {
    int layers = 27, attn_every = 4;
    bool attn_last = true;
    int heads = 32, v_heads = 32, head_k = 128, head_v = 128, conv_width = 4;
    DType state_dtype = DType::fp32, conv_dtype = DType::bf16;
    AttnKind attn_kind = AttnKind::mla;
    int mla_latent = 512, mla_rope = 64, kv_heads = 2, attn_head_dim = 256;
    DType kv_dtype = DType::bf16;
    bool operator==(const CustomModel&) const = default;
};

struct MemoryParams {
    ModelPreset preset = ModelPreset::kimi_linear_48b;
    int64_t context = 131072;  // tokens
    double budget_gib = 40;
    CustomModel custom;
};

struct MemoryResult {
    ModelConfig model;
    MemoryAccount account;
    double layer_by_layer_bytes = 0;  // the layers summed one by one, as the pool allocates them
    bool custom_ignored = false;      // custom dimensions set while a preset is chosen
};

ParamList<MemoryParams> memory_params();
void validate_memory(const MemoryParams& p, Issues& issues);
ModelConfig memory_model(const MemoryParams& p);
MemoryResult run_memory(const MemoryParams& p);
void report_memory(const MemoryParams& p, const MemoryResult& m, Report& r);

}  // namespace k3
