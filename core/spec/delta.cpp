#include "core/spec/delta.h"

#include "core/base/fmath.h"

namespace k3::spec {

namespace {

// One head: decay rows by exp(g), then add k u^T. Sh [K][V].
inline void decay_write(float* Sh, int K, int V, const float* kh, const float* gh, const float* u) {
    for (int i = 0; i < K; ++i) {
        const float a = exp_f32(gh[i]);
        float* row = Sh + size_t(i) * V;
        for (int j = 0; j < V; ++j) row[j] = a * row[j];
    }
    for (int i = 0; i < K; ++i) {
        const float ki = kh[i];
        float* row = Sh + size_t(i) * V;
        for (int j = 0; j < V; ++j) row[j] = row[j] + ki * u[j];
    }
}

}  // namespace

void delta_record(const kda::Shape& s, float* S, const float* k, const float* v, const float* g,
                  const float* beta, int T, float* delta) {
    const int K = s.K, V = s.V, grp = s.group();
    float p[kda::kMaxHeadDim];
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < s.HV; ++h) {
            float* Sh = S + size_t(h) * s.head_state();
            const float* kh = k + size_t(t) * s.qk_row() + size_t(h / grp) * K;
            const float* gh = g + size_t(t) * s.g_row() + size_t(h) * K;
            const float* vh = v + size_t(t) * s.v_row() + size_t(h) * V;
            float* u = delta + size_t(t) * s.v_row() + size_t(h) * V;
            const float b = beta[size_t(t) * s.HV + size_t(h)];
            for (int i = 0; i < K; ++i) {  // decay, as the kernel does before predicting
                const float a = exp_f32(gh[i]);
                float* row = Sh + size_t(i) * V;
                for (int j = 0; j < V; ++j) row[j] = a * row[j];
            }
            for (int j = 0; j < V; ++j) p[j] = 0.0f;
            for (int i = 0; i < K; ++i) {
                const float ki = kh[i];
                const float* row = Sh + size_t(i) * V;
                for (int j = 0; j < V; ++j) p[j] = p[j] + ki * row[j];
            }
            for (int j = 0; j < V; ++j) u[j] = b * (vh[j] - p[j]);
            for (int i = 0; i < K; ++i) {
                const float ki = kh[i];
                float* row = Sh + size_t(i) * V;
                for (int j = 0; j < V; ++j) row[j] = row[j] + ki * u[j];
            }
        }
}

void delta_replay(const kda::Shape& s, float* S, const float* k, const float* delta, const float* g, int T,
                  size_t stride) {
    const int K = s.K, V = s.V, grp = s.group();
    for (int t = 0; t < T; ++t) {
        const size_t r = size_t(t) * stride;
        for (int h = 0; h < s.HV; ++h)
            decay_write(S + size_t(h) * s.head_state(), K, V, k + r + size_t(h / grp) * K,
                        g + r + size_t(h) * K, delta + r + size_t(h) * V);
    }
}

}  // namespace k3::spec
