// The list of registered modules, in the order of DESIGN.md §2. A module that is not built yet is
// not listed. Each module file defines one `Experiment make_<name>_experiment()`.
#pragma once

#include <string_view>
#include <vector>

#include "core/experiments/experiment.h"

namespace k3 {

const std::vector<Experiment>& experiments();
const Experiment* find_experiment(std::string_view id);

// The six serving components plus the foundation and the opposition view, in sidebar order.
struct Component {
    const char* id;
    const char* title;
};
const std::vector<Component>& components();

}  // namespace k3
