// Seeded random inputs of the KDA core following FLA's test recipes (reference/kda.md §7), for the
// tests, module 1 and the benchmark. Same numbers natively and in WebAssembly (core/base/rng.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/kda/layout.h"

namespace k3::kda {

enum class GateRecipe {
    logsigmoid,  // g = strength * logsigmoid(N(0,1))           (FLA: logsigmoid(randn) / normalizer)
    model,       // g = -exp(A_log) * softplus(strength * z + dt_bias), A_log, dt_bias, z ~ N(0,1)
};

struct InputRecipe {
    GateRecipe gate = GateRecipe::logsigmoid;
    double gate_strength = 1.0;  // 1 / FLA's normalizer; larger = faster decay
    bool uniform_v = false;      // v ~ U(0,1) instead of N(0,1)
};

// Owns T tokens of inputs: q, k ~ U(0,1) then L2-normalised; v ~ N(0,1) (or U(0,1));
// beta = sigmoid(N(0,1)); g from the recipe.
struct TokenData {
    Shape shape;
    int T = 0;
    FloatBuf q, k, v, g, beta;
    Tokens view() const { return {q.data(), k.data(), v.data(), g.data(), beta.data(), T}; }
};

TokenData random_tokens(const Shape& s, int T, uint64_t seed, const InputRecipe& recipe = {});

// A start state with entries N(0, sd^2), [HV][K][V].
FloatBuf random_state(const Shape& s, uint64_t seed, float sd = 1.0f);

}  // namespace k3::kda
