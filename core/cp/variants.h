// Three linear-attention recurrences that context parallelism treats alike (reference/kda.md §4), to
// show what makes KDA's state different. Per value head, state S [K][V], o = S^T (scale q) after the update:
//
//   linear    S_t = S_{t-1} + k v^T                                   M = I          (states add up)
//   diagonal  S_t = Diag(exp g) S_{t-1} + k v^T                       M = Diag(prod exp g)  (decay only)
//   kda       S_t = (I - b k k^T) Diag(exp g) S_{t-1} + b k v^T       M = K x K dense (decay and erasure)
//
// Every segment of tokens maps a start state to an end state affinely, S_out = M S_in + B, and its
// outputs are O = O0 + E S_in (E: output sensitivities). All three are stored in the general form of
// core/kda/affine.h (M [HV][K][K]), so composition, application and the output fix-up are the same code
// for all; what a rank must send differs (map_floats_per_head). Inputs use the layouts of
// core/kda/layout.h; linear and diagonal ignore beta (and linear ignores g).
//
// The KDA variant calls the core/kda kernels (chunked prefill, segment map); linear and diagonal are
// plain fp32 scalar recurrences (token by token, i ascending in every sum), cheap next to KDA's, with
// fp64 references in reference.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kda/layout.h"

namespace k3::cp {

using kda::FloatBuf;
using kda::Impl;
using kda::Shape;
using kda::Tokens;

enum class Variant : uint8_t { linear, diagonal, kda };
inline constexpr Variant kVariants[] = {Variant::linear, Variant::diagonal, Variant::kda};
const char* variant_id(Variant v);     // "linear", "diagonal", "kda"
const char* variant_title(Variant v);  // "plain linear attention (M = I)", ...

// Floats of M a rank has to send per value head: 0 (M = I), K (a diagonal), K x K (KDA).
uint64_t map_floats_per_head(Variant v, const Shape& s);

// The single-rank run: T tokens from S (in place), outputs o [T][HV][V] (may be null). KDA: the chunked
// kernel with chunk C (kda/chunked.h); linear and diagonal: token by token (C unused).
void run(Variant v, const Shape& s, float* S, const Tokens& x, float scale, int C, float* o,
         Impl impl = Impl::simd);

// The affine map of a segment from a zero start: M [HV][K][K], B [HV][K][V], outputs from zero o0
// [T][HV][V] and sensitivities eo [T][HV][K] (both optional). B and o0 have the bits of run() from a
// zero state with the same C.
void segment_map(Variant v, const Shape& s, const Tokens& x, float scale, int C, float* M, float* B,
                 float* o0, float* eo, Impl impl = Impl::simd);

}  // namespace k3::cp
