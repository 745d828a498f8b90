#include "core/model/model_cache.h"

#include <vector>

namespace k3::model {

namespace {

struct Entry {
    ModelKey key;
    std::shared_ptr<Model> model;
};

// A speculative-decoding run holds a target and two drafters; a prefix run one model more.
constexpr size_t kKeep = 4;

bool same(const ModelKey& a, const ModelKey& b) {
    return a.preset == b.preset && a.seed == b.seed && a.chunk == b.chunk && a.bits == b.bits;
}

}  // namespace

std::shared_ptr<Model> cached_model(const ModelKey& key, std::string* error, QuantisedMaker quantised) {
    static std::vector<Entry> cache;
    for (const Entry& e : cache)
        if (same(e.key, key)) return e.model;
    const auto cfg = model_preset(key.preset);
    if (!cfg) {
        *error = "unknown model preset '" + key.preset + "'";
        return nullptr;
    }
    if (key.bits < 16 && !quantised) {
        *error = "no maker for a model with " + std::to_string(key.bits) + "-bit weights";
        return nullptr;
    }
    ModelOptions o;
    o.chunk = key.chunk;
    ModelResult r =
        key.bits >= 16 ? Model::create(*cfg, key.seed, o) : quantised(*cfg, key.seed, key.bits, o);
    if (!r.model) {
        *error = r.error;
        return nullptr;
    }
    if (cache.size() >= kKeep) cache.erase(cache.begin());
    cache.push_back({key, std::move(r.model)});
    return cache.back().model;
}

}  // namespace k3::model
