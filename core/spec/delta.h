// The delta form of the KDA recurrence (reference/kda.md §6 variant (e)): per head and token the
// recurrent step is S = D S + k delta^T with D = Diag(exp g) and delta = beta (v - k^T D S). Recording
// delta lets a replay skip the prediction dot product: 2 K V operations per head-token instead of 4.
//
//   S      [HV][K][V]  state, in place
//   k      [T][H][K]   L2-normalised keys (value head h reads key head h / (HV / H))
//   v      [T][HV][V]
//   g      [T][HV][K]  log-decay
//   beta   [T][HV]
//   delta  [T][HV][V]
//
// Both functions repeat the arithmetic of core/kda's recurrent step operation for operation
// (decay a * S with a = exp_f32(g); p summed over key rows i ascending from 0; u = beta (v - p);
// S + k_i u), so delta_record leaves the bits kda::recurrent leaves, and delta_replay of its output
// reproduces them (tests/unit/test_spec_replay.cpp). Element-wise loops only: a compiler may vectorise
// them without changing a bit. Plain code, no SIMD version: the delta form is a record variant under
// study, not a production kernel of this project.
#pragma once

#include "core/kda/layout.h"

namespace k3::spec {

// Advances S over T tokens exactly like kda::recurrent (no output) and writes each token's delta.
void delta_record(const kda::Shape& s, float* S, const float* k, const float* v, const float* g,
                  const float* beta, int T, float* delta);

// One token at a time: S = Diag(exp g_t) S + k_t delta_t^T. Token t's rows sit `stride` floats apart
// (records interleave fields): k_t = k + t * stride, and likewise delta and g.
void delta_replay(const kda::Shape& s, float* S, const float* k, const float* delta, const float* g, int T,
                  size_t stride);

// RecoverSSM's closed-form commit (vLLM's _commit_kda_state_kernel, kimi_k3.md §3.2): the T records
// folded at once, S = S0 (.) prod_t D_t + sum_t (k_t c_t^T) (.) prod_{s>t} D_s with D_t = Diag(exp g_t),
// the records read in reverse with a running decay product per key row. k [T][H][K] (L2-normalised), c
// [T][HV][V], g [T][HV][K], contiguous. Equal to T steps of delta_replay in exact arithmetic, not in its
// rounding (module 7 measures how far apart they are). Plain loops in a fixed order; exp is
// core/base/fmath.h's (exp_f32 for the fp32 state, exp_f64 for the fp64 reference). `skip_decay` >= 0
// is a falsifier hook (module 7): the product leaves that token's decay factor out.
void closed_form_fold(const kda::Shape& s, float* S, const float* k, const float* c, const float* g, int T,
                      int skip_decay = -1);
void closed_form_fold(const kda::Shape& s, double* S, const float* k, const float* c, const float* g, int T,
                      int skip_decay = -1);

}  // namespace k3::spec
