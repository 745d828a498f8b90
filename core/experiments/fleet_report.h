// What modules 11 `fleet`, 12 `tenants` and 13 `faults` share: their common parameters, the fleet
// configuration built from them, and the parts of their reports (latency tables, per-instance
// table, timeline, load plot, conservation checks, cost).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/experiments/experiment.h"
#include "core/fleet/fleet_metrics.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/workload_source.h"

namespace k3 {

// Steps simulations one after another within the deadline: `runs` hold a std::unique_ptr<FleetSim>
// `sim` each, `next` is the first unfinished one. Returns the progress of the whole list in [0, 1].
template <class Run>
double run_in_turn(std::vector<Run>& runs, size_t& next, const Deadline& d) {
    while (next < runs.size()) {
        runs[next].sim->run(&d);
        if (!runs[next].sim->done()) break;
        ++next;
        if (d.passed()) break;
    }
    if (next >= runs.size()) return 1.0;
    return (double(next) + runs[next].sim->progress()) / double(runs.size());
}

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
// The page's budget: refuse workloads whose prefix trees would be too large.
std::string check_fleet_size(const Workload& w, const FleetConfig& c);

// ---- report parts ----
// One row per (label, summary): TTFT, TPOT and E2E mean / p50 / p90 / p99 / max.
void report_latency_table(Report& r, const std::string& name,
                          const std::vector<std::pair<std::string, RequestSummary>>& rows);
void report_instances(Report& r, const FleetSim& s);
void report_timeline(Report& r, const FleetSim& s, const std::string& name);
void report_load_series(Report& r, const FleetSim& s);
// Checks every fleet run must pass: every request completed or failed, the work ledgers agree,
// state-usable <= KV-visible, caches and pools audit clean and are released, the cost model agrees
// with the roofline. `tag` prefixes the names when a module reports several runs.
void report_fleet_checks(Report& r, const FleetSim& s, const std::string& tag = "");
// The cost model, hardware and simplifications, as notes.
void report_model_notes(Report& r, const FleetSim& s);
// The headline scalars every fleet module shows (DESIGN.md §10 keys).
void report_core_scalars(Report& r, const FleetSim& s, const FleetSummary& f, double price_per_gpu_hour);

}  // namespace k3
