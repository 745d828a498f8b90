// Short causal depthwise convolution of the q/k/v projections (reference/kda.md §1 step 2, §5).
//
//   x       [T][D]      raw (pre-conv) projection rows
//   w       [D][W]      per-channel taps; w[c][W-1] multiplies the current row (HF weight (D, 1, W))
//   window  [W-1][D]    the last W-1 raw rows before x, row 0 = oldest; zeros at a sequence start
//   y       [T][D]      y_t[c] = w[c][0] x_{t-W+1}[c] + ... + w[c][W-1] x_t[c]   (summed left to right)
// The window holds RAW rows (neither post-conv nor post-SiLU): that is the state needed to resume.
// SiLU is a separate pass (silu_inplace) because the conv output is also of interest on its own.
// Cost is W multiply-adds per channel and token, negligible next to the KDA core: plain scalar code.
#pragma once

#include <cstddef>

namespace k3::kda {

// One row: y = conv(window ++ x); then the window shifts by one and takes x as its newest row.
void conv_step(int D, int W, float* window, const float* x, const float* w, float* y);

// T rows; same bits as T calls of conv_step. window is updated to the last W-1 raw rows.
void conv_sequence(int D, int W, float* window, const float* x, int T, const float* w, float* y);

// x = x * sigmoid(x) with core/base/fmath.h.
void silu_inplace(float* x, size_t n);

}  // namespace k3::kda
