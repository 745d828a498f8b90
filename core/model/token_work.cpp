// Work per token of the runnable model (token_work.h).
#include "core/model/token_work.h"

#include <algorithm>

namespace k3::model {

namespace {

double weights_of(const Matrix& m) { return double(m.in) * double(m.out); }

double projection_weights(const BlockWeights& b) {
    double n = weights_of(b.mlp.gate) + weights_of(b.mlp.up) + weights_of(b.mlp.down);
    if (b.kind == LayerKind::linear) {
        const KdaWeights& k = b.kda;
        for (const Matrix* m : {&k.q, &k.k, &k.v, &k.f_a, &k.f_b, &k.b, &k.g_a, &k.g_b, &k.g_proj, &k.o})
            n += weights_of(*m);
    } else {
        const MlaWeights& a = b.mla;
        for (const Matrix* m : {&a.q, &a.kv_a, &a.g, &a.o}) n += weights_of(*m);
        for (const auto& m : a.w_uk) n += weights_of(m);
        for (const auto& m : a.w_uv) n += weights_of(m);
    }
    return n;
}

}  // namespace

ModelTokenWork model_token_work(const ModelConfig& c, const ModelWeights& w, double context) {
    ModelTokenWork t;
    double weights = weights_of(w.lm_head);
    for (const BlockWeights& b : w.blocks) weights += projection_weights(b);
    t.projection_flop = 2 * weights;
    t.weight_bytes = 2 * weights;
    const double state = double(c.lin_v_heads) * c.head_k * c.head_v;  // elements per KDA layer
    const double latent = double(c.mla_latent) + c.mla_rope;
    t.core_flop =
        c.n_linear() * 7 * state + c.n_attention() * 2.0 * c.attn_heads * context * (latent + c.mla_latent);
    t.state_bytes = c.n_linear() * 8 * state;
    t.kv_bytes = c.n_attention() * 4.0 * latent * context;
    return t;
}

kda::KernelWork decode_token_work(const ModelTokenWork& t, kda::MemLevel weights_level) {
    return {.flop = t.projection_flop + t.core_flop,
            .bytes = t.weight_bytes + t.state_bytes + t.kv_bytes,
            .level = weights_level,
            .rmw = false};
}

kda::KernelWork prefill_token_work(const ModelTokenWork& t, int T, kda::MemLevel weights_level) {
    kda::KernelWork k = decode_token_work(t, weights_level);
    k.bytes = (t.weight_bytes + t.state_bytes) / std::max(1, T) + t.kv_bytes;
    return k;
}

}  // namespace k3::model
