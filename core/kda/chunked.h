// fp32 chunked (WY) KDA prefill, reference/kda.md §3 (algorithm in chunk_driver.h).
// Shapes and layouts: layout.h. Scalar and xsimd versions give the same bits.
#pragma once

#include "core/kda/layout.h"

namespace k3::kda {

// T tokens in chunks of C >= 1 (C = 1 is the recurrence; any C is valid), in place on S [HV][K][V];
// o [T][HV][V] (may be null). Chunks restart at the start of each call, so prefill(A) then prefill(B)
// with |A| a multiple of C gives the same bits as prefill(A ++ B). Stable for unbounded gates: the
// decays enter only as running products of alpha = exp(g) <= 1. Cost per (head, chunk of n tokens):
// n^2 (K + (K + V) / 2) for the pair matrices and the forward substitution, then 3 n K V for the
// state pass (W S, Qg S, KdT D), plus n^2 V / 2 for Aqk D. C is clamped to [1, kMaxChunk].
void chunked(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, Impl impl = Impl::simd);

// Floats of scratch one call of `chunked` (either implementation) allocates for shape s and chunk C.
size_t chunked_scratch_floats(const Shape& s, int C);

void chunked_scalar(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o);
#if K3_SIMD
void chunked_simd(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o);
#endif
// The FMA variant (Impl::fma): the same primitives with every multiply-add fused. NOT bit-exact
// (recurrent.h says why it exists).
#if K3_FMA
void chunked_fma(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o);
void chunked_part_fma(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, size_t first,
                      size_t count);
#endif

// The same prefill in parts, for callers that must stop in between (the page's time-boxed runs). Its
// work units are (chunk, value head) pairs, chunk-major: unit u is head u % HV of chunk u / HV; a call
// runs units [first, first + count). Calls that run units 0 ... chunked_units(s, x.T, C) - 1 in order,
// on the same S, x and o, give chunked()'s bits, however the units are grouped into calls.
size_t chunked_units(const Shape& s, int T, int C);
void chunked_part(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, size_t first,
                  size_t count, Impl impl = Impl::simd);
void chunked_part_scalar(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o,
                         size_t first, size_t count);
#if K3_SIMD
void chunked_part_simd(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, size_t first,
                       size_t count);
#endif

}  // namespace k3::kda
