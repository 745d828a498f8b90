// Module 13 `faults`: an instance crashes or is drained during a fleet run, colocated or on either stage
// of prefill/decode disaggregation; its requests recompute elsewhere, resume from checkpoints replicated
// to a fleet-wide remote tier or from their new instance's own host tier, or migrate live. A consistency
// guard lets a request resume only where its KV and its recurrent state sit at the same position.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/experiments/module.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/workload_source.h"
#include "core/modules/shared/fleet_module_run.h"
#include "core/modules/shared/fleet_params.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

struct FaultsParams {
    FaultKind fault = FaultKind::crash;
    uint32_t fault_instance = 0;
    double fault_at = 0.3;  // fraction of the time the requests arrive over
    double down_s = 30;     // 0 = never back
    Recovery recovery = Recovery::host_tier;
    MigrationMove migration_move = MigrationMove::everything;
    bool guard = true;
    double detect_ms = 500;
    double remote_tier_gib = 0;  // the fleet-wide tier of recovery host_tier; 0 = unbounded
    bool compare = true;
    WorkloadSpec workload;
    double load = 8;
    FleetRouterParams router{.router = RouterKind::state_aware};
    FleetCacheParams cache;
    FleetInstanceParams instances;
    FleetCostParams cost;
    FleetPdParams pd;
    FleetHostParams host;  // each instance's own host tier (module 11's), lost with it in a crash
    FleetSimFalsify sim_falsify = FleetSimFalsify::none;  // not a declared parameter (k3cli audit-checks)
};

// One simulation of the workload: with the fault under a recovery, or without the fault.
struct FaultRun {
    std::string label;  // in the recoveries table
    RunTag tag;         // of its checks
    bool has_fault = true, main = false;
    Recovery recovery = Recovery::recompute;
    MigrationMove move = MigrationMove::everything;
    bool guard = true;
    std::unique_ptr<FleetSim> sim;
};

struct FaultsResult {
    FleetConfig config;  // every run's, but for the fault, the recovery and the guard
    LoadedWorkload workload;
    double fault_ms = 0, window_ms = 0;  // the fault and how long after it requests count as hit
    std::optional<Refusal> refusal;
    // This run, no fault (same guard); with compare also no fault with the other guard setting and
    // every other recovery with and without the guard.
    std::vector<FaultRun> runs;

    // Requests arriving in [fault, fault + window).
    bool after_fault(const RequestOutcome& o) const {
        return o.arrival_ms >= fault_ms && o.arrival_ms < fault_ms + window_ms;
    }
    // The run without a fault with this guard setting: the baseline of a run's extra work.
    const FleetSim& calm_for(bool guard) const;
};

ParamList<FaultsParams> faults_params();
// Every simulation's configuration but for the fault, the recovery and the guard.
FleetConfig faults_config(const FaultsParams& p);
void validate_faults(const FaultsParams& p, Issues& issues);
FaultsResult setup_faults(const FaultsParams& p);
// Its simulations on its workload, before they run (issue 20).
RunEstimate estimate_faults(const FaultsParams& p);
std::unique_ptr<Run> start_faults(const FaultsParams& p, const Params& raw);
void report_faults(const FaultsParams& p, const FaultsResult& f, Report& r);

}  // namespace k3
