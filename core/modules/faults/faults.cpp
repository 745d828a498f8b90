// Module 13 `faults`: its parameters, validation and declaration.
#include "core/modules/faults/faults.h"

#include "core/experiments/module_doc.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/fleet_falsifiers.h"

namespace k3 {

namespace {

ParamSpec& documented(ParamSpec& s) { return s.describe(doc_param_help("faults", s.key)); }

void fault_params(ParamList<FaultsParams>& l) {
    using P = FaultsParams;
    auto f = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Fault"); };
    f(l.choice(&P::fault, "fault", "Fault",
               Choices<FaultKind>{{FaultKind::crash, "crash", "crash (everything on the instance is lost)"},
                                  {FaultKind::drain, "drain", "drain (planned maintenance)"}}));
    f(l.integer(&P::fault_instance, "fault_instance", "Instance", "", 0, 63))
        .describe("Which instance (0-based) crashes or drains; must be below the instance count.");
    f(l.real(&P::fault_at, "fault_at", "When", "fraction", 0, 1))
        .describe("Fault time as a fraction of the time the requests arrive over.");
    f(l.real(&P::down_s, "down_s", "Down for", "s", 0, 3600))
        .describe("The instance comes back empty after this long; 0 = never.");
    f(l.choice(&P::recovery, "recovery", "Recovery",
               choices_from<Recovery>(recovery_ids(), recovery_labels(), parse_recovery)));
    f(l.choice(&P::migration_move, "migration_move", "Migration moves",
               Choices<MigrationMove>{
                   {MigrationMove::everything, "everything", "KV and the current state"},
                   {MigrationMove::kv_and_checkpoint, "kv_and_checkpoint", "KV and the last checkpoint"}}))
        .active_when("recovery", "migrate");
    f(l.flag(&P::guard, "guard", "Consistency guard"));
    f(l.real(&P::detect_ms, "detect_ms", "Crash detection", "ms", 0, 60000))
        .describe("Requests of a crashed instance are re-routed this long after the crash.");
    documented(f(l.real(&P::remote_tier_gib, "remote_tier_gib", "Remote tier capacity", "GiB", 0, 65536)));
    l.flag(&P::compare, "compare", "Compare recoveries")
        .in_group("Run")
        .describe(
            "Runs the same fault under every recovery, with and without the guard, and once without a "
            "fault.");
}

// A drain with live migration: the runs whose checks the defaults (a crash) do not make.
std::vector<std::pair<std::string, std::string>> drain_params() {
    return {{"fault", "drain"}, {"recovery", "migrate"}};
}

// Disaggregated, a crash of the one prefill instance while two handoffs queue on its slow link, under
// every recovery (small runs: the audit adds them to the defaults').
std::vector<std::pair<std::string, std::string>> pd_crash_params() {
    return {{"architecture", "pd"}, {"prefill_instances", "1"}, {"pd_link", "eth-100"},
            {"load", "16"},         {"fault_at", "0.4"},        {"sessions", "32"}};
}

// Each corrupts one event of every simulation of the run (FleetConfig::falsify).
std::vector<Falsifier<FaultsParams>> faults_falsifiers() {
    auto set = [](FleetSimFalsify f) { return [f](FaultsParams& p) { p.sim_falsify = f; }; };
    const auto drain = drain_params();
    return {
        {"pd_cut_transfer_delivered",
         "disaggregated, one handoff a prefill instance's crash cut is recorded lost and delivered all the "
         "same",
         {"pd_cut_transfers_accounted*"},
         set(FleetSimFalsify::pd_cut_transfer_delivered),
         pd_crash_params()},
        {"pd_lost_transfer_unlogged",
         "disaggregated, the bytes of one handoff a crash cut are not logged as lost",
         {"pd_cut_transfers_accounted*"},
         set(FleetSimFalsify::pd_lost_transfer_unlogged),
         pd_crash_params()},
        {"guard_lets_one_through",
         "the guard lets one request resume at its kv position, past its state",
         {"guard_no_violations*"},
         set(FleetSimFalsify::guard_lets_one_through)},
        {"guard_lets_one_through_on_drain",
         "the guard lets one request resume at its kv position, past its state (a drain)",
         {"guard_no_violations*"},
         set(FleetSimFalsify::guard_lets_one_through),
         drain},
        {"checkpoint_one_page_off",
         "one cache hit reports its checkpoint one page deeper than it was computed",
         {"guard_no_violations*"},
         set(FleetSimFalsify::checkpoint_one_page_off)},
        {"crash_resume_in_place",
         "a request of the crashed instance resumes where it was, as if its kv and state had survived",
         {"guard_no_violations", "guard_no_violations_recompute_guard"},
         set(FleetSimFalsify::crash_resume_in_place)},
        {"migration_drops_page",
         "one live migration leaves the request's last kv page behind",
         {"migration_lost_nothing*"},
         set(FleetSimFalsify::migration_drops_page),
         drain},
        {"migration_drops_state",
         "one live migration arrives without the request's state",
         {"migration_lost_nothing*"},
         set(FleetSimFalsify::migration_drops_state),
         drain},
        {"migration_lost_counter",
         "the drain's lost-work counter is one token high",
         {"migration_lost_nothing*"},
         set(FleetSimFalsify::migration_lost_counter),
         drain},
    };
}

// Its own, and the shared fleet checks' on the crash and on the drain (whose runs report their own
// tagged copies of the shared checks).
std::vector<Falsifier<FaultsParams>> all_faults_falsifiers() {
    // The engines run recompute recovery only, without the comparison of every recovery.
    // The host tier's and disaggregation's shared checks too (module 11's parameters, declared here).
    auto all = with_fleet_falsifiers(faults_falsifiers(), &FaultsParams::sim_falsify, {}, true,
                                     {{"recovery", "recompute"}, {"compare", "0"}}, true);
    for (Falsifier<FaultsParams>& f :
         with_fleet_falsifiers<FaultsParams>({}, &FaultsParams::sim_falsify, drain_params(), false)) {
        f.id += "_on_drain";
        all.push_back(std::move(f));
    }
    return all;
}

}  // namespace

ParamList<FaultsParams> faults_params() {
    ParamList<FaultsParams> l;
    fault_params(l);
    l.group(&FaultsParams::workload,
            [](ParamList<WorkloadSpec>& w) { workload_params(w, fleet_workload_seed()); });
    fleet_load_param(l, &FaultsParams::load);
    l.group(&FaultsParams::router, fleet_router_params);
    l.group(&FaultsParams::cache, fleet_cache_params);
    l.group(&FaultsParams::instances, fleet_instance_params);
    l.group(&FaultsParams::cost, fleet_cost_params);
    l.group(&FaultsParams::pd, fleet_pd_params);
    l.group(&FaultsParams::host, fleet_host_params);
    return l;
}

void validate_faults(const FaultsParams& p, Issues& issues) {
    validate_workload(p.workload, issues);
    validate_fleet_groups(p.router, p.cache, p.instances, p.cost, issues);
    if (p.fault_instance >= p.instances.instances)
        issues.error(p.fault_instance, "instance " + std::to_string(p.fault_instance) + " does not exist (" +
                                           std::to_string(p.instances.instances) + " instances)");
    if (p.instances.instances < 2)
        issues.error(p.instances.instances, "a fault needs a second instance to recover on");
    if (p.fault_instance < p.instances.instances) {  // the configuration with its fault
        FleetConfig c = faults_config(p);
        c.faults = {{p.fault, p.fault_instance, 0, 0}};
        validate_host_tier(p.host, c, issues);
        validate_pd(p.pd, c, issues);
    }
    if (p.cache.engine == CacheEngine::ideal) return;
    // The engines' rules (core/fleet/fleet_engine.h) place the states as the chunks run: nothing is
    // planned for the host tier or a migration to move, and an engine always resumes at a state.
    const std::string name = std::string("engine=") + cache_engine_id(p.cache.engine);
    if (p.recovery != Recovery::recompute)
        issues.error(p.recovery, name +
                                     " runs with recovery=recompute only: host tier replication and "
                                     "live migration move the ideal policy's planned checkpoints");
    if (!p.guard) issues.error(p.guard, name + " resumes only at a state: the guard cannot be off");
    if (p.compare)
        issues.error(p.compare, name +
                                    ": compare runs every recovery and the guard off, which the engines "
                                    "do not offer (compare=0)");
}

Experiment make_faults_experiment() {
    return make_experiment(Module<FaultsParams>{
        .number = 13,
        .id = "faults",
        .title = "Faults, recovery and consistency",
        .component = "fleet scheduling",
        .purpose = "An instance crashes or drains mid-run: lost work, recompute, latency spike and time to "
                   "recover under three recoveries, and how many requests would resume on a state that does "
                   "not match their KV without a consistency guard.",
        .params = faults_params(),
        .validate = validate_faults,
        .estimate = estimate_faults,
        .start = start_faults,
        .data_files = [](const FaultsParams& p) { return workload_data_files(p.workload); },
        .live = false,
        .falsifiers = all_faults_falsifiers()});
}

K3_REGISTER_EXPERIMENT(make_faults_experiment);

}  // namespace k3
