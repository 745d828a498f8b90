// Module 12 `tenants`: its parameters, validation and declaration.
#include "core/modules/tenants/tenants.h"

#include "core/experiments/registry.h"
#include "core/modules/shared/fleet_falsifiers.h"

namespace k3 {

namespace {

void tenant_params(ParamList<TenantsParams>& l) {
    using P = TenantsParams;
    auto t = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Tenants"); };
    t(l.integer(&P::tenants, "tenants", "Tenants", "", 2, 8))
        .describe("Tenant 0 bursts; the others send a steady stream of chat sessions.");
    t(l.choice(&P::mechanism, "mechanism", "Isolation mechanism",
               choices_from<QueuePolicy>(queue_policy_ids(), queue_policy_labels(), parse_queue_policy)))
        .describe("How each instance orders its waiting requests (How it works).");
    t(l.flag(&P::quotas, "quotas", "Per-tenant quotas"));
    t(l.real(&P::sessions_per_s, "sessions_per_s", "Sessions per tenant", "sessions/s", 0.01, 20).log())
        .describe("Session starts per second of every tenant outside the burst.");
    t(l.real(&P::duration_s, "duration_s", "Duration", "s", 10, 3600).log())
        .describe("Sessions start during this time (turns may run past it).");
    t(l.real(&P::burst_factor, "burst_factor", "Burst factor", "x", 1, 100).log())
        .describe("Tenant 0 starts sessions this many times as often during the burst.");
    t(l.real(&P::burst_start_s, "burst_start_s", "Burst start", "s", 0, 3600))
        .describe("Simulated time at which tenant 0 starts bursting.");
    t(l.real(&P::burst_s, "burst_s", "Burst length", "s", 0, 3600))
        .describe("How long tenant 0 keeps bursting.");
    t(l.real(&P::noisy_user_len, "noisy_user_len", "Tenant 0 message length", "tokens", 16, 65536).log())
        .describe("Mean user-message length of tenant 0 (long documents); the others use 400.");
    t(l.real(&P::output_len, "output_len", "Output length", "tokens", 1, 8192).log())
        .describe("Mean output length of every tenant.");
    t(l.real(&P::bucket_share, "bucket_share", "Token-bucket rate", "fraction", 0.05, 4))
        .active_when("mechanism", "token_bucket");
    t(l.real(&P::drr_quantum, "drr_quantum", "DRR quantum", "tokens", 256, 1e6).log())
        .active_when("mechanism", "drr")
        .describe("Uncached tokens a tenant may admit per round (Dynamo queues on uncached tokens).");
    t(l.seed(&P::seed, "Seed of every tenant's arrivals and request sizes."));
}

std::vector<Falsifier<TenantsParams>> tenants_falsifiers() {
    auto set = [](TenantsFalsify f) { return [f](TenantsParams& p) { p.falsify = f; }; };
    return {
        {"solo_seed",
         "the solo run's tenant 1 is generated from another seed",
         {"solo_same_requests"},
         set(TenantsFalsify::solo_seed)},
        {"quotas_off",
         "this run's quotas are off although the parameters ask for them",
         {"isolation_keeps_slo"},
         set(TenantsFalsify::quotas_off)},
    };
}

}  // namespace

ParamList<TenantsParams> tenants_params() {
    ParamList<TenantsParams> l;
    tenant_params(l);
    l.group(&TenantsParams::router, fleet_router_params);
    l.group(&TenantsParams::cache, fleet_cache_params);
    l.group(&TenantsParams::instances, fleet_instance_params);
    l.group(&TenantsParams::cost, fleet_cost_params);
    return l;
}

void validate_tenants(const TenantsParams& p, Issues& issues) {
    validate_fleet_groups(p.router, p.cache, p.instances, p.cost, issues);
    if (p.burst_start_s >= p.duration_s) issues.error(p.burst_start_s, "the burst starts after the run ends");
    if (!(p.burst_s > 0)) issues.error(p.burst_s, "the burst needs a positive length");
}

Experiment make_tenants_experiment() {
    return make_experiment(Module<TenantsParams>{
        .number = 12,
        .id = "tenants",
        .title = "Budget isolation between tenants",
        .component = "fleet scheduling",
        .purpose = "One tenant bursts with long prompts: do the others notice? FCFS, token buckets, deficit "
                   "round robin on uncached tokens and per-tenant cache quotas, against the well-behaved "
                   "tenants' solo run.",
        .params = tenants_params(),
        .validate = validate_tenants,
        .estimate = estimate_tenants,
        .start = start_tenants,
        .live = false,
        // Not the engine formers' falsifiers: under SGLang's scheduler isolation_keeps_slo does not
        // hold (prefill-first batches; the checks of the formers are proven by fleet and faults).
        .falsifiers = with_fleet_falsifiers(tenants_falsifiers(), &TenantsParams::sim_falsify, {}, false)});
}

K3_REGISTER_EXPERIMENT(make_tenants_experiment);

}  // namespace k3
