// Module 2 `memory`: a second count of the same bytes, tensor by tensor, as an engine allocates them
// (vLLM's kda_state_shape: q, k and v conv windows apart, then S; MLA latent and rope apart; GQA K
// and V apart), from the configuration alone: account_memory is not consulted. Its checks compare
// the accounting with this count, and the closed-form break-even and crossover with searches over it.
#include "core/modules/memory/memory.h"

namespace k3 {

namespace {

uint64_t elements(const CacheTensor& t) {
    uint64_t n = 1;
    for (int d : t.shape) n *= uint64_t(d);
    return n;
}

}  // namespace

std::vector<CacheTensor> linear_layer_tensors(const ModelConfig& c) {
    const int rows = c.conv_width - 1;
    return {{"conv window q", {rows, c.lin_heads * c.head_k}, c.conv_dtype},
            {"conv window k", {rows, c.lin_heads * c.head_k}, c.conv_dtype},
            {"conv window v", {rows, c.lin_v_heads * c.head_v}, c.conv_dtype},
            {"recurrent state S", {c.lin_v_heads, c.head_k, c.head_v}, c.state_dtype}};
}

std::vector<CacheTensor> attention_token_tensors(const ModelConfig& c) {
    if (c.attn_kind == AttnKind::mla)
        return {{"MLA latent", {c.mla_latent}, c.kv_dtype}, {"MLA rope key", {c.mla_rope}, c.kv_dtype}};
    return {{"K", {c.kv_heads, c.attn_head_dim}, c.kv_dtype},
            {"V", {c.kv_heads, c.attn_head_dim}, c.kv_dtype}};
}

uint64_t tensor_bytes(const std::vector<CacheTensor>& ts) {
    uint64_t b = 0;
    for (const CacheTensor& t : ts) b += elements(t) * dtype_bytes(t.dtype);
    return b;
}

MemoryRecount recount_memory(const ModelConfig& c) {
    MemoryRecount r;
    const uint64_t state = tensor_bytes(linear_layer_tensors(c)),
                   kv = tensor_bytes(attention_token_tensors(c));
    for (LayerKind k : c.layers) {
        (k == LayerKind::linear ? r.fixed_bytes : r.per_token_bytes) += k == LayerKind::linear ? state : kv;
        r.baseline_per_token_bytes += kv;  // the same layer as attention
    }
    return r;
}

// The smallest context at which `reached(n)` holds, by doubling and bisection (0 if it never does
// below 2^40 tokens). `reached` must be monotone.
template <class Pred>
static int64_t first_context(Pred reached) {
    int64_t hi = 1;
    while (!reached(hi)) {
        if (hi > (int64_t(1) << 40)) return 0;
        hi *= 2;
    }
    int64_t lo = hi / 2;  // !reached(lo) unless lo == 0
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (reached(mid) ? hi : lo) = mid;
    }
    return hi;
}

int64_t MemoryRecount::first_kv_at_least_state() const {
    return first_context([&](int64_t n) { return per_token_bytes * uint64_t(n) >= fixed_bytes; });
}

int64_t MemoryRecount::first_hybrid_smaller() const {
    return first_context([&](int64_t n) {
        return fixed_bytes + per_token_bytes * uint64_t(n) < baseline_per_token_bytes * uint64_t(n);
    });
}

}  // namespace k3
