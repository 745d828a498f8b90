#include "core/spec/models.h"

#include <memory>
#include <vector>

#include "core/spec/drafter.h"

namespace k3::spec {

namespace {

struct Entry {
    std::string preset;
    uint64_t seed;
    int bits;
    std::shared_ptr<model::Model> model;
};

constexpr size_t kKeep = 3;  // a target and two drafters

}  // namespace

std::shared_ptr<model::Model> cached_model(const std::string& preset, uint64_t seed, int bits,
                                           std::string* error) {
    static std::vector<Entry> cache;
    for (auto& e : cache)
        if (e.preset == preset && e.seed == seed && e.bits == bits) return e.model;
    const auto cfg = model_preset(preset);
    if (!cfg) {
        *error = "unknown model preset '" + preset + "'";
        return nullptr;
    }
    model::ModelResult r =
        bits >= 16 ? model::Model::create(*cfg, seed) : make_quantised_model(*cfg, seed, bits);
    if (!r.model) {
        *error = r.error;
        return nullptr;
    }
    if (cache.size() >= kKeep) cache.erase(cache.begin());
    cache.push_back({preset, seed, bits, std::move(r.model)});
    return cache.back().model;
}

}  // namespace k3::spec
