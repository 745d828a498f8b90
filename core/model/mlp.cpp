#include "core/model/mlp.h"

#include "core/base/fmath.h"
#include "core/model/matmul.h"

namespace k3::model {

void MlpActs::resize(int T, int hidden) {
    const size_t n = size_t(T) * size_t(hidden);
    if (a.size() < n) a.resize(n), b.resize(n);
}

void mlp_forward(const MlpWeights& w, const float* x, int T, MlpActs& a, float* out, Impl impl) {
    const int D = w.gate.in, F = w.gate.out;
    a.resize(T, F);
    if (T == 0) return;
    matmul(x, T, D, w.gate.view(), a.a.data(), F, impl);
    matmul(x, T, D, w.up.view(), a.b.data(), F, impl);
    for (size_t e = 0; e < size_t(T) * size_t(F); ++e) a.a[e] = silu_f32(a.a[e]) * a.b[e];
    matmul(a.a.data(), T, F, w.down.view(), out, D, impl);
}

}  // namespace k3::model
