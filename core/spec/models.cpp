#include "core/spec/models.h"

#include "core/model/model_cache.h"
#include "core/spec/drafter.h"

namespace k3::spec {

std::shared_ptr<model::Model> cached_model(const std::string& preset, uint64_t seed, int bits,
                                           std::string* error) {
    return model::cached_model({preset, seed, model::ModelOptions{}.chunk, bits}, error,
                               make_quantised_model);
}

}  // namespace k3::spec
