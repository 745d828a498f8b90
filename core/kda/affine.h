// Affine segment maps (reference/kda.md §4): whatever the start state, a token segment ends in
//     S_out = M S_in + B      per value head, M [K][K], B [K][V]
// with M = A_T ... A_1, A_t = (I - beta_t k_t k_t^T) Diag(alpha_t), and B = the end state from S_in = 0.
// Composition (segment 1, then segment 2): (M2, B2) ∘ (M1, B1) = (M2 M1, M2 B1 + B2); identity (I, 0).
// Associative, not commutative: states of two segments never add (§4.3). Context parallelism builds on
// these: each rank computes the map of its slice from a zero state, the maps are folded in order, and
// the outputs are fixed up with the output sensitivities (§4.2 fix-up (b)).
// Layouts: M [HV][K][K], B [HV][K][V], row-major fp32. Scalar and xsimd versions give the same bits.
#pragma once

#include "core/kda/layout.h"

namespace k3::kda {

struct AffineMap {
    Shape shape;
    FloatBuf M;  // [HV][K][K]
    FloatBuf B;  // [HV][K][V]
};

AffineMap affine_identity(const Shape& s);

// The map of the T tokens of x, computed with the chunked algorithm (chunk size C): M by running the
// state pass on M itself (U = 0), B by running it from a zero state. Optional outputs:
//   o0 [T][HV][V]  outputs from S_in = 0 (the same bits as chunked() from a zero state);
//   eo [T][HV][K]  output sensitivities: for any S_in, O_t = o0_t + eo_t S_in per head.
// M, B: [HV][K][K], [HV][K][V] (overwritten).
void segment_map(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                 float* eo, Impl impl = Impl::simd);
AffineMap segment_map(const Shape& s, const Tokens& x, float scale, int C, Impl impl = Impl::simd);
// The same map in parts (see chunked_part): units are (value head, chunk) pairs, head-major, unit u
// being chunk u % chunks of head u / chunks, where a head's first unit starts its map at (I, 0).
// Calls that run units 0 ... segment_map_units(s, x.T, C) - 1 in order give segment_map()'s bits
// (T >= 1).
size_t segment_map_units(const Shape& s, int T, int C);
void segment_map_part(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                      float* eo, size_t first, size_t count, Impl impl = Impl::simd);

// (M, B) = (M2, B2) ∘ (M1, B1) = (M2 M1, M2 B1 + B2). Outputs must not alias inputs.
void affine_compose(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                    float* M, float* B, Impl impl = Impl::simd);
AffineMap compose(const AffineMap& second, const AffineMap& first, Impl impl = Impl::simd);

// S_out = M S_in + B, all heads. S_out must not alias S_in.
void affine_apply(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out,
                  Impl impl = Impl::simd);

// Outputs of a segment from start state S_in (fix-up (b) of §4.2): o_t = o0_t + eo_t S_in per head.
// o0 [T][HV][V], eo [T][HV][K], S_in [HV][K][V], o [T][HV][V] (may alias o0).
void affine_outputs(const Shape& s, int T, const float* o0, const float* eo, const float* S_in, float* o,
                    Impl impl = Impl::simd);

// Implementations (tests and benchmarks call them directly).
void segment_map_scalar(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                        float* eo);
void segment_map_part_scalar(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B,
                             float* o0, float* eo, size_t first, size_t count);
void affine_compose_scalar(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                           float* M, float* B);
void affine_apply_scalar(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out);
void affine_outputs_scalar(const Shape& s, int T, const float* o0, const float* eo, const float* S_in,
                           float* o);
#if K3_SIMD
void segment_map_simd(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                      float* eo);
void segment_map_part_simd(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                           float* eo, size_t first, size_t count);
void affine_compose_simd(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                         float* M, float* B);
void affine_apply_simd(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out);
void affine_outputs_simd(const Shape& s, int T, const float* o0, const float* eo, const float* S_in,
                         float* o);
#endif

}  // namespace k3::kda
