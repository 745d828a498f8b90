#include "core/model/mla_layer.h"

#include <cstring>

#include "core/base/fmath.h"
#include "core/model/matmul.h"
#include "core/model/norm.h"
#include "core/model/vec_kernels.h"

namespace k3::model {

void MlaActs::resize(const MlaDims& d, int T_) {
    T = T_;
    const size_t t = size_t(T_), H = size_t(d.heads);
    auto grow = [](FloatBuf& b, size_t n) {
        if (b.size() < n) b.resize(n);
    };
    grow(q, t * size_t(d.q_row()));
    grow(kv, t * size_t(d.cache_row()));
    grow(qc, t * H * size_t(d.cache_row()));
    grow(ctx, t * H * size_t(d.latent));
    grow(ov, t * H * size_t(d.v));
    if (d.output_gate) grow(gate, t * H * size_t(d.v));
}

void mla_project(const MlaWeights& w, const MlaDims& d, const float* x, int T, MlaActs& a, Impl impl) {
    const int D = d.d_model, row = d.cache_row();
    matmul(x, T, D, w.q.view(), a.q.data(), d.q_row(), impl);
    matmul(x, T, D, w.kv_a.view(), a.kv.data(), row, impl);
    rmsnorm_rows(a.kv.data(), T, d.latent, row, w.kv_norm.data(), kRmsEps, a.kv.data(), row);
    if (d.output_gate) matmul(x, T, D, w.g.view(), a.gate.data(), d.heads * d.v, impl);
}

void mla_append(const MlaDims& d, const KvView& kv, uint64_t pos, const MlaActs& a) {
    for (int t = 0; t < a.T; ++t)
        std::memcpy(kv.at(pos + uint64_t(t)), a.kv.data() + size_t(t) * d.cache_row(),
                    sizeof(float) * size_t(d.cache_row()));
}

void mla_absorb(const MlaWeights& w, const MlaDims& d, MlaActs& a, Impl impl) {
    const int qk = d.nope + d.rope, row = d.cache_row(), H = d.heads;
    for (int h = 0; h < H; ++h) {
        // qc_h[.., :latent] = q_nope_h W_uk_h  (all rows at once, strided into the [T][H][row] buffer)
        matmul(a.q.data() + size_t(h) * qk, a.T, H * qk, w.w_uk[size_t(h)].view(),
               a.qc.data() + size_t(h) * row, H * row, impl);
        for (int t = 0; t < a.T; ++t)
            std::memcpy(a.qc.data() + (size_t(t) * H + h) * row + d.latent,
                        a.q.data() + (size_t(t) * H + h) * qk + d.nope, sizeof(float) * size_t(d.rope));
    }
}

void mla_attend(const MlaDims& d, const KvView& kv, uint64_t pos, MlaActs& a, Impl impl) {
    const int H = d.heads, row = d.cache_row(), L = d.latent;
    for (int r = 0; r < a.T; ++r) {
        const uint64_t n = pos + uint64_t(r) + 1;  // causal: tokens [0, pos + r]
        if (a.scores.size() < size_t(H) * n) a.scores.resize(size_t(H) * n);
        float* s = a.scores.data();
        const float* qc = a.qc.data() + size_t(r) * H * row;
        for (uint64_t t = 0; t < n; ++t) {
            const float* c = kv.at(t);
            for (int h = 0; h < H; ++h)
                s[size_t(h) * n + t] = dot16(qc + size_t(h) * row, c, row, impl) * d.scale;
        }
        float sum[kMaxMlaHeads];  // H <= kMaxMlaHeads, checked when the model is made
        for (int h = 0; h < H; ++h) {
            float* sh = s + size_t(h) * n;
            float m = sh[0];
            for (uint64_t t = 1; t < n; ++t) m = sh[t] > m ? sh[t] : m;
            float z = 0.0f;
            for (uint64_t t = 0; t < n; ++t) {
                sh[t] = exp_f32(sh[t] - m);
                z = z + sh[t];
            }
            sum[h] = z;
        }
        float* ctx = a.ctx.data() + size_t(r) * H * L;
        std::memset(ctx, 0, sizeof(float) * size_t(H) * L);
        for (uint64_t t = 0; t < n; ++t) {
            const float* c = kv.at(t);
            for (int h = 0; h < H; ++h) axpy(s[size_t(h) * n + t], c, ctx + size_t(h) * L, L, impl);
        }
        for (int h = 0; h < H; ++h)
            for (int l = 0; l < L; ++l) ctx[size_t(h) * L + l] = ctx[size_t(h) * L + l] / sum[h];
    }
}

void mla_output(const MlaWeights& w, const MlaDims& d, MlaActs& a, float* out, Impl impl) {
    const int H = d.heads, L = d.latent, V = d.v;
    for (int h = 0; h < H; ++h)
        matmul(a.ctx.data() + size_t(h) * L, a.T, H * L, w.w_uv[size_t(h)].view(),
               a.ov.data() + size_t(h) * V, H * V, impl);
    if (d.output_gate)
        for (size_t e = 0; e < size_t(a.T) * size_t(H * V); ++e) a.ov[e] = a.ov[e] * sigmoid_f32(a.gate[e]);
    matmul(a.ov.data(), a.T, H * V, w.o.view(), out, d.d_model, impl);
}

void mla_forward(const MlaWeights& w, const MlaDims& d, const KvView& kv, uint64_t pos, const float* x, int T,
                 MlaActs& a, float* out, Impl impl) {
    a.resize(d, T);
    if (T == 0) return;
    mla_project(w, d, x, T, a, impl);
    mla_append(d, kv, pos, a);
    mla_absorb(w, d, a, impl);
    mla_attend(d, kv, pos, a, impl);
    mla_output(w, d, a, out, impl);
}

}  // namespace k3::model
