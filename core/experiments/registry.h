// The registered modules. Each module file registers itself with one line,
//     K3_REGISTER_EXPERIMENT(make_memory_experiment);
// and nothing else needs to know about it. k3core is an object library, so these registrations are
// never dropped by the linker. A module that is not built is simply not listed.
#pragma once

#include <string_view>
#include <vector>

#include "core/experiments/experiment.h"

namespace k3 {

// All modules, ordered by Experiment::number.
const std::vector<Experiment>& experiments();
const Experiment* find_experiment(std::string_view id);

// The six serving components plus the foundation and the opposition view, in sidebar order.
struct Component {
    const char* id;
    const char* title;
};
const std::vector<Component>& components();
// The title of a component id (the id itself if unknown).
const char* component_title(const std::string& id);

namespace detail {
struct ExperimentRegistrar {
    explicit ExperimentRegistrar(Experiment (*make)());
};
}  // namespace detail

#define K3_REGISTER_EXPERIMENT(factory) \
    static const ::k3::detail::ExperimentRegistrar k3_registrar_##factory(&factory)

}  // namespace k3
