// Gated MLP of the runnable model: out = act(x W_gate, x W_up) W_down with act SwiGLU silu(g) u or
// Kimi K3's SiTU (core/base/fmath.h situ_f32). No sequence state.
#pragma once

#include "core/model/config.h"
#include "core/model/weights.h"

namespace k3::model {

struct MlpAct {
    Activation kind = Activation::swiglu;
    float beta = 4, beta_lin = 25;  // SiTU's
    static MlpAct of(const ModelConfig& c) { return {c.activation, c.situ_beta, c.situ_linear_beta}; }
};

struct MlpActs {
    FloatBuf a, b;  // [T][hidden]
    void resize(int T, int hidden);
};

// x [T][d] -> out [T][d] (may not alias x).
void mlp_forward(const MlpWeights& w, const MlpAct& act, const float* x, int T, MlpActs& a, float* out,
                 Impl impl);

}  // namespace k3::model
