// Per-sequence memory of a hybrid model: the fixed state of its linear layers against the growing
// KV cache of its attention layers (reference/kda.md §5). Exact byte counts, no estimates.
#pragma once

#include <cstdint>

#include "core/model/config.h"

namespace k3 {

struct MemoryAccount {
    uint64_t recurrent_bytes_per_layer = 0;  // S: HV x K x V in the state dtype
    uint64_t conv_bytes_per_layer = 0;       // (W-1) raw rows x conv channels in the conv dtype
    uint64_t state_bytes_per_layer = 0;      // both
    uint64_t state_bytes = 0;                // all linear layers: fixed per sequence
    uint64_t kv_bytes_per_token_per_layer = 0;
    uint64_t kv_bytes_per_token = 0;           // all attention layers
    uint64_t baseline_kv_bytes_per_token = 0;  // every layer as attention (all-attention baseline)
    int linear_layers = 0, attention_layers = 0;

    double total_bytes(double context) const {
        return double(state_bytes) + double(kv_bytes_per_token) * context;
    }
    double baseline_bytes(double context) const { return double(baseline_kv_bytes_per_token) * context; }
    // Tokens of attention cache that weigh as much as the fixed state (state == KV).
    double state_equivalent_tokens() const;
    // Context above which the hybrid needs less memory than the all-attention baseline.
    double baseline_crossover_tokens() const;
};

MemoryAccount account_memory(const ModelConfig& c);

}  // namespace k3
