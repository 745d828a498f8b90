// Module 13 `faults`: the workload with the fault under the chosen recovery, without the fault, and
// under every other recovery with and without the guard.
#include <algorithm>

#include "core/modules/faults/faults.h"
#include "core/modules/shared/fleet_estimate.h"

namespace k3 {

namespace {

// A recovery compared with the chosen one.
struct RecoveryOption {
    Recovery recovery;
    MigrationMove move;
    const char* label;
    const char* key;  // of its checks' keys
};

// A crash cannot migrate (that recovery falls back to the host tier); a drain does not need the host
// tier (running requests finish where they are unless they migrate).
std::vector<RecoveryOption> recovery_options(FaultKind fault) {
    if (fault == FaultKind::crash)
        return {{Recovery::recompute, MigrationMove::everything, "recompute elsewhere", "recompute"},
                {Recovery::host_tier, MigrationMove::everything, "remote tier", "host_tier"}};
    return {{Recovery::recompute, MigrationMove::everything, "let running requests finish", "finish"},
            {Recovery::migrate, MigrationMove::everything, "migrate KV + state", "migrate"},
            {Recovery::migrate, MigrationMove::kv_and_checkpoint, "migrate KV + last checkpoint",
             "migrate_checkpoint"}};
}

// The option runs as the chosen recovery does (the same fallback), with the same guard setting.
bool same_as_chosen(const FaultsParams& p, const RecoveryOption& o, bool guard) {
    const bool same_recovery =
        o.recovery == p.recovery ||
        (p.fault == FaultKind::drain && p.recovery == Recovery::host_tier &&
         o.recovery == Recovery::recompute) ||
        (p.fault == FaultKind::crash && p.recovery == Recovery::migrate && o.recovery == Recovery::host_tier);
    return same_recovery && (o.recovery != Recovery::migrate || o.move == p.migration_move) &&
           guard == p.guard;
}

// The runs, in report order: this run, no fault with its guard, then (compare) no fault with the other
// guard and every other recovery with and without the guard. `sim` is left empty.
std::vector<FaultRun> fault_run_plans(const FaultsParams& p) {
    std::vector<FaultRun> v;
    auto add = [&](std::string label, RunTag tag, bool has_fault, Recovery r, MigrationMove m, bool guard) {
        v.push_back({std::move(label), std::move(tag), has_fault, v.empty(), r, m, guard, nullptr});
    };
    auto guard_key = [](bool g) { return g ? "_guard" : "_no_guard"; };
    add("this run", {}, true, p.recovery, p.migration_move, p.guard);
    add("no fault", {"no fault", std::string("no_fault") + guard_key(p.guard)}, false, Recovery::recompute,
        MigrationMove::everything, p.guard);
    if (!p.compare) return v;
    add("no fault", {"no fault", std::string("no_fault") + guard_key(!p.guard)}, false, Recovery::recompute,
        MigrationMove::everything, !p.guard);
    for (const RecoveryOption& o : recovery_options(p.fault))
        for (bool g : {true, false}) {
            if (same_as_chosen(p, o, g)) continue;
            const std::string label = std::string(o.label) + (g ? ", guard" : ", no guard");
            add(label, {label, o.key + std::string(guard_key(g))}, true, o.recovery, o.move, g);
        }
    return v;
}

class FaultsRun final : public FleetModuleRun<FaultsResult> {
  public:
    FaultsRun(const FaultsParams& p, const Params& raw) : FleetModuleRun("faults", raw) {
        add_step("loading the workload", 1, [this, p] { result_ = setup_faults(p); });
        add_simulations("simulating", 10, &FaultsResult::runs);
        add_report([p](const FaultsResult& f, Report& r) { report_faults(p, f, r); });
    }
};

}  // namespace

const FleetSim& FaultsResult::calm_for(bool guard) const {
    for (const FaultRun& x : runs)
        if (!x.has_fault && x.guard == guard) return *x.sim;
    return *runs[1].sim;
}

FleetConfig faults_config(const FaultsParams& p) {
    FleetConfig c = fleet_config(p.router, p.cache, p.instances, p.cost);
    c.load = p.load;
    c.seed = p.workload.seed;
    c.detect_ms = p.detect_ms;
    c.host_tier_bytes = uint64_t(p.remote_tier_gib * 1024.0 * 1024.0 * 1024.0);
    apply_host_tier(p.host, c);
    apply_pd(p.pd, c);
    c.falsify = p.sim_falsify;  // every simulation is damaged the same way
    return c;
}

FaultsResult setup_faults(const FaultsParams& p) {
    FaultsResult f;
    f.workload = load_workload(p.workload);
    const std::shared_ptr<const Workload>& w = f.workload.workload;
    auto refuse = [&f](std::string why) {
        f.refusal =
            Refusal{"workload_and_config_accepted", "Workload and configuration accepted", std::move(why)};
    };
    if (!w) {
        refuse(f.workload.error);
        return f;
    }
    f.config = faults_config(p);
    const double span = w->requests.empty() ? 0 : w->requests.back().arrival_ms / f.config.load;
    const double down = p.down_s * 1000.0;
    f.fault_ms = p.fault_at * span;
    f.window_ms = down > 0 ? down : std::max(span - f.fault_ms, 1.0);
    const FaultSpec fault{p.fault, p.fault_instance, f.fault_ms, down};
    for (FaultRun& x : fault_run_plans(p)) {
        FleetConfig c = f.config;
        if (x.has_fault) c.faults = {fault};
        c.recovery = x.recovery;
        c.migration_move = x.move;
        c.guard = x.guard;
        x.sim = std::make_unique<FleetSim>(w, c);
        f.runs.push_back(std::move(x));
    }
    if (const std::string& e = f.runs[0].sim->error(); !e.empty()) refuse(e);
    return f;
}

RunEstimate estimate_faults(const FaultsParams& p) {
    const LoadedWorkload lw = load_workload(p.workload);
    if (!lw.workload) return {};  // validate_workload refused it
    const std::vector<FleetConfig> sims(fault_run_plans(p).size(), faults_config(p));
    const void* size = p.workload.is_synthetic() ? static_cast<const void*>(&p.workload.sessions)
                                                 : static_cast<const void*>(&p.workload.trace);
    return estimate_fleet_sims(*lw.workload, sims, p.router, p.cache, p.instances, size);
}

std::unique_ptr<Run> start_faults(const FaultsParams& p, const Params& raw) {
    return std::make_unique<FaultsRun>(p, raw);
}

}  // namespace k3
