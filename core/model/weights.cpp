#include "core/model/weights.h"

#include <cmath>

#include "core/base/bf16.h"
#include "core/base/fmath.h"
#include "core/base/rng.h"

namespace k3::model {

namespace {

// Every tensor draws from its own stream, keyed by (layer, tag), so adding a tensor later never
// shifts the values of the others.
Rng tensor_rng(uint64_t seed, int layer, int tag) {
    return Rng(mix64(seed ^ mix64(uint64_t(layer + 1) * 1000003ull + uint64_t(tag))));
}

FloatBuf normal(Rng r, size_t n, float sd) {
    FloatBuf v(n);
    r.fill_normal(v.data(), n, sd);
    return v;
}

// N(0, (gain / sqrt(in))^2) entries, rounded to bf16.
Matrix matrix(Rng r, int in, int out, float gain = 1.0f) {
    Matrix m(in, out);
    const float sd = gain / float(std::sqrt(double(in)));
    for (int i = 0; i < in; ++i)
        for (int o = 0; o < out; ++o) m.set(i, o, float(r.normal()) * sd);
    return m;
}

// Norm weights: 1 + small noise (a trained model's are not all ones; the noise also makes a wrong
// index visible in the tests).
FloatBuf norm_weight(Rng r, int n) {
    FloatBuf v = normal(r, size_t(n), 0.05f);
    for (float& x : v) x = 1.0f + x;
    return v;
}

void make_kda(KdaWeights& w, const KdaDims& d, uint64_t seed, int layer, float out_gain) {
    const int D = d.d_model, QK = d.qk_channels(), VC = d.v_channels(), G = d.g_channels(), R = d.rank;
    const int W = d.conv_width, HV = d.s.HV;
    w.q = matrix(tensor_rng(seed, layer, 10), D, QK);
    w.k = matrix(tensor_rng(seed, layer, 11), D, QK);
    w.v = matrix(tensor_rng(seed, layer, 12), D, VC);
    // Depthwise conv: PyTorch's default init, U(-1/sqrt(W), 1/sqrt(W)) with fan-in W.
    const float cb = float(1.0 / std::sqrt(double(W)));
    auto conv = [&](int tag, int channels) {
        FloatBuf v(size_t(channels) * W);
        tensor_rng(seed, layer, tag).fill_uniform(v.data(), v.size(), -cb, cb);
        return v;
    };
    w.conv_q = conv(13, QK);
    w.conv_k = conv(14, QK);
    w.conv_v = conv(15, VC);
    w.f_a = matrix(tensor_rng(seed, layer, 16), D, R);
    w.f_b = matrix(tensor_rng(seed, layer, 17), R, G);
    Rng ra = tensor_rng(seed, layer, 18);
    w.A_log.resize(size_t(HV));
    for (float& a : w.A_log) a = float(log_f64(ra.uniform(1.0, 16.0)));
    // dt log-uniform in [1e-3, 1e-1]; dt_bias = softplus^-1(dt) = dt + log(1 - exp(-dt)). The bounded
    // gate gets the dt_bias that gives the same decay at z = 0: lb sigmoid(exp(A_log) dt_bias) = -dt,
    // dt_bias = logit(dt / |lb|) / exp(A_log).
    Rng rd = tensor_rng(seed, layer, 19);
    w.dt_bias.resize(size_t(G));
    for (size_t e = 0; e < w.dt_bias.size(); ++e) {
        const double dt = exp_f64(rd.uniform(log_f64(1e-3), log_f64(1e-1)));
        const double p = dt / -double(d.gate_lower_bound);
        w.dt_bias[e] = d.gate_lower_bound < 0
                           ? float(log_f64(p / (1.0 - p)) / exp_f64(double(w.A_log[e / size_t(d.s.K)])))
                           : float(dt + log_f64(1.0 - exp_f64(-dt)));
    }
    w.b = matrix(tensor_rng(seed, layer, 20), D, HV);
    if (d.full_rank_gate) {
        w.g_proj = matrix(tensor_rng(seed, layer, 25), D, VC);
    } else {
        w.g_a = matrix(tensor_rng(seed, layer, 21), D, R);
        w.g_b = matrix(tensor_rng(seed, layer, 22), R, VC);
    }
    w.o_norm = norm_weight(tensor_rng(seed, layer, 23), d.s.V);
    w.o = matrix(tensor_rng(seed, layer, 24), VC, D, out_gain);
}

void make_mla(MlaWeights& w, const MlaDims& d, uint64_t seed, int layer, float out_gain) {
    w.q = matrix(tensor_rng(seed, layer, 30), d.d_model, d.q_row());
    w.kv_a = matrix(tensor_rng(seed, layer, 31), d.d_model, d.cache_row());
    w.kv_norm = norm_weight(tensor_rng(seed, layer, 32), d.latent);
    // k_nope = W_uk c and v = W_uv c with c of unit RMS: entries N(0, 1/latent) keep them O(1).
    const float gain =
        float(std::sqrt(double(d.nope) / double(d.latent)));  // matrix() divides by sqrt(in = nope)
    for (int h = 0; h < d.heads; ++h) {
        w.w_uk.push_back(matrix(tensor_rng(seed, layer, 100 + h), d.nope, d.latent, gain));
        w.w_uv.push_back(matrix(tensor_rng(seed, layer, 200 + h), d.latent, d.v));
    }
    if (d.output_gate) w.g = matrix(tensor_rng(seed, layer, 36), d.d_model, d.heads * d.v);
    w.o = matrix(tensor_rng(seed, layer, 35), d.heads * d.v, d.d_model, out_gain);
}

// A mixing point of the attention residuals: norm weight as the others; pseudo-query N(0, 1/d), so a
// logit (the query against a unit-RMS source) is O(1) and the softmax over depth is far from uniform.
// (Trained from zero, AttnRes starts as a plain average; random weights make every source matter.)
AttnResWeights attn_res_weights(uint64_t seed, int layer, int tag, int D) {
    return {norm_weight(tensor_rng(seed, layer, tag), D),
            normal(tensor_rng(seed, layer, tag + 1), size_t(D), float(1.0 / std::sqrt(double(D))))};
}

}  // namespace

Matrix::Matrix(int in_, int out_) : in(in_), out(out_), pairs(size_t((in_ + 1) / 2) * size_t(out_), 0u) {}

float Matrix::at(int i, int o) const {
    const uint32_t w = pairs[size_t(i / 2) * out + o];
    return i % 2 ? bf16_hi(w) : bf16_lo(w);
}

void Matrix::set(int i, int o, float v) {
    uint32_t& w = pairs[size_t(i / 2) * out + o];
    const uint32_t b = f32_to_bf16(v);
    w = i % 2 ? (w & 0xffffu) | (b << 16) : (w & 0xffff0000u) | b;
}

uint64_t ModelWeights::parameters() const {
    auto m = [](const Matrix& x) { return x.size(); };
    uint64_t n =
        embed.size() + final_norm.size() + m(lm_head) + output_res.norm.size() + output_res.proj.size();
    for (const auto& b : blocks) {
        n += b.attn_norm.size() + b.mlp_norm.size() + m(b.mlp.gate) + m(b.mlp.up) + m(b.mlp.down);
        const auto& k = b.kda;
        n += m(k.q) + m(k.k) + m(k.v) + k.conv_q.size() + k.conv_k.size() + k.conv_v.size() + m(k.f_a) +
             m(k.f_b) + k.A_log.size() + k.dt_bias.size() + m(k.b) + m(k.g_a) + m(k.g_b) + m(k.g_proj) +
             k.o_norm.size() + m(k.o);
        const auto& a = b.mla;
        n += m(a.q) + m(a.kv_a) + a.kv_norm.size() + m(a.g) + m(a.o);
        n += b.attn_res.norm.size() + b.attn_res.proj.size() + b.mlp_res.norm.size() + b.mlp_res.proj.size();
        for (const Matrix& x : a.w_uk) n += m(x);
        for (const Matrix& x : a.w_uv) n += m(x);
    }
    return n;
}

ModelWeights make_weights(const ModelConfig& c, uint64_t seed) {
    ModelWeights w;
    const int D = c.d_model;
    w.embed = normal(tensor_rng(seed, -1, 1), size_t(c.vocab) * D, 1.0f);
    // Residual branches write through o_proj / down_proj scaled by 1/sqrt(2 n_layers), so the residual
    // stream's RMS stays O(1) after all blocks.
    const float out_gain = float(1.0 / std::sqrt(2.0 * c.n_layers()));
    const KdaDims kd = kda_dims(c);
    const MlaDims md = mla_dims(c);
    w.blocks.resize(size_t(c.n_layers()));
    for (int l = 0; l < c.n_layers(); ++l) {
        BlockWeights& b = w.blocks[size_t(l)];
        b.kind = c.layers[size_t(l)];
        b.attn_norm = norm_weight(tensor_rng(seed, l, 1), D);
        b.mlp_norm = norm_weight(tensor_rng(seed, l, 2), D);
        if (b.kind == LayerKind::linear)
            make_kda(b.kda, kd, seed, l, out_gain);
        else
            make_mla(b.mla, md, seed, l, out_gain);
        b.mlp.gate = matrix(tensor_rng(seed, l, 3), D, c.mlp_hidden);
        b.mlp.up = matrix(tensor_rng(seed, l, 4), D, c.mlp_hidden);
        b.mlp.down = matrix(tensor_rng(seed, l, 5), c.mlp_hidden, D, out_gain);
        if (c.attn_res_block > 0) {
            b.attn_res = attn_res_weights(seed, l, 6, D);
            b.mlp_res = attn_res_weights(seed, l, 8, D);
        }
    }
    if (c.attn_res_block > 0) w.output_res = attn_res_weights(seed, -1, 4, D);
    w.final_norm = norm_weight(tensor_rng(seed, -1, 2), D);
    w.lm_head = matrix(tensor_rng(seed, -1, 3), D, c.vocab);
    return w;
}

}  // namespace k3::model
