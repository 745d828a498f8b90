// The runnable model for the modules that serve requests on it (4 `prefix`, 5 `checkpoints`, 6 `cow`):
// made once per (preset, seed, kernel chunk) and kept, since generating the seeded weights takes a
// large share of a short run (most of it in WebAssembly). The last model asked for is kept.
// Not thread-safe, like the model itself: modules are stepped one at a time.
#pragma once

#include <cstdint>
#include <string>

#include "core/model/model.h"

namespace k3::serve {

model::Model* shared_model(const std::string& preset, uint64_t seed, int chunk, std::string* error);

}  // namespace k3::serve
