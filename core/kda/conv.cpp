#include "core/kda/conv.h"

#include <cstring>

#include "core/base/fmath.h"

namespace k3::kda {

void conv_step(int D, int W, float* window, const float* x, const float* w, float* y) {
    for (int c = 0; c < D; ++c) {
        const float* wc = w + size_t(c) * W;
        float acc = 0.0f;
        for (int i = 0; i < W - 1; ++i) acc = acc + wc[i] * window[size_t(i) * D + c];
        y[c] = acc + wc[W - 1] * x[c];
    }
    if (W < 2) return;
    std::memmove(window, window + D, sizeof(float) * size_t(W - 2) * D);
    std::memcpy(window + size_t(W - 2) * D, x, sizeof(float) * size_t(D));
}

void conv_sequence(int D, int W, float* window, const float* x, int T, const float* w, float* y) {
    for (int t = 0; t < T; ++t) conv_step(D, W, window, x + size_t(t) * D, w, y + size_t(t) * D);
}

void silu_inplace(float* x, size_t n) {
    for (size_t e = 0; e < n; ++e) x[e] = silu_f32(x[e]);
}

}  // namespace k3::kda
