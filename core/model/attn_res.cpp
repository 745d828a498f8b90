#include "core/model/attn_res.h"

#include <cmath>
#include <cstring>

#include "core/base/fmath.h"

namespace k3::model {

namespace {

// The source's logit: its dot with the combined weight, times its inverse RMS (both sums left to right).
float source_logit(const float* v, const float* wq, int d, float eps) {
    float ss = 0.0f, dot = 0.0f;
    for (int i = 0; i < d; ++i) ss = ss + v[i] * v[i];
    for (int i = 0; i < d; ++i) dot = dot + v[i] * wq[i];
    return dot * (1.0f / std::sqrt(ss / float(d) + eps));
}

}  // namespace

void attn_res_mix(const float* blocks, int n, size_t ld, const float* prefix, int T, int d,
                  const AttnResWeights& w, float eps, float* out) {
    if (n == 0) {
        std::memcpy(out, prefix, sizeof(float) * size_t(T) * size_t(d));
        return;
    }
    FloatBuf wq(static_cast<size_t>(d)), p(static_cast<size_t>(n) + 1);
    for (int i = 0; i < d; ++i) wq[size_t(i)] = w.norm[size_t(i)] * w.proj[size_t(i)];
    for (int t = 0; t < T; ++t) {
        const float* bt = blocks + size_t(t) * ld;
        const float* pt = prefix + size_t(t) * d;
        auto source = [&](int s) { return s < n ? bt + size_t(s) * d : pt; };
        float m = 0.0f;
        for (int s = 0; s <= n; ++s) {
            p[size_t(s)] = source_logit(source(s), wq.data(), d, eps);
            m = s == 0 || p[size_t(s)] > m ? p[size_t(s)] : m;
        }
        float z = 0.0f;
        for (int s = 0; s <= n; ++s) z = z + (p[size_t(s)] = exp_f32(p[size_t(s)] - m));
        float* ot = out + size_t(t) * d;
        std::memset(ot, 0, sizeof(float) * size_t(d));
        for (int s = 0; s <= n; ++s) {
            const float* v = source(s);
            for (int i = 0; i < d; ++i) ot[i] = ot[i] + p[size_t(s)] * v[i];
        }
        for (int i = 0; i < d; ++i) ot[i] = ot[i] / z;
    }
}

}  // namespace k3::model
