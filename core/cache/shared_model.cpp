#include "core/cache/shared_model.h"

#include <memory>

namespace k3::serve {

model::Model* shared_model(const std::string& preset, uint64_t seed, int chunk, std::string* error) {
    static std::unique_ptr<model::Model> kept;
    if (kept && kept->config().id == preset && kept->seed() == seed && kept->options().chunk == chunk)
        return kept.get();
    const auto cfg = model_preset(preset);
    if (!cfg) {
        *error = "unknown model preset '" + preset + "'";
        return nullptr;
    }
    model::ModelOptions o;
    o.chunk = chunk;
    model::ModelResult r = model::Model::create(*cfg, seed, o);
    if (!r.model) {
        *error = r.error;
        return nullptr;
    }
    kept = std::move(r.model);
    return kept.get();
}

}  // namespace k3::serve
