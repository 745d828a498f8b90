// The checks of the engines' batch formers (core/fleet/batch_former.h), reported with every fleet
// run whose instances follow an engine's scheduler (engine sglang or vllm), with the iteration and
// retraction counts; report_fleet_checks calls it.
#pragma once

#include <functional>
#include <string>

#include "core/experiments/report.h"
#include "core/fleet/fleet_sim.h"

namespace k3 {

void report_batch_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                         const std::string& name);

}  // namespace k3
