// The runnable models the speculative-decoding modules (7, 8) and `k3cli bench spec` run on: the
// target and its quantised self-drafters, kept by core/model/model_cache.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/model/model.h"

namespace k3::spec {

// bits = 16: the target's weights; 2..8: quantised (spec/drafter.h). Null with *error on failure.
std::shared_ptr<model::Model> cached_model(const std::string& preset, uint64_t seed, int bits,
                                           std::string* error);

}  // namespace k3::spec
