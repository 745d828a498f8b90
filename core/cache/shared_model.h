// The runnable model for the modules that serve requests on it (4 `prefix`, 5 `checkpoints`, 6 `cow`),
// kept by core/model/model_cache.h: the pointer stays valid while the model is among the last few
// asked for (a module asks once per run).
#pragma once

#include <cstdint>
#include <string>

#include "core/model/model.h"

namespace k3::serve {

model::Model* shared_model(const std::string& preset, uint64_t seed, int chunk, std::string* error);

}  // namespace k3::serve
