// Module 11 `fleet`: fleet routing and instance affinity. A discrete-event simulation of N
// instances, each with a radix prefix cache with state checkpoints and a continuous-batching
// scheduler, under six routers; roofline-estimated times and costs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/experiments/module.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/workload_source.h"
#include "core/modules/shared/fleet_module_run.h"
#include "core/modules/shared/fleet_params.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

// Deliberate corruptions that the module's own checks must catch (k3cli audit-checks); the shared
// fleet checks have theirs (FleetSimFalsify, core/modules/shared/fleet_falsifiers.h).
enum class FleetFalsify : uint8_t {
    none,
    wrong_interval,  // the simulation checkpoints at twice the interval the block-id count assumes
};

struct FleetParams {
    WorkloadSpec workload;
    double load = 4;
    FleetRouterParams router;
    FleetCacheParams cache{.state_capacity = 64};
    FleetInstanceParams instances;
    FleetCostParams cost;
    FleetHostParams host;
    FleetPdParams pd;
    bool compare_routers = true, compare_no_reuse = true;
    FleetFalsify falsify = FleetFalsify::none;            // not a declared parameter
    FleetSimFalsify sim_falsify = FleetSimFalsify::none;  // not a declared parameter
};

// The same workload simulated once more: under another router, or with the prefix cache off.
struct FleetVariant {
    RunTag tag;  // of its checks
    RouterKind router = RouterKind::prefix;
    std::unique_ptr<FleetSim> sim;
};

struct FleetResult {
    FleetConfig config;
    LoadedWorkload workload;
    std::optional<Refusal> refusal;
    std::unique_ptr<FleetSim> main;
    std::vector<FleetVariant> no_reuse;   // the prefix cache off (compare_no_reuse)
    std::vector<FleetVariant> routers;    // every other router (compare_routers)
    std::vector<FleetVariant> colocated;  // architecture pd: the same instances colocated
    double simulate_ms = 0;               // wall clock of the main simulation
};

ParamList<FleetParams> fleet_params();
void validate_fleet(const FleetParams& p, Issues& issues);
FleetConfig fleet_module_config(const FleetParams& p);
// Loads the workload and sets up the simulations (or the refusal).
// The configurations of a run's simulations: the main one, then without reuse (compare_no_reuse) and
// under every other router (compare_routers); setup_fleet simulates them, estimate_fleet costs them.
std::vector<FleetConfig> fleet_sim_configs(const FleetParams& p);
FleetResult setup_fleet(const FleetParams& p);
std::unique_ptr<Run> start_fleet(const FleetParams& p, const Params& raw);
void report_fleet(const FleetParams& p, const FleetResult& f, Report& r);

}  // namespace k3
