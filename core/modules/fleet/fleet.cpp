// Module 11 `fleet`: its parameters, validation and declaration.
#include "core/modules/fleet/fleet.h"

#include "core/experiments/registry.h"
#include "core/modules/shared/fleet_estimate.h"
#include "core/modules/shared/fleet_falsifiers.h"

namespace k3 {

namespace {

// The one-instance Mooncake run, where the module's own checks appear.
const std::vector<std::pair<std::string, std::string>> kOneInstanceMooncake = {{"trace", "mooncake"},
                                                                               {"instances", "1"},
                                                                               {"state_capacity", "0"},
                                                                               {"compare_routers", "0"},
                                                                               {"compare_no_reuse", "0"}};

// The engine comparison (fleet_engine_report.h): SGLang's rules on the bundled trace, one instance that
// runs one request at a time (max_running=1: the trace's arrivals come in buckets of about 3 s, so no
// load multiplier separates them), unbounded cache.
const std::vector<std::pair<std::string, std::string>> kEngineSequential = {
    {"trace", "mooncake"},    {"engine", "sglang"},      {"instances", "1"},
    {"max_running", "1"},     {"state_capacity", "0"},   {"kv_capacity_tokens", "0"},
    {"compare_routers", "0"}, {"compare_no_reuse", "0"}, {"unbounded_memory", "1"}};

// The deployed routers' checks (fleet_router_checks.h), on the routers compared (a smaller workload).
Falsifier<FleetParams> router_falsifier(const char* id, const char* does, const char* keys, FleetSimFalsify f,
                                        const char* delay = "0") {
    return {id,
            does,
            {keys},
            [f](FleetParams& p) { p.sim_falsify = f; },
            {{"kv_event_delay_s", delay}, {"sessions", "24"}, {"compare_no_reuse", "0"}}};
}

std::vector<Falsifier<FleetParams>> fleet_falsifiers() {
    return {{"wrong_interval",
             "the simulation checkpoints at twice the interval the block-id count assumes",
             {"one_instance_hits_match_block_ids", "mooncake_one_instance_hits"},
             [](FleetParams& p) { p.falsify = FleetFalsify::wrong_interval; },
             kOneInstanceMooncake},
            router_falsifier("approx_misinsert",
                             "one request's prompt goes into another worker's approximate tree",
                             "approx_tree_holds_routed*", FleetSimFalsify::approx_misinsert),
            router_falsifier("events_early", "KV events reach the router's view as soon as they are emitted",
                             "kv_events_respect_delay*", FleetSimFalsify::events_early, "0.5"),
            router_falsifier("events_lose_first_block", "every stored KV event loses its first block",
                             "kv_events_match_tree_at_zero_delay*", FleetSimFalsify::events_lose_first_block),
            router_falsifier("cost_not_minimum", "one cost decision picks a worker above the minimum cost",
                             "kv_cost_picks_minimum*", FleetSimFalsify::cost_not_minimum),
            {"engine_no_branching",
             "engine=sglang: the branching point is never tracked (the engines.md driver's ablation)",
             {"engine_matches_replay"},
             [](FleetParams& p) { p.sim_falsify = FleetSimFalsify::engine_no_branching; },
             kEngineSequential}};
}

}  // namespace

ParamList<FleetParams> fleet_params() {
    ParamList<FleetParams> l;
    l.group(&FleetParams::workload,
            [](ParamList<WorkloadSpec>& w) { workload_params(w, fleet_workload_seed()); });
    fleet_load_param(l, &FleetParams::load);
    l.group(&FleetParams::router, fleet_router_params);
    l.group(&FleetParams::cache, fleet_cache_params);
    l.group(&FleetParams::instances, fleet_instance_params);
    l.group(&FleetParams::cost, fleet_cost_params);
    l.group(&FleetParams::pd, [](ParamList<FleetPdParams>& g) {
        fleet_pd_params(g);
        fleet_pd_slo_params(g);
    });
    l.group(&FleetParams::host, fleet_host_params);
    l.flag(&FleetParams::compare_routers, "compare_routers", "Compare all routers").in_group("Run");
    l.flag(&FleetParams::compare_no_reuse, "compare_no_reuse", "Run without prefix reuse too")
        .in_group("Run")
        .describe("Runs the same workload with the prefix cache off: the cost of serving it without reuse.");
    return l;
}

void validate_fleet(const FleetParams& p, Issues& issues) {
    validate_workload(p.workload, issues);
    validate_fleet_groups(p.router, p.cache, p.instances, p.cost, issues);
    const FleetConfig c = fleet_module_config(p);
    validate_host_tier(p.host, c, issues);
    validate_pd(p.pd, c, issues);
}

// Its simulations (fleet_sim_configs) on its workload.
RunEstimate estimate_fleet(const FleetParams& p) {
    const LoadedWorkload lw = load_workload(p.workload);
    if (!lw.workload) return {};  // validate_workload refused it
    const void* size = p.workload.is_synthetic() ? static_cast<const void*>(&p.workload.sessions)
                                                 : static_cast<const void*>(&p.workload.trace);
    return estimate_fleet_sims(*lw.workload, fleet_sim_configs(p), p.router, p.cache, p.instances, size);
}

Experiment make_fleet_experiment() {
    return make_experiment(Module<FleetParams>{
        .number = 11,
        .id = "fleet",
        .title = "Fleet routing and instance affinity",
        .component = "fleet scheduling",
        .purpose =
            "Route requests across instances that each cache prefixes with state checkpoints: hit rates "
            "as the router sees them and as the engine can use them, latency, throughput and cost "
            "(roofline estimates).",
        .params = fleet_params(),
        .validate = validate_fleet,
        .estimate = estimate_fleet,
        .start = start_fleet,
        .data_files = [](const FleetParams& p) { return workload_data_files(p.workload); },
        .live = false,
        .headlines =
            {
                {"Token hit the prefix-affinity router sees (KV-visible) above what the engines can use "
                 "(state-usable): 4 instances, synthetic mix",
                 {},
                 "hit_gap"},
            },
        .falsifiers =
            with_fleet_falsifiers(fleet_falsifiers(), &FleetParams::sim_falsify, {}, true, {}, true)});
}

K3_REGISTER_EXPERIMENT(make_fleet_experiment);

}  // namespace k3
