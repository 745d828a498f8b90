#include "core/kda/gates.h"

#include <cmath>

#include "core/base/fmath.h"

namespace k3::kda {

void l2norm_rows(float* x, int rows, int n, float eps) {
    for (int r = 0; r < rows; ++r) {
        float* row = x + size_t(r) * n;
        float ss = 0.0f;
        for (int i = 0; i < n; ++i) ss = ss + row[i] * row[i];
        const float norm = std::sqrt(ss + eps);
        for (int i = 0; i < n; ++i) row[i] = row[i] / norm;
    }
}

void kda_gate(const float* z, const float* dt_bias, const float* A_log, int HV, int K, float* g) {
    for (int h = 0; h < HV; ++h) {
        const float a = exp_f32(A_log[h]);
        for (int i = 0; i < K; ++i) {
            const size_t e = size_t(h) * K + i;
            g[e] = -(a * softplus_f32(z[e] + dt_bias[e]));
        }
    }
}

void kda_gate_bounded(const float* z, const float* dt_bias, const float* A_log, int HV, int K,
                      float lower_bound, float* g) {
    for (int h = 0; h < HV; ++h) {
        const float a = exp_f32(A_log[h]);
        for (int i = 0; i < K; ++i) {
            const size_t e = size_t(h) * K + i;
            g[e] = lower_bound * sigmoid_f32(a * (z[e] + dt_bias[e]));
        }
    }
}

void beta_sigmoid(const float* logit, int n, float* beta) {
    for (int e = 0; e < n; ++e) beta[e] = sigmoid_f32(logit[e]);
}

}  // namespace k3::kda
