// Module 12 `tenants`: the tenants' workload with and without the bursting tenant, simulated under
// the chosen mechanism, without isolation and under every other mechanism with quotas.
#include <algorithm>
#include <cmath>

#include "core/fleet/fleet_cost.h"
#include "core/fleet/workload_tenants.h"
#include "core/modules/shared/fleet_estimate.h"
#include "core/modules/tenants/tenants.h"

namespace k3 {

namespace {

std::vector<TenantSpec> tenant_specs(const TenantsParams& p) {
    std::vector<TenantSpec> v(p.tenants);
    for (size_t i = 0; i < v.size(); ++i) {
        v[i].sessions_per_s = p.sessions_per_s;
        v[i].output_len_mean = p.output_len;
        v[i].system_len = 1024 + 512 * uint32_t(i % 4);
    }
    v[0].user_len_mean = p.noisy_user_len;
    v[0].burst_factor = p.burst_factor;
    v[0].burst_start_s = p.burst_start_s;
    v[0].burst_s = p.burst_s;
    return v;
}

FleetConfig tenants_config(const TenantsParams& p) {
    FleetConfig c = fleet_config(p.router, p.cache, p.instances, p.cost);
    c.seed = p.seed;
    c.falsify = p.sim_falsify;
    c.tenants.assign(p.tenants, TenantConfig{});
    c.drr_quantum_tokens = p.drr_quantum;
    const CostModel cm(c);
    c.bucket_rate_tokens_per_s =
        p.bucket_share * double(c.instances) * cm.prefill_tokens_per_s(c.max_batch_tokens, 4096);
    return c;
}

// The well-behaved tenants alone: the same specs and seed without tenant 0 (tenant 1 from another seed
// when falsified).
Workload solo_workload(const TenantsParams& p, const std::vector<TenantSpec>& specs, uint64_t seed,
                       bool falsify) {
    std::vector<bool> well_behaved(specs.size(), true);
    well_behaved[0] = false;
    if (!falsify) return tenant_workload(specs, p.duration_s, seed, well_behaved);
    std::vector<bool> tenant1(specs.size(), false);
    tenant1[1] = true;
    well_behaved[1] = false;
    std::vector<Workload> parts;
    parts.push_back(tenant_workload(specs, p.duration_s, seed + 1, tenant1));
    parts.push_back(tenant_workload(specs, p.duration_s, seed, well_behaved));
    return merge_workloads(std::move(parts), "tenants");
}

// The configuration of a claim run of `role` on `seed` (isolated as this run, alone, none).
FleetConfig claim_config(const TenantsParams& p, FleetConfig c, uint64_t seed, ClaimRole role) {
    c.seed = seed;
    c.queue = role == ClaimRole::none ? QueuePolicy::fcfs : p.mechanism;
    c.quotas = role != ClaimRole::none && p.quotas &&
               !(role == ClaimRole::isolated && p.falsify == TenantsFalsify::quotas_off);
    return c;
}

// The claim's three runs on each seed after the run's own; none when a shared fleet check is
// falsified (those checks read this seed's runs only).
void add_claim_runs(const TenantsParams& p, const std::vector<TenantSpec>& specs, TenantsResult& t) {
    if (p.sim_falsify != FleetSimFalsify::none) return;
    for (uint64_t k = 1; k < kClaimSeeds; ++k) {
        const uint64_t seed = p.seed + k;
        auto all = std::make_shared<const Workload>(tenant_workload(specs, p.duration_s, seed));
        auto solo = std::make_shared<const Workload>(solo_workload(p, specs, seed, false));
        for (ClaimRole role : {ClaimRole::isolated, ClaimRole::solo, ClaimRole::none})
            t.claim.push_back({seed, role,
                               std::make_unique<FleetSim>(role == ClaimRole::solo ? solo : all,
                                                          claim_config(p, t.config, seed, role))});
    }
}

// The runs on the run's own seed, in report order: this run, the solo run, no isolation, then every
// other mechanism with quotas.
struct RunPlan {
    std::string label;
    RunTag tag;
    QueuePolicy queue;
    bool quota, solo, main;
};
std::vector<RunPlan> run_plans(const TenantsParams& p) {
    std::vector<RunPlan> v;
    v.push_back(
        {"this run", {}, p.mechanism, p.quotas && p.falsify != TenantsFalsify::quotas_off, false, true});
    v.push_back({"well-behaved tenants alone",
                 {"well-behaved tenants alone", "solo"},
                 p.mechanism,
                 p.quotas,
                 true,
                 false});
    v.push_back({"no isolation (FCFS, shared cache)",
                 {"no isolation (FCFS, shared cache)", "no_isolation"},
                 QueuePolicy::fcfs,
                 false,
                 false,
                 false});
    for (size_t k = 0; k < queue_policy_ids().size(); ++k) {
        const QueuePolicy q = QueuePolicy(k);
        if ((q == p.mechanism && p.quotas) || (q == QueuePolicy::fcfs && !p.quotas)) continue;
        const std::string label = std::string(queue_policy_labels()[k]) + ", cache quotas";
        v.push_back({label, {label, queue_policy_ids()[k] + "_quotas"}, q, true, false, false});
    }
    return v;
}

class TenantsRun final : public FleetModuleRun<TenantsResult> {
  public:
    TenantsRun(const TenantsParams& p, const Params& raw) : FleetModuleRun("tenants", raw) {
        add_step("generating tenants", 1, [this, p] { result_ = setup_tenants(p); });
        add_simulations("simulating", 10, &TenantsResult::runs);
        add_simulations("the claim over seeds", 20, &TenantsResult::claim);
        add_report([p](const TenantsResult& t, Report& r) { report_tenants(p, t, r); });
    }
};

}  // namespace

RequestSummary TenantsResult::well_behaved(const FleetSim& s) const {
    return summarize_requests(s.outcomes(),
                              [this](const RequestOutcome& o) { return o.tenant != 0 && in_burst(o); });
}

RequestSummary TenantsResult::bursting(const FleetSim& s) const {
    return summarize_requests(s.outcomes(),
                              [this](const RequestOutcome& o) { return o.tenant == 0 && in_burst(o); });
}

std::vector<double> TenantsResult::well_behaved_ttfts(const FleetSim& s) const {
    std::vector<double> v;
    for (const RequestOutcome& o : s.outcomes())
        if (o.tenant != 0 && in_burst(o) && o.completed) v.push_back(o.ttft_ms());
    return v;
}

std::vector<double> TenantsResult::burst_delay_over_bound(const FleetSim& run, const FleetSim& solo) const {
    // A request that never got its first token waited at least until the run's last event.
    double end = 0;
    for (const RequestOutcome& o : run.outcomes()) end = std::max({end, o.first_token_ms, o.finish_ms});
    std::vector<double> v;
    for_each_solo_pair(run, solo, [&](size_t here, size_t alone_at) {
        const RequestOutcome &o = run.outcomes()[here], &alone = solo.outcomes()[alone_at];
        if (!in_burst(o) || alone.first_token_ms < 0) return;
        const double first = o.first_token_ms < 0 ? end : o.first_token_ms;
        v.push_back((first - o.arrival_ms - alone.ttft_ms()) / burst_delay_bound_ms(run, o));
    });
    return v;
}

void for_each_solo_pair(const FleetSim& run, const FleetSim& solo,
                        const std::function<void(size_t here, size_t alone)>& f) {
    size_t j = 0;
    for (size_t i = 0; i < run.outcomes().size() && j < solo.outcomes().size(); ++i)
        if (run.outcomes()[i].tenant != 0) f(i, j++);
}

double burst_delay_bound_ms(const FleetSim& run, const RequestOutcome& o) {
    const FleetConfig& c = run.config();
    const double share = std::max(1u, c.max_batch_tokens / std::max(1u, c.max_prefills));
    const double chunks = std::ceil(double(o.prompt - std::min<uint64_t>(o.state_hit, o.prompt)) / share);
    double step = 0;
    for (size_t k = 0; k < run.instance_stats().size(); ++k)
        if (o.instance < 0 || size_t(o.instance) == k)
            step = std::max(step, run.instance_stats()[k].longest_step_ms);
    return (1 + chunks) * step;
}

const FleetSim& TenantsResult::claim_sim(uint64_t k, ClaimRole role) const {
    if (k == 0) return *runs[size_t(role)].sim;
    return *claim[size_t((k - 1) * 3 + uint64_t(role))].sim;
}

TenantsResult setup_tenants(const TenantsParams& p) {
    TenantsResult t;
    const std::vector<TenantSpec> specs = tenant_specs(p);
    t.all = std::make_shared<const Workload>(tenant_workload(specs, p.duration_s, p.seed));
    t.solo = std::make_shared<const Workload>(
        solo_workload(p, specs, p.seed, p.falsify == TenantsFalsify::solo_seed));
    t.burst_from_ms = p.burst_start_s * 1000.0;
    t.burst_to_ms = t.burst_from_ms + p.burst_s * 1000.0;
    t.config = tenants_config(p);
    for (RunPlan& x : run_plans(p)) {
        FleetConfig c = t.config;
        c.queue = x.queue;
        c.quotas = x.quota;
        t.runs.push_back({std::move(x.label), std::move(x.tag), x.queue, x.quota, x.solo, x.main,
                          std::make_unique<FleetSim>(x.solo ? t.solo : t.all, c)});
    }
    t.runs[0].quota = p.quotas;  // what the parameters asked for (the table's label)
    if (const std::string& e = t.runs[0].sim->error(); !e.empty()) {
        t.refusal = Refusal{"fleet_config_accepted", "Fleet configuration accepted", e};
        return t;
    }
    add_claim_runs(p, specs, t);
    return t;
}

RunEstimate estimate_tenants(const TenantsParams& p) {
    const Workload all = tenant_workload(tenant_specs(p), p.duration_s, p.seed);
    const FleetConfig base = tenants_config(p);
    std::vector<FleetConfig> sims;
    for (const RunPlan& x : run_plans(p)) {
        sims.push_back(base);
        sims.back().queue = x.queue;
        sims.back().quotas = x.quota;
    }
    // The other seeds' workloads are drawn from the same distribution: costed as this seed's.
    if (p.sim_falsify == FleetSimFalsify::none)
        for (uint64_t k = 1; k < kClaimSeeds; ++k)
            for (ClaimRole role : {ClaimRole::isolated, ClaimRole::solo, ClaimRole::none})
                sims.push_back(claim_config(p, base, p.seed + k, role));
    return estimate_fleet_sims(all, sims, p.router, p.cache, p.instances, &p.sessions_per_s);
}

std::vector<TenantShare> tenant_shares(const TenantsResult& t) {
    const FleetSim& s = *t.runs[0].sim;
    const size_t n = t.config.tenants.size();
    std::vector<double> demand(n, 0), served(n, 0), weight(n, 1);
    for (const RequestOutcome& o : s.outcomes()) {
        const double tokens = double(o.prompt) + double(o.output);
        if (t.in_burst(o)) demand[o.tenant] += tokens;
        if (o.completed && o.finish_ms >= t.burst_from_ms && o.finish_ms < t.burst_to_ms)
            served[o.tenant] += tokens;
    }
    double total_served = 0;
    for (double x : served) total_served += x;
    const std::vector<double> fair = max_min_fair_shares(total_served, demand, weight);
    std::vector<TenantShare> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = {served[i], fair[i]};
    return out;
}

std::unique_ptr<Run> start_tenants(const TenantsParams& p, const Params& raw) {
    return std::make_unique<TenantsRun>(p, raw);
}

}  // namespace k3
