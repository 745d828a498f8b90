// SwiGLU MLP of the runnable model: out = (silu(x W_gate) * (x W_up)) W_down. No sequence state.
#pragma once

#include "core/model/weights.h"

namespace k3::model {

struct MlpActs {
    FloatBuf a, b;  // [T][hidden]
    void resize(int T, int hidden);
};

// x [T][d] -> out [T][d] (may not alias x).
void mlp_forward(const MlpWeights& w, const float* x, int T, MlpActs& a, float* out, Impl impl);

}  // namespace k3::model
