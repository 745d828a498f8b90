// Vector kernels of the attention layers: a dot product with a fixed reduction order and an axpy.
//
// dot16: a reduction along a contiguous dimension, which SIMD cannot do lane-privately. The sum is
// split into 16 partial sums (element i goes to partial i % 16, each partial summed in ascending i),
// combined by the fixed tree p[j] += p[j + 8], then + 4, + 2, + 1. Every vector width that divides 16
// (1 scalar, 4 WebAssembly/SSE, 8 AVX2, 16 AVX-512) computes exactly these partials, so the bits are
// the same in every build (docs/architecture.md, Numerics).
// axpy: y += a x, element-wise, trivially the same bits at any width.
// silu / silu_mul / situ_mul: x sigmoid(x) = x * (1 / (1 + exp(-x))) with the exp of core/base/fmath.h; the
// SIMD version uses core/kda/vexp.h, which gives exp_f32's bits in every lane.
#pragma once

#include <cstddef>

#include "core/kda/layout.h"

namespace k3::model {

using kda::Impl;

float dot16(const float* a, const float* b, int n, Impl impl = Impl::simd);
void axpy(float a, const float* x, float* y, int n, Impl impl = Impl::simd);

void silu(float* x, size_t n, Impl impl = Impl::simd);                      // x = silu(x)
void silu_mul(float* a, const float* b, size_t n, Impl impl = Impl::simd);  // a = silu(a) * b (SwiGLU)
// a = situ_f32(a, b, beta, beta_lin) (Kimi K3's SiTU; the SIMD tanh gives tanh_f32's bits per lane).
void situ_mul(float* a, const float* b, size_t n, float beta, float beta_lin, Impl impl = Impl::simd);

float dot16_scalar(const float* a, const float* b, int n);
void axpy_scalar(float a, const float* x, float* y, int n);
void silu_scalar(float* x, size_t n);
void silu_mul_scalar(float* a, const float* b, size_t n);
void situ_mul_scalar(float* a, const float* b, size_t n, float beta, float beta_lin);

}  // namespace k3::model
