#include "core/model/norm.h"

#include <cmath>
#include <cstddef>

#include "core/base/fmath.h"

namespace k3::model {

namespace {

float inv_rms(const float* x, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; ++i) ss = ss + x[i] * x[i];
    return 1.0f / std::sqrt(ss / float(n) + eps);
}

}  // namespace

void rmsnorm_rows(const float* x, int rows, int n, int ldx, const float* w, float eps, float* y, int ldy) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = x + size_t(r) * ldx;
        float* yr = y + size_t(r) * ldy;
        const float inv = inv_rms(xr, n, eps);
        for (int i = 0; i < n; ++i) yr[i] = (xr[i] * inv) * w[i];
    }
}

void head_norm_gate(const float* o, const float* gate, int rows, int heads, int V, const float* w, float eps,
                    float* y) {
    for (size_t e = 0; e < size_t(rows) * size_t(heads); ++e) {
        const float* oh = o + e * V;
        const float* gh = gate + e * V;
        float* yh = y + e * V;
        const float inv = inv_rms(oh, V, eps);
        for (int j = 0; j < V; ++j) yh[j] = ((oh[j] * inv) * w[j]) * sigmoid_f32(gh[j]);
    }
}

}  // namespace k3::model
