#include "core/model/sampler.h"

#include "core/base/fmath.h"

namespace k3::model {

int32_t argmax(const float* logits, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

int32_t sample_temperature(const float* logits, int n, float temperature, Rng& rng) {
    if (!(temperature > 0.0f)) return argmax(logits, n);
    const float m = logits[argmax(logits, n)];
    double total = 0.0;
    for (int i = 0; i < n; ++i) total += double(exp_f32((logits[i] - m) / temperature));
    const double u = rng.uniform() * total;
    double run = 0.0;
    int32_t last = 0;
    for (int i = 0; i < n; ++i) {
        const float w = exp_f32((logits[i] - m) / temperature);
        if (w > 0.0f) last = i;
        run += double(w);
        if (run > u) return i;
    }
    return last;  // u landed on the rounding remainder of the running sum
}

}  // namespace k3::model
