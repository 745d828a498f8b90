// vLLM's unified page size for hybrid (attention + state) models, derived the way vLLM derives it
// (reference/serving.md §1.2; vLLM HybridAttentionMambaModelConfig / Platform block-size alignment
// and kv_cache_utils layer grouping):
//
// 1. Block size. A state page for one layer must fit in one attention page for one layer:
//        block_tokens = m * ceil(state_bytes_per_layer / (m * kv_bytes_per_token_per_layer))
//    with m the attention kernel's block-size multiple (16 for FlashAttention), never below the
//    user's block size. The state page is then padded up to the attention page
//    ("Padding mamba page size by x%").
//    Qwen3.5-4B: 2,146,304 B state / 4,096 B per token = 524 -> 528 tokens, padding 0.76 %.
//    For MLA models the vLLM tree serving Kimi K3 raises m to at least 128 (the caller passes it:
//    module 3's mla_align), and the state page is vLLM's, with its conv window of 3 + N columns and
//    RecoverSSM's records (core/model/pool_model.h vllm_state_page; reference/kimi_k3.md §2.2).
// 2. Groups. Layers of one kind are split into groups of `group_size` layers: the smaller layer
//    count, or the larger when the two are within 25 %. The last group of a kind is filled with
//    padding layers. One block id indexes the same offset in group_size per-layer tensors, so one
//    block is group_size pages of one layer each. A KV page needs one block per attention group;
//    a state needs one block per linear group (Kimi-Linear: 20 KDA layers in groups of 7 -> 3
//    blocks, one of them with a padding layer).
#pragma once

#include <cstdint>
#include <string>

#include "core/memory/pool.h"

namespace k3 {

struct HybridBlockPlan {
    uint32_t kernel_multiple = 16;
    uint64_t raw_tokens = 0;            // ceil(state per layer / KV per token per layer), before rounding
    uint32_t block_tokens = 0;          // attention block size in tokens
    uint64_t page_bytes_per_layer = 0;  // block_tokens x KV per token per layer (= padded state page)
    uint64_t state_padding_per_layer = 0;
    int group_size = 0;  // layers per group = per-layer tensors sharing a block id
    int attention_groups = 0, linear_groups = 0;
    int attention_padding_layers = 0, linear_padding_layers = 0;
    uint64_t block_bytes = 0;  // group_size x page_bytes_per_layer

    // Blocks one request takes: a block per linear group for each of its states, one per attention
    // group for its first KV page.
    uint64_t blocks_per_request(int states) const {
        return uint64_t(linear_groups) * uint64_t(states) + uint64_t(attention_groups);
    }

    // What vLLM logs: "Padding mamba page size by x%" (per layer, padding layers aside).
    double state_padding_pct(uint64_t state_bytes_per_layer) const {
        return state_bytes_per_layer ? 100.0 * double(state_padding_per_layer) / double(state_bytes_per_layer)
                                     : 0;
    }
};

// Empty error on success. Needs at least one attention and one linear layer.
std::string plan_hybrid_blocks(const PoolModel& m, uint32_t kernel_multiple, uint32_t min_block_tokens,
                               HybridBlockPlan* out);

}  // namespace k3
