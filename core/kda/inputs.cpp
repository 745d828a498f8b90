#include "core/kda/inputs.h"

#include "core/base/fmath.h"
#include "core/base/rng.h"
#include "core/kda/gates.h"

namespace k3::kda {

TokenData random_tokens(const Shape& s, int T, uint64_t seed, const InputRecipe& recipe) {
    TokenData d;
    d.shape = s;
    d.T = T;
    const size_t t = size_t(T);
    d.q.resize(t * s.qk_row());
    d.k.resize(t * s.qk_row());
    d.v.resize(t * s.v_row());
    d.g.resize(t * s.g_row());
    d.beta.resize(t * size_t(s.HV));
    Rng root(seed);
    Rng rq = root.fork(1), rk = root.fork(2), rv = root.fork(3), rg = root.fork(4), rb = root.fork(5);
    rq.fill_uniform(d.q.data(), d.q.size(), 0.0f, 1.0f);
    rk.fill_uniform(d.k.data(), d.k.size(), 0.0f, 1.0f);
    l2norm_rows(d.q.data(), T * s.H, s.K);
    l2norm_rows(d.k.data(), T * s.H, s.K);
    if (recipe.uniform_v)
        rv.fill_uniform(d.v.data(), d.v.size(), 0.0f, 1.0f);
    else
        rv.fill_normal(d.v.data(), d.v.size());
    for (auto& b : d.beta) b = sigmoid_f32(float(rb.normal()));
    const float strength = float(recipe.gate_strength);
    if (recipe.gate == GateRecipe::logsigmoid) {
        for (auto& g : d.g)
            g = strength * -softplus_f32(-float(rg.normal()));  // logsigmoid(x) = -softplus(-x)
    } else {
        FloatBuf A_log(size_t(s.HV)), dt_bias(s.g_row()), z(s.g_row());
        rg.fill_normal(A_log.data(), A_log.size());
        rg.fill_normal(dt_bias.data(), dt_bias.size());
        for (int tt = 0; tt < T; ++tt) {
            rg.fill_normal(z.data(), z.size(), strength);
            kda_gate(z.data(), dt_bias.data(), A_log.data(), s.HV, s.K, d.g.data() + size_t(tt) * s.g_row());
        }
    }
    return d;
}

FloatBuf random_state(const Shape& s, uint64_t seed, float sd) {
    FloatBuf S(s.state_floats());
    Rng r(seed);
    r.fill_normal(S.data(), S.size(), sd);
    return S;
}

}  // namespace k3::kda
