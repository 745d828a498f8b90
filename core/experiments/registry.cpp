#include "core/experiments/registry.h"

#include "core/experiments/modules.h"

namespace k3 {

const std::vector<Experiment>& experiments() {
    static const std::vector<Experiment> all = [] {
        std::vector<Experiment> v;
        v.push_back(make_memory_experiment());
        return v;
    }();
    return all;
}

const Experiment* find_experiment(std::string_view id) {
    for (const auto& e : experiments())
        if (e.id == id) return &e;
    return nullptr;
}

const std::vector<Component>& components() {
    static const std::vector<Component> c = {
        {"foundation", "Foundation"},
        {"page pool", "Unified page pool"},
        {"prefix caching", "Prefix caching"},
        {"speculative decoding", "Speculative decoding"},
        {"context parallelism", "Context parallelism"},
        {"request lifecycle", "Request lifecycle"},
        {"fleet scheduling", "Fleet scheduling"},
        {"opposition", "Where it stops paying"},
    };
    return c;
}

}  // namespace k3
