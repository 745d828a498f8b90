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

// One head of the closed form: row i of S is P_i S0_i + sum_t (P_{i,>t} k_t[i]) c_t, t from T - 1 down.
template <class R>
void closed_form_head(R* Sh, int K, int V, const float* k, size_t k_row, const float* c, size_t c_row,
                      const float* g, size_t g_row, int T, int skip) {
    R acc[kda::kMaxHeadDim];
    for (int i = 0; i < K; ++i) {
        R P = 1;
        for (int j = 0; j < V; ++j) acc[j] = 0;
        for (int t = T - 1; t >= 0; --t) {
            const R coef = P * R(k[size_t(t) * k_row + size_t(i)]);
            const float* ct = c + size_t(t) * c_row;
            for (int j = 0; j < V; ++j) acc[j] = acc[j] + coef * R(ct[j]);
            if (t != skip) P = P * k3exp(R(g[size_t(t) * g_row + size_t(i)]));
        }
        R* row = Sh + size_t(i) * V;
        for (int j = 0; j < V; ++j) row[j] = P * row[j] + acc[j];
    }
}

template <class R>
void closed_form(const kda::Shape& s, R* S, const float* k, const float* c, const float* g, int T, int skip) {
    if (T <= 0) return;  // nothing accepted: S stays the checkpoint (and the record buffers may be empty)
    for (int h = 0; h < s.HV; ++h)
        closed_form_head(S + size_t(h) * s.head_state(), s.K, s.V, k + size_t(h / s.group()) * s.K,
                         s.qk_row(), c + size_t(h) * s.V, s.v_row(), g + size_t(h) * s.K, s.g_row(), T, skip);
}

}  // namespace

void closed_form_fold(const kda::Shape& s, float* S, const float* k, const float* c, const float* g, int T,
                      int skip_decay) {
    closed_form(s, S, k, c, g, T, skip_decay);
}

void closed_form_fold(const kda::Shape& s, double* S, const float* k, const float* c, const float* g, int T,
                      int skip_decay) {
    closed_form(s, S, k, c, g, T, skip_decay);
}

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
