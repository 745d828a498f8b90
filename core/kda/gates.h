// The per-token activations that feed the KDA core (reference/kda.md §1 steps 3-5), fp32 with the
// portable functions of core/base/fmath.h so that native and WebAssembly agree bit for bit.
#pragma once

#include <cstddef>

namespace k3::kda {

inline constexpr float kL2Eps = 1e-6f;  // inside the square root, as FLA's l2norm

// Each of `rows` rows of length n: x = x / sqrt(sum x^2 + eps), the sum taken left to right.
// A zero row stays zero.
void l2norm_rows(float* x, int rows, int n, float eps = kL2Eps);

// Log-decay gate: g[h][i] = -exp(A_log[h]) * softplus(z[h][i] + dt_bias[h][i]), softplus linear
// above 20. z, dt_bias, g: [HV][K]; A_log: [HV]. Always <= 0 and finite for finite inputs.
void kda_gate(const float* z, const float* dt_bias, const float* A_log, int HV, int K, float* g);

// Kimi K3's lower-bounded gate (reference/kimi_k3.md §1.3, "gate_lower_bound"):
// g[h][i] = lower_bound * sigmoid(exp(A_log[h]) * (z[h][i] + dt_bias[h][i])), lower_bound < 0, so
// lower_bound < g < 0: a channel decays at most by exp(lower_bound) per token. Same layouts as kda_gate;
// the fp64 form is kda::ref::gate (core/kda/reference.h).
void kda_gate_bounded(const float* z, const float* dt_bias, const float* A_log, int HV, int K,
                      float lower_bound, float* g);

// beta = sigmoid(logit), n values.
void beta_sigmoid(const float* logit, int n, float* beta);

}  // namespace k3::kda
