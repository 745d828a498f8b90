// fp64 scalar references of the runnable model for tests (reference/kda.md §7 invariant 23): the same
// weights (fp32, promoted), every intermediate and state in double, written as plainly as possible.
// The KDA layer runs the recurrence token by token in the order of §2; the MLA layer decompresses
// keys and values per head (the textbook form, not the absorbed one the fp32 model uses), so the two
// also check the absorption algebra against each other.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/dims.h"
#include "core/model/kda_layer.h"
#include "core/model/weights.h"

namespace k3::model {
class Model;
}

namespace k3::model::ref {

// One KDA layer's state in double, same layouts as KdaState.
struct KdaStateF64 {
    std::vector<double> S, win_q, win_k, win_v;
    explicit KdaStateF64(const KdaDims& d = {});
    static KdaStateF64 from(const KdaDims& d, const KdaState& st);  // promote an fp32 state
};

// x [T][d_model] -> out [T][d_model], updating st.
void kda_layer(const KdaWeights& w, const KdaDims& d, KdaStateF64& st, const double* x, int T, double* out);

// The whole model in double: every KDA state, and per attention layer the decompressed keys and values
// of every past token.
struct ModelStateF64 {
    std::vector<KdaStateF64> kda;
    std::vector<std::vector<double>> keys, values;  // per attention layer: [t][H][nope + rope], [t][H][v]
    uint64_t position = 0;
    explicit ModelStateF64(const Model& m);
};

// Appends tokens; logits [T][vocab] of every token (may be null).
void model_forward(const Model& m, ModelStateF64& st, std::span<const int32_t> tokens,
                   std::vector<double>* logits);

}  // namespace k3::model::ref
