// Module 2 `memory`: fixed recurrent state against a growing KV cache, per sequence.
#pragma once

#include <cstdint>

#include "core/experiments/module.h"
#include "core/model/accounting.h"
#include "core/model/tp_shard.h"

namespace k3 {

// The dimensions used when preset=custom (their defaults are Kimi-Linear-48B-A3B's).
struct CustomModel {
    int layers = 27, attn_every = 4;
    bool attn_last = true;
    int heads = 32, v_heads = 32, head_k = 128, head_v = 128, conv_width = 4;
    DType state_dtype = DType::fp32, conv_dtype = DType::bf16;
    AttnKind attn_kind = AttnKind::mla;
    int mla_latent = 512, mla_rope = 64, kv_heads = 2, attn_head_dim = 256;
    bool operator==(const CustomModel&) const = default;
};

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class MemoryFalsify : uint8_t {
    none,
    state_size,   // the accounting counts each linear layer's state 64 B too large
    kv_dtype,     // the accounting counts the KV cache at 4 bytes per element whatever its dtype
    wrong_model,  // the accounting is given another preset's configuration
};

struct MemoryParams {
    ModelPreset preset = ModelPreset::kimi_k3;
    KvDtype kv_dtype = KvDtype::model;
    int tp = 1;                // tensor-parallel ranks: figures per GPU
    int64_t context = 131072;  // tokens
    double budget_gib = 40;
    CustomModel custom;
    MemoryFalsify falsify = MemoryFalsify::none;  // not a declared parameter
};

// One cache tensor of a layer: per sequence (linear layers) or per token (attention layers).
struct CacheTensor {
    std::string name;
    std::vector<int> shape;
    DType dtype;
};
std::vector<CacheTensor> linear_layer_tensors(const ModelConfig& c);
std::vector<CacheTensor> attention_token_tensors(const ModelConfig& c);
uint64_t tensor_bytes(const std::vector<CacheTensor>& ts);

// The same bytes recounted from the tensors, layer by layer (memory_recount.cpp).
struct MemoryRecount {
    uint64_t fixed_bytes = 0, per_token_bytes = 0, baseline_per_token_bytes = 0;
    double bytes(int64_t context) const {
        return double(fixed_bytes) + double(per_token_bytes) * double(context);
    }
    int64_t first_kv_at_least_state() const;  // searched: the smallest context with KV >= state
    int64_t first_hybrid_smaller() const;     // searched: the smallest context where the hybrid is smaller
};
MemoryRecount recount_memory(const ModelConfig& c);

struct MemoryResult {
    ModelConfig model;
    MemoryAccount account;
    MemoryRecount recount;        // from the tensors, not from the accounting
    bool custom_ignored = false;  // custom dimensions set while a preset is chosen
};

ParamList<MemoryParams> memory_params();
void validate_memory(const MemoryParams& p, Issues& issues);
ModelConfig memory_model_tp1(const MemoryParams& p);  // the whole model, before tensor parallelism
ModelConfig memory_model(const MemoryParams& p);      // one rank's share of it
MemoryResult run_memory(const MemoryParams& p);
void report_memory(const MemoryParams& p, const MemoryResult& m, Report& r);

}  // namespace k3
