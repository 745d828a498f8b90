// One factory per module; registry.cpp lists them in sidebar order.
#pragma once

#include "core/experiments/experiment.h"

namespace k3 {

Experiment make_memory_experiment();  // module 2, module_memory.cpp

}  // namespace k3
