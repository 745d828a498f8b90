// Scalar reference of matmul.h: the row of y is accumulated in place, one input index at a time, so
// every element sums over i in ascending order exactly as the xsimd kernel's lanes do.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")  // "scalar" means one float per instruction (core/kda/novec.h)
#endif
#include "core/kda/novec.h"
#include "core/model/matmul.h"

namespace k3::model {

void matmul_scalar(const float* x, int rows, int ldx, const Weights16& W, float* y, int ldy) {
    const int in = W.in, out = W.out;
    for (int r = 0; r < rows; ++r) {
        const float* xr = x + size_t(r) * ldx;
        float* yr = y + size_t(r) * ldy;
        K3_SCALAR_LOOP
        for (int o = 0; o < out; ++o) yr[o] = 0.0f;
        for (int i = 0; i < in; ++i) {
            const float a = xr[i];
            const uint32_t* wp = W.pairs + size_t(i / 2) * out;
            if (i % 2 == 0) {
                K3_SCALAR_LOOP
                for (int o = 0; o < out; ++o) yr[o] = yr[o] + a * bf16_lo(wp[o]);
            } else {
                K3_SCALAR_LOOP
                for (int o = 0; o < out; ++o) yr[o] = yr[o] + a * bf16_hi(wp[o]);
            }
        }
    }
}

void matmul(const float* x, int rows, int ldx, const Weights16& W, float* y, int ldy, Impl impl) {
#if K3_SIMD
    if (impl == Impl::simd) return matmul_simd(x, rows, ldx, W, y, ldy);
#endif
    matmul_scalar(x, rows, ldx, W, y, ldy);
}

}  // namespace k3::model
