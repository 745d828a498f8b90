// The projection kernel of the runnable model: y = x W for a batch of token rows.
//
//   x  [rows][in]   fp32, row stride ldx (>= in)
//   W  [in][out]    bf16 weights (the dtype of the real model's weights), stored as pairs of rows:
//                   word p * out + o holds W[2p][o] in its low 16 bits and W[2p+1][o] in its high 16
//                   bits (0 when 2p + 1 == in). Widening bf16 to fp32 is exact (a shift), so the result
//                   is the fp32 product with the bf16-valued weights; storing 2 bytes per weight halves
//                   what a decode step streams from memory, which is what bounds its speed.
//   y  [rows][out]  fp32, row stride ldy (>= out), overwritten
//
// Axpy form: y[r][o] = (((0 + x[r][0] W[0][o]) + x[r][1] W[1][o]) + ...) + x[r][in-1] W[in-1][o], products
// then adds (no FMA), i ascending. Each output element is one lane's private sum, so the scalar kernel
// and the xsimd kernel give the same bits at any vector width, and a row's result never depends on
// the other rows of the batch: prefill(A) then prefill(B) projects exactly like prefill(A ++ B).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/kda/layout.h"

namespace k3::model {

using kda::Impl;

struct Weights16 {
    const uint32_t* pairs = nullptr;  // [(in + 1) / 2][out]
    int in = 0, out = 0;
};

// Weights are stored as bf16 pairs (core/base/bf16.h rounds them); these read one half of a pair.
inline float bf16_bits_to_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
inline float bf16_lo(uint32_t w) { return bf16_bits_to_float(w << 16); }          // row 2p
inline float bf16_hi(uint32_t w) { return bf16_bits_to_float(w & 0xffff0000u); }  // row 2p + 1

void matmul(const float* x, int rows, int ldx, const Weights16& W, float* y, int ldy, Impl impl = Impl::simd);

void matmul_scalar(const float* x, int rows, int ldx, const Weights16& W, float* y, int ldy);
#if K3_SIMD
void matmul_simd(const float* x, int rows, int ldx, const Weights16& W, float* y, int ldy);
#endif

}  // namespace k3::model
