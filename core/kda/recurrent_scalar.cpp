// Scalar fp32 recurrent KDA: the literal five steps of reference/kda.md §2, one head at a time.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#include "core/base/fmath.h"
#include "core/kda/novec.h"
#include "core/kda/recurrent.h"

namespace k3::kda {

namespace {

// One head. Sh [K][V]; kh, qh [K]; gh [K]; vh [V]; oh [V] or null.
void step_head(float* Sh, int K, int V, const float* qh, const float* kh, const float* vh, const float* gh,
               float b, float scale, float* oh) {
    float p[kMaxHeadDim], u[kMaxHeadDim];
    for (int i = 0; i < K; ++i) {  // 1. decay acts on the key rows
        const float a = exp_f32(gh[i]);
        float* row = Sh + size_t(i) * V;
        K3_SCALAR_LOOP for (int j = 0; j < V; ++j) row[j] = a * row[j];
    }
    K3_SCALAR_LOOP for (int j = 0; j < V; ++j) p[j] = 0.0f;  // 2. predict from the decayed state
    for (int i = 0; i < K; ++i) {
        const float* row = Sh + size_t(i) * V;
        K3_SCALAR_LOOP for (int j = 0; j < V; ++j) p[j] = p[j] + kh[i] * row[j];
    }
    K3_SCALAR_LOOP for (int j = 0; j < V; ++j) u[j] = b * (vh[j] - p[j]);  // 3. delta, scaled by beta
    for (int i = 0; i < K; ++i) {                                          // 4. rank-1 write
        float* row = Sh + size_t(i) * V;
        K3_SCALAR_LOOP for (int j = 0; j < V; ++j) row[j] = row[j] + kh[i] * u[j];
    }
    if (!oh) return;
    // 5. read with the updated state, summed over the rows bottom up (i = K-1 ... 0): the order of the SIMD
    //    kernel, whose second pass over a column block runs upwards for cache reuse (recurrent_simd.cpp).
    K3_SCALAR_LOOP for (int j = 0; j < V; ++j) oh[j] = 0.0f;
    for (int i = K - 1; i >= 0; --i) {
        const float qs = scale * qh[i];
        const float* row = Sh + size_t(i) * V;
        K3_SCALAR_LOOP for (int j = 0; j < V; ++j) oh[j] = oh[j] + qs * row[j];
    }
}

}  // namespace

void recurrent_step_scalar(const Shape& s, float* S, const float* q, const float* k, const float* v,
                           const float* g, const float* beta, float scale, float* o) {
    const int grp = s.group();
    for (int h = 0; h < s.HV; ++h)
        step_head(S + size_t(h) * s.head_state(), s.K, s.V, q + size_t(h / grp) * s.K,
                  k + size_t(h / grp) * s.K, v + size_t(h) * s.V, g + size_t(h) * s.K, beta[h], scale,
                  o ? o + size_t(h) * s.V : nullptr);
}

void recurrent_scalar(const Shape& s, float* S, const Tokens& x, float scale, float* o) {
    const int grp = s.group();
    for (int h = 0; h < s.HV; ++h)
        for (int t = 0; t < x.T; ++t) {
            const size_t tt = size_t(t);
            step_head(S + size_t(h) * s.head_state(), s.K, s.V, x.q + tt * s.qk_row() + size_t(h / grp) * s.K,
                      x.k + tt * s.qk_row() + size_t(h / grp) * s.K, x.v + tt * s.v_row() + size_t(h) * s.V,
                      x.g + tt * s.g_row() + size_t(h) * s.K, x.beta[tt * size_t(s.HV) + size_t(h)], scale,
                      o ? o + tt * s.v_row() + size_t(h) * s.V : nullptr);
        }
}

void recurrent_step(const Shape& s, float* S, const float* q, const float* k, const float* v, const float* g,
                    const float* beta, float scale, float* o, Impl impl) {
#if K3_FMA
    if (impl == Impl::fma) return recurrent_step_fma(s, S, q, k, v, g, beta, scale, o);
#endif
#if K3_SIMD
    if (impl != Impl::scalar) return recurrent_step_simd(s, S, q, k, v, g, beta, scale, o);
#endif
    recurrent_step_scalar(s, S, q, k, v, g, beta, scale, o);
}

void recurrent(const Shape& s, float* S, const Tokens& x, float scale, float* o, Impl impl) {
#if K3_FMA
    if (impl == Impl::fma) return recurrent_fma(s, S, x, scale, o);
#endif
#if K3_SIMD
    if (impl != Impl::scalar) return recurrent_simd(s, S, x, scale, o);
#endif
    recurrent_scalar(s, S, x, scale, o);
}

}  // namespace k3::kda
