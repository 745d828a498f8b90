// The checks of the deployed routers' own views (core/fleet/router_views.h), reported with every
// fleet run whose router keeps one (cache_aware, kv_events, kv_cost); report_fleet_checks calls it.
#pragma once

#include <functional>
#include <string>

#include "core/experiments/report.h"
#include "core/fleet/fleet_sim.h"

namespace k3 {

void report_router_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                          const std::string& name);

}  // namespace k3
