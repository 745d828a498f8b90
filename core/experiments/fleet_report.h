// What modules 11 `fleet`, 12 `tenants` and 13 `faults` share: their common parameters, the fleet
// configuration built from them, and the parts of their reports (latency tables, per-instance
// table, timeline, load plot, conservation checks, cost).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/experiments/experiment.h"
#include "core/fleet/fleet_metrics.h"
#include "core/fleet/fleet_runs.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/workload_source.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

// ---- parameters ----
std::vector<ParamSpec> fleet_workload_params();  // trace, synthetic, sessions, seed, load
std::vector<ParamSpec> fleet_router_params();    // router and its thresholds
std::vector<ParamSpec> fleet_cache_params();     // policy, interval, capacities, page size, refresh
std::vector<ParamSpec> fleet_instance_params();  // instances, model, hardware, memory, batching, cost
// Changes the default of a declared parameter (modules pick their own defaults).
void set_param_default(std::vector<ParamSpec>& specs, const std::string& key, double v);
void set_param_default(std::vector<ParamSpec>& specs, const std::string& key, const std::string& v);

// The configuration of the parameters that are declared (others keep FleetConfig's defaults).
FleetConfig fleet_config(const Params& p);
WorkloadSpec fleet_workload_spec(const Params& p);
// Errors (interval grid, trace if declared, working memory) and warnings (device memory) of the shared
// parameters.
std::vector<ParamIssue> validate_fleet_params(const Params& p);

// ---- report parts (core/modules/shared/fleet_report.h) ----
// MIGRATION ONLY (issue 12): the old modules' calls, until tenants and faults move.
void report_fleet_checks(Report& r, const FleetSim& s, const std::string& tag);
void report_core_scalars(Report& r, const FleetSim& s, const FleetSummary& f, double price_per_gpu_hour);

}  // namespace k3
