#include "core/model/mlp.h"

#include "core/model/matmul.h"
#include "core/model/vec_kernels.h"

namespace k3::model {

void MlpActs::resize(int T, int hidden) {
    const size_t n = size_t(T) * size_t(hidden);
    if (a.size() < n) a.resize(n), b.resize(n);
}

void mlp_forward(const MlpWeights& w, const MlpAct& act, const float* x, int T, MlpActs& a, float* out,
                 Impl impl) {
    const int D = w.gate.in, F = w.gate.out;
    a.resize(T, F);
    if (T == 0) return;
    matmul(x, T, D, w.gate.view(), a.a.data(), F, impl);
    matmul(x, T, D, w.up.view(), a.b.data(), F, impl);
    if (act.kind == Activation::situ)
        situ_mul(a.a.data(), a.b.data(), size_t(T) * size_t(F), act.beta, act.beta_lin, impl);
    else
        silu_mul(a.a.data(), a.b.data(), size_t(T) * size_t(F), impl);
    matmul(a.a.data(), T, F, w.down.view(), out, D, impl);
}

}  // namespace k3::model
