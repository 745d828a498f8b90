// Normalisations of the runnable model (fp32, plain scalar code: one reduction per row, negligible
// next to the projections; the sums run left to right, so every build gives the same bits).
#pragma once

namespace k3::model {

inline constexpr float kRmsEps = 1e-5f;  // rms_norm_eps of Kimi Linear, also o_norm's (reference/kda.md §1)

// y = x * (1 / sqrt(mean(x^2) + eps)) * w per row of n. x [rows][n] stride ldx; y stride ldy (y may be x).
void rmsnorm_rows(const float* x, int rows, int n, int ldx, const float* w, float eps, float* y, int ldy);

// KDA output stage (reference/kda.md §1 step 8): per row and head, RMSNorm over the head's V values,
// times the shared weight w [V], times sigmoid(gate): y = (o * inv_rms) * w * sigmoid(gate).
// o, gate, y: [rows][heads][V] contiguous (y may be o).
void head_norm_gate(const float* o, const float* gate, int rows, int heads, int V, const float* w, float eps,
                    float* y);

}  // namespace k3::model
