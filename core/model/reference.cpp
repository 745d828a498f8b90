#include "core/model/reference.h"

#include <cmath>
#include <cstring>

#include "core/base/fmath.h"
#include "core/kda/reference.h"
#include "core/model/attn_res.h"
#include "core/model/model.h"

namespace k3::model::ref {

namespace {

using Vec = std::vector<double>;

// y [T][out] = x [T][in] W, W bf16-valued [in][out]; each weight row widened once per call.
Vec matmul(const double* x, int T, const Matrix& m) {
    Vec y(size_t(T) * m.out, 0.0), w(size_t(m.out));
    for (int i = 0; i < m.in; ++i) {
        for (int o = 0; o < m.out; ++o) w[size_t(o)] = double(m.at(i, o));
        for (int t = 0; t < T; ++t) {
            const double a = x[size_t(t) * m.in + i];
            double* yt = y.data() + size_t(t) * m.out;
            for (int o = 0; o < m.out; ++o) yt[o] += a * w[size_t(o)];
        }
    }
    return y;
}

// In place: each row of n (stride ld) times 1/sqrt(mean^2 + eps) times w.
void rmsnorm(double* x, int rows, int n, int ld, const FloatBuf& w, double eps) {
    for (int r = 0; r < rows; ++r) {
        double* xr = x + size_t(r) * ld;
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += xr[i] * xr[i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) xr[i] = xr[i] * inv * double(w[size_t(i)]);
    }
}

// Causal depthwise conv with the window, then SiLU. x [T][D] raw rows -> y [T][D].
Vec conv_silu(const double* x, int T, int D, int W, const FloatBuf& w, std::vector<double>& win) {
    Vec y(size_t(T) * D);
    for (int t = 0; t < T; ++t) {
        for (int c = 0; c < D; ++c) {
            double acc = 0;
            for (int i = 0; i < W - 1; ++i) acc += double(w[size_t(c) * W + i]) * win[size_t(i) * D + c];
            acc += double(w[size_t(c) * W + W - 1]) * x[size_t(t) * D + c];
            y[size_t(t) * D + c] = silu_f64(acc);
        }
        if (W > 1) {
            std::memmove(win.data(), win.data() + D, sizeof(double) * size_t(W - 2) * D);
            std::memcpy(win.data() + size_t(W - 2) * D, x + size_t(t) * D, sizeof(double) * D);
        }
    }
    return y;
}

void l2norm(double* x, int rows, int n) {
    for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += x[size_t(r) * n + i] * x[size_t(r) * n + i];
        const double inv = 1.0 / std::sqrt(ss + 1e-6);
        for (int i = 0; i < n; ++i) x[size_t(r) * n + i] *= inv;
    }
}

}  // namespace

KdaStateF64::KdaStateF64(const KdaDims& d)
    : S(d.state_floats(), 0.0),
      win_q(size_t(d.window_rows()) * d.qk_channels(), 0.0),
      win_k(size_t(d.window_rows()) * d.qk_channels(), 0.0),
      win_v(size_t(d.window_rows()) * d.v_channels(), 0.0) {}

KdaStateF64 KdaStateF64::from(const KdaDims& d, const KdaState& st) {
    KdaStateF64 r(d);
    for (size_t e = 0; e < r.S.size(); ++e) r.S[e] = st.S[e];
    for (size_t e = 0; e < r.win_q.size(); ++e) r.win_q[e] = st.win_q[e], r.win_k[e] = st.win_k[e];
    for (size_t e = 0; e < r.win_v.size(); ++e) r.win_v[e] = st.win_v[e];
    return r;
}

void kda_layer(const KdaWeights& w, const KdaDims& d, KdaStateF64& st, const double* x, int T, double* out) {
    if (T == 0) return;
    const int H = d.s.H, HV = d.s.HV, K = d.s.K, V = d.s.V, W = d.conv_width;
    const int QK = d.qk_channels(), VC = d.v_channels(), grp = HV / H;
    // 1-2. projections, conv + SiLU
    const Vec rq = matmul(x, T, w.q), rk = matmul(x, T, w.k), rv = matmul(x, T, w.v);
    Vec q = conv_silu(rq.data(), T, QK, W, w.conv_q, st.win_q);
    Vec k = conv_silu(rk.data(), T, QK, W, w.conv_k, st.win_k);
    const Vec v = conv_silu(rv.data(), T, VC, W, w.conv_v, st.win_v);
    // 3. L2 norm per head (the scale K^-0.5 is applied when reading)
    l2norm(q.data(), T * H, K);
    l2norm(k.data(), T * H, K);
    // 4-5. gate and beta
    const Vec z = matmul(matmul(x, T, w.f_a).data(), T, w.f_b);
    const Vec bl = matmul(x, T, w.b);
    const Vec go = d.full_rank_gate ? matmul(x, T, w.g_proj) : matmul(matmul(x, T, w.g_a).data(), T, w.g_b);
    const double scale = 1.0 / std::sqrt(double(K));
    Vec o(size_t(T) * VC), y(size_t(T) * VC);
    Vec p(static_cast<size_t>(V)), u(static_cast<size_t>(V));
    for (int t = 0; t < T; ++t) {
        for (int h = 0; h < HV; ++h) {
            const double* qh = q.data() + size_t(t) * QK + size_t(h / grp) * K;
            const double* kh = k.data() + size_t(t) * QK + size_t(h / grp) * K;
            const double* vh = v.data() + size_t(t) * VC + size_t(h) * V;
            const double beta = sigmoid_f64(bl[size_t(t) * HV + h]);
            double* S = st.S.data() + size_t(h) * K * V;
            // 6. decay rows, predict, delta, write, read (reference/kda.md §2)
            for (int i = 0; i < K; ++i) {
                const size_t e = size_t(h) * K + i;
                const double g = kda::ref::gate(z[size_t(t) * HV * K + e], double(w.dt_bias[e]),
                                                double(w.A_log[size_t(h)]), double(d.gate_lower_bound));
                const double a = exp_f64(g);
                for (int j = 0; j < V; ++j) S[size_t(i) * V + j] *= a;
            }
            for (int j = 0; j < V; ++j) {
                p[size_t(j)] = 0;
                for (int i = 0; i < K; ++i) p[size_t(j)] += kh[i] * S[size_t(i) * V + j];
                u[size_t(j)] = beta * (vh[j] - p[size_t(j)]);
            }
            for (int i = 0; i < K; ++i)
                for (int j = 0; j < V; ++j) S[size_t(i) * V + j] += kh[i] * u[size_t(j)];
            double* oh = o.data() + size_t(t) * VC + size_t(h) * V;
            for (int j = 0; j < V; ++j) {
                double acc = 0;
                for (int i = 0; i < K; ++i) acc += scale * qh[i] * S[size_t(i) * V + j];
                oh[j] = acc;
            }
            // 8. per-head RMSNorm, o_norm weight, sigmoid output gate
            double ss = 0;
            for (int j = 0; j < V; ++j) ss += oh[j] * oh[j];
            const double inv = 1.0 / std::sqrt(ss / V + 1e-5);
            for (int j = 0; j < V; ++j)
                y[size_t(t) * VC + size_t(h) * V + j] = oh[j] * inv * double(w.o_norm[size_t(j)]) *
                                                        sigmoid_f64(go[size_t(t) * VC + size_t(h) * V + j]);
        }
    }
    // 9. output projection
    const Vec r = matmul(y.data(), T, w.o);
    std::memcpy(out, r.data(), sizeof(double) * r.size());
}

ModelStateF64::ModelStateF64(const Model& m) {
    kda.assign(size_t(m.config().n_linear()), KdaStateF64(m.kda()));
    keys.resize(size_t(m.config().n_attention()));
    values.resize(size_t(m.config().n_attention()));
}

namespace {

// Appends the new tokens' decompressed keys/values, then attends causally. x [T][d] -> out [T][d].
void mla_layer(const MlaWeights& w, const MlaDims& d, Vec& keys, Vec& values, uint64_t pos, const double* x,
               int T, double* out) {
    const int H = d.heads, qk = d.nope + d.rope, L = d.latent, VD = d.v;
    const Vec q = matmul(x, T, w.q);
    Vec kv = matmul(x, T, w.kv_a);
    rmsnorm(kv.data(), T, L, d.cache_row(), w.kv_norm, 1e-5);
    for (int t = 0; t < T; ++t) {
        const double* c = kv.data() + size_t(t) * d.cache_row();
        for (int h = 0; h < H; ++h) {
            for (int n = 0; n < d.nope; ++n) {
                double acc = 0;
                for (int l = 0; l < L; ++l) acc += double(w.w_uk[size_t(h)].at(n, l)) * c[l];
                keys.push_back(acc);
            }
            for (int r = 0; r < d.rope; ++r) keys.push_back(c[L + r]);  // k_pe, shared by all heads
        }
        for (int h = 0; h < H; ++h)
            for (int j = 0; j < VD; ++j) {
                double acc = 0;
                for (int l = 0; l < L; ++l) acc += c[l] * double(w.w_uv[size_t(h)].at(l, j));
                values.push_back(acc);
            }
    }
    const double scale = 1.0 / std::sqrt(double(qk));
    Vec o(size_t(T) * H * VD, 0.0);
    for (int t = 0; t < T; ++t) {
        const uint64_t n = pos + uint64_t(t) + 1;
        for (int h = 0; h < H; ++h) {
            const double* qh = q.data() + (size_t(t) * H + h) * qk;
            Vec s(n);
            double m = -1e300;
            for (uint64_t j = 0; j < n; ++j) {
                const double* kj = keys.data() + (size_t(j) * H + h) * qk;
                double acc = 0;
                for (int e = 0; e < qk; ++e) acc += qh[e] * kj[e];
                s[j] = acc * scale;
                m = std::max(m, s[j]);
            }
            double z = 0;
            for (uint64_t j = 0; j < n; ++j) z += (s[j] = exp_f64(s[j] - m));
            double* oh = o.data() + (size_t(t) * H + h) * VD;
            for (uint64_t j = 0; j < n; ++j)
                for (int e = 0; e < VD; ++e) oh[e] += s[j] / z * values[(size_t(j) * H + h) * VD + e];
        }
    }
    if (d.output_gate) {
        const Vec g = matmul(x, T, w.g);
        for (size_t e = 0; e < o.size(); ++e) o[e] *= sigmoid_f64(g[e]);
    }
    const Vec r = matmul(o.data(), T, w.o);
    std::memcpy(out, r.data(), sizeof(double) * r.size());
}

// attn_res.h's mix in double: sources blocks[t][0..n) then prefix[t].
Vec attn_res_mix(const std::vector<Vec>& blocks, int n, const Vec& prefix, int T, int D,
                 const AttnResWeights& w) {
    if (n == 0) return prefix;
    Vec out(size_t(T) * D, 0.0), p(size_t(n) + 1);
    for (int t = 0; t < T; ++t) {
        auto source = [&](int s) { return (s < n ? blocks[size_t(s)] : prefix).data() + size_t(t) * D; };
        double m = -1e300, z = 0;
        for (int s = 0; s <= n; ++s) {
            const double* v = source(s);
            double ss = 0, dot = 0;
            for (int i = 0; i < D; ++i)
                ss += v[i] * v[i], dot += v[i] * double(w.norm[size_t(i)]) * w.proj[size_t(i)];
            p[size_t(s)] = dot / std::sqrt(ss / D + 1e-5);
            m = std::max(m, p[size_t(s)]);
        }
        for (int s = 0; s <= n; ++s) z += (p[size_t(s)] = exp_f64(p[size_t(s)] - m));
        for (int s = 0; s <= n; ++s)
            for (int i = 0; i < D; ++i) out[size_t(t) * D + i] += p[size_t(s)] / z * source(s)[i];
    }
    return out;
}

// The MLP on the normed input xn: SwiGLU or SiTU.
Vec mlp(const MlpWeights& w, const ModelConfig& c, const Vec& xn, int T) {
    Vec ga = matmul(xn.data(), T, w.gate);
    const Vec up = matmul(xn.data(), T, w.up);
    for (size_t e = 0; e < ga.size(); ++e)
        ga[e] = c.activation == Activation::situ ? situ_f64(ga[e], up[e], c.situ_beta, c.situ_linear_beta)
                                                 : silu_f64(ga[e]) * up[e];
    return matmul(ga.data(), T, w.down);
}

}  // namespace

namespace {

// One layer's attention sub-layer: xn -> out.
void mixer(const Model& m, ModelStateF64& st, int l, const Vec& xn, int T, Vec& out) {
    const BlockWeights& b = m.weights().blocks[size_t(l)];
    if (b.kind == LayerKind::linear) {
        kda_layer(b.kda, m.kda(), st.kda[size_t(m.linear_index(l))], xn.data(), T, out.data());
    } else {
        const int a = m.attention_index(l);
        mla_layer(b.mla, m.mla(), st.keys[size_t(a)], st.values[size_t(a)], st.position, xn.data(), T,
                  out.data());
    }
}

// The layers with attention residuals (attn_res.h); h: the embeddings in, the mixed output out.
void layers_attn_res(const Model& m, ModelStateF64& st, Vec& h, int T) {
    const ModelConfig& c = m.config();
    const int D = c.d_model, B = c.attn_res_block;
    std::vector<Vec> blocks;
    Vec out(h.size()), xn;
    for (int l = 0; l < c.n_layers(); ++l) {
        const BlockWeights& b = m.weights().blocks[size_t(l)];
        const bool seal = l % B == 0;
        if (seal) blocks.push_back(h);
        const int n = attn_res_blocks_before(l, B);
        xn = attn_res_mix(blocks, n, h, T, D, b.attn_res);
        rmsnorm(xn.data(), T, D, D, b.attn_norm, 1e-5);
        mixer(m, st, l, xn, T, out);
        for (size_t e = 0; e < h.size(); ++e) h[e] = seal ? out[e] : h[e] + out[e];
        xn = attn_res_mix(blocks, n + (seal ? 1 : 0), h, T, D, b.mlp_res);
        rmsnorm(xn.data(), T, D, D, b.mlp_norm, 1e-5);
        const Vec dn = mlp(b.mlp, c, xn, T);
        for (size_t e = 0; e < h.size(); ++e) h[e] += dn[e];
    }
    h = attn_res_mix(blocks, int(blocks.size()), h, T, D, m.weights().output_res);
}

}  // namespace

void model_forward(const Model& m, ModelStateF64& st, std::span<const int32_t> tokens,
                   std::vector<double>* logits) {
    const ModelConfig& c = m.config();
    const ModelWeights& W = m.weights();
    const int T = int(tokens.size()), D = c.d_model;
    if (logits) logits->clear();
    if (T == 0) return;
    Vec h(size_t(T) * D), xn, out(size_t(T) * D);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < D; ++i) h[size_t(t) * D + i] = W.embed[size_t(tokens[size_t(t)]) * D + i];
    if (c.attn_res_block > 0) layers_attn_res(m, st, h, T);
    for (int l = 0; c.attn_res_block == 0 && l < c.n_layers(); ++l) {
        const BlockWeights& b = W.blocks[size_t(l)];
        xn = h;
        rmsnorm(xn.data(), T, D, D, b.attn_norm, 1e-5);
        mixer(m, st, l, xn, T, out);
        for (size_t e = 0; e < h.size(); ++e) h[e] += out[e];
        xn = h;
        rmsnorm(xn.data(), T, D, D, b.mlp_norm, 1e-5);
        const Vec dn = mlp(b.mlp, c, xn, T);
        for (size_t e = 0; e < h.size(); ++e) h[e] += dn[e];
    }
    st.position += uint64_t(T);
    if (!logits) return;
    rmsnorm(h.data(), T, D, D, W.final_norm, 1e-5);
    *logits = matmul(h.data(), T, W.lm_head);
}

}  // namespace k3::model::ref
