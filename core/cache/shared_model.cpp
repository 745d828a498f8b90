#include "core/cache/shared_model.h"

#include "core/model/model_cache.h"

namespace k3::serve {

model::Model* shared_model(const std::string& preset, uint64_t seed, int chunk, std::string* error) {
    return model::cached_model({preset, seed, chunk, 16}, error).get();
}

}  // namespace k3::serve
