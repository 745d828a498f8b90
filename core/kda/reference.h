// fp64 scalar references of the KDA core: the recurrence (reference/kda.md §2) and the chunked WY
// algorithm (§3.2) written as plainly as possible. Inputs are the fp32 tensors of layout.h promoted
// to double; the state and the outputs are double. Tests compare every fp32 kernel with these.
#pragma once

#include "core/kda/layout.h"

namespace k3::kda::ref {

// The log-decay gate of one channel in fp64 (core/kda/gates.h has the fp32 kernels): lower_bound 0 is
// Kimi Linear's -exp(A_log) softplus(z + dt_bias), below 0 Kimi K3's bounded
// lower_bound * sigmoid(exp(A_log) (z + dt_bias)).
double gate(double z, double dt_bias, double A_log, double lower_bound);

// One token for every value head, in place on S [HV][K][V] (double). q, k: [H][K]; v: [HV][V];
// g: [HV][K]; beta: [HV]; o: [HV][V]. Order as FLA's naive_recurrent_kda:
// decay rows by exp(g), predict p = S^T k, delta u = beta (v - p), write S += k u^T, read o = S^T (scale q).
void step(const Shape& s, double* S, const float* q, const float* k, const float* v, const float* g,
          const float* beta, double scale, double* o);

// T tokens, a loop of step(). o: [T][HV][V] (may be null).
void recurrent(const Shape& s, double* S, const Tokens& x, double scale, double* o);

// The chunked algorithm in fp64 with chunk size C >= 1: exp of pairwise differences of the
// cumulative gates (never exp of a positive number), forward substitution for (I + L)^{-1},
// W/U transform, then the state pass. Chunks restart at the start of the call. o may be null.
void chunked(const Shape& s, double* S, const Tokens& x, double scale, int C, double* o);

// The affine map of a segment as the explicit product of per-token matrices (§4.1):
// M = A_T ... A_1 with A_t = (I - beta_t k_t k_t^T) Diag(alpha_t), B = run(0).
// M: [HV][K][K], B: [HV][K][V].
void segment_map_explicit(const Shape& s, const Tokens& x, double* M, double* B);

}  // namespace k3::kda::ref
