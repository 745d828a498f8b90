#include "core/experiments/registry.h"

#include <algorithm>

namespace k3 {

namespace {
std::vector<Experiment (*)()>& factories() {
    static std::vector<Experiment (*)()> f;
    return f;
}
}  // namespace

detail::ExperimentRegistrar::ExperimentRegistrar(Experiment (*make)()) { factories().push_back(make); }

const std::vector<Experiment>& experiments() {
    // Built on first use, after every static registrar has run.
    static const std::vector<Experiment> all = [] {
        std::vector<Experiment> v;
        for (auto make : factories()) v.push_back(make());
        std::sort(v.begin(), v.end(),
                  [](const Experiment& a, const Experiment& b) { return a.number < b.number; });
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

const char* component_title(const std::string& id) {
    for (const Component& c : components())
        if (id == c.id) return c.title;
    return id.c_str();
}

}  // namespace k3
