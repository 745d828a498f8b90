#include "core/memory/hybrid_blocks.h"

namespace k3 {

static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

std::string plan_hybrid_blocks(const PoolModel& m, uint32_t kernel_multiple, uint32_t min_block_tokens,
                               HybridBlockPlan* out) {
    if (m.attention_layers <= 0 || m.linear_layers <= 0)
        return "the one-page-size design needs at least one attention and one linear layer";
    if (m.kv_bytes_per_token_per_layer == 0 || m.state_bytes_per_layer == 0) return "zero-sized KV or state";
    if (kernel_multiple == 0) return "kernel block multiple must be at least 1";
    HybridBlockPlan p;
    p.kernel_multiple = kernel_multiple;
    const uint64_t kv = m.kv_bytes_per_token_per_layer, st = m.state_bytes_per_layer;
    p.raw_tokens = cdiv(st, kv);
    uint64_t block = uint64_t(kernel_multiple) * cdiv(st, uint64_t(kernel_multiple) * kv);
    if (block < min_block_tokens) block = min_block_tokens;
    if (block > 0xffffffffull) return "block size overflows";
    p.block_tokens = uint32_t(block);
    p.page_bytes_per_layer = block * kv;
    p.state_padding_per_layer = p.page_bytes_per_layer - st;

    // vLLM kv_cache_utils: group_size = min layer count, or max when max < 1.25 * min.
    const int lo = m.attention_layers < m.linear_layers ? m.attention_layers : m.linear_layers;
    const int hi = m.attention_layers < m.linear_layers ? m.linear_layers : m.attention_layers;
    p.group_size = double(hi) < double(lo) * 1.25 ? hi : lo;
    p.attention_groups = int(cdiv(uint64_t(m.attention_layers), uint64_t(p.group_size)));
    p.linear_groups = int(cdiv(uint64_t(m.linear_layers), uint64_t(p.group_size)));
    p.attention_padding_layers = p.attention_groups * p.group_size - m.attention_layers;
    p.linear_padding_layers = p.linear_groups * p.group_size - m.linear_layers;
    p.block_bytes = uint64_t(p.group_size) * p.page_bytes_per_layer;
    *out = p;
    return {};
}

}  // namespace k3
