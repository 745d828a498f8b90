// Next-token sampling: greedy and temperature, with the portable Rng and own exp (core/base), so a
// seeded stream of tokens is the same natively and in WebAssembly.
#pragma once

#include <cstdint>

#include "core/base/rng.h"

namespace k3::model {

// Index of the largest logit; the first one on ties. n >= 1.
int32_t argmax(const float* logits, int n);

// Token drawn from softmax(logits / temperature): weights exp((l - max) / temperature) summed in
// index order (in double), one uniform draw, first index whose running sum exceeds it.
// temperature <= 0 is greedy (and draws nothing).
int32_t sample_temperature(const float* logits, int n, float temperature, Rng& rng);

// A sampler whose whole state (temperature and Rng) is a copyable value: saving it with a sequence
// snapshot resumes the same random stream.
struct Sampler {
    float temperature = 0.0f;  // 0 = greedy
    Rng rng{0x5a3b1e};
    int32_t next(const float* logits, int n) { return sample_temperature(logits, n, temperature, rng); }
};

}  // namespace k3::model
