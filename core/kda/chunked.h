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

}  // namespace k3::kda
