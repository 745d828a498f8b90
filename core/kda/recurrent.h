// fp32 recurrent KDA (decode step and token-by-token sequences), reference/kda.md §2.
// Shapes and layouts: layout.h. Every function has a plain scalar version and an xsimd version that
// give the same bits; `Impl::simd` falls back to the scalar one when the build has no SIMD.
#pragma once

#include "core/kda/layout.h"

namespace k3::kda {

// One token, all value heads of a layer, in place on S.
//   S [HV][K][V] (in/out); q, k [H][K]; v [HV][V]; g [HV][K]; beta [HV]; o [HV][V] (out, may be null)
// Per head, in this order (FLA naive_recurrent_kda): S = Diag(exp g) S; p = S^T k; u = beta (v - p);
// S += k u^T; o = S^T (scale q). Sums run over the key rows i = 0 ... K-1 for p and K-1 ... 0 for o.
// Cost 3 K V multiply-adds (predict, write, read) + K V multiplies (decay) + K exp per head.
void recurrent_step(const Shape& s, float* S, const float* q, const float* k, const float* v, const float* g,
                    const float* beta, float scale, float* o, Impl impl = Impl::simd);

// T tokens in a row: x.q [T][H][K] ... o [T][HV][V] (may be null). Same bits as T calls of
// recurrent_step; faster, because the SIMD version runs blocks of tokens through one column block of a
// head's state at a time, so the block stays in L1 (recurrent_simd.cpp).
void recurrent(const Shape& s, float* S, const Tokens& x, float scale, float* o, Impl impl = Impl::simd);
inline constexpr int kRecurrentTokenBlock = 32;  // tokens per pass over a column block (SIMD)

// The two implementations, callable directly (tests, benchmarks).
void recurrent_step_scalar(const Shape& s, float* S, const float* q, const float* k, const float* v,
                           const float* g, const float* beta, float scale, float* o);
void recurrent_scalar(const Shape& s, float* S, const Tokens& x, float scale, float* o);
#if K3_SIMD
void recurrent_step_simd(const Shape& s, float* S, const float* q, const float* k, const float* v,
                         const float* g, const float* beta, float scale, float* o);
void recurrent_simd(const Shape& s, float* S, const Tokens& x, float scale, float* o);
#endif

// The FMA variants (fma_enabled(), device.h): the same steps with every multiply-add fused, so one
// rounding instead of two. NOT bit-exact: the bits differ from the kernels above and between AVX2 and
// AVX-512 builds. They exist to show what bit-exactness costs on this device; module 1 holds them to
// the same 1e-5 relative RMS of fp64 as the exact kernels. Nothing that claims bitwise results uses them.
#if K3_FMA
void recurrent_step_fma(const Shape& s, float* S, const float* q, const float* k, const float* v,
                        const float* g, const float* beta, float scale, float* o);
void recurrent_fma(const Shape& s, float* S, const Tokens& x, float scale, float* o);
#endif

}  // namespace k3::kda
