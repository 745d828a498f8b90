// Runnable models made once per (preset, weight seed, kernel chunk, weight bits) and kept, because
// generating the seeded weights is most of a short module run (more so in WebAssembly). The last
// few models asked for are kept (the oldest goes first; a caller holding the shared pointer keeps
// its model alive). Not thread-safe, like the models: modules are stepped one at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/model/model.h"

namespace k3::model {

struct ModelKey {
    std::string preset;
    uint64_t seed = 1;
    int chunk = 64;  // ModelOptions::chunk
    int bits = 16;   // 16: the weights as generated; fewer: made by `quantised` (spec/drafter.h)
};

using QuantisedMaker = ModelResult (*)(const ModelConfig&, uint64_t seed, int bits, const ModelOptions&);

// Null with *error on failure (unknown preset, bits < 16 without a maker, a model that cannot run).
std::shared_ptr<Model> cached_model(const ModelKey& key, std::string* error,
                                    QuantisedMaker quantised = nullptr);

}  // namespace k3::model
