// Module 12 `tenants`: budget isolation between tenants. One tenant bursts; the others should not
// notice. Mechanisms: none (FCFS), token buckets, deficit round robin on uncached tokens, per-tenant
// cache quotas. Each run is compared with the well-behaved tenants' solo run.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/experiments/module.h"
#include "core/fleet/fleet_sim.h"
#include "core/modules/shared/fleet_module_run.h"
#include "core/modules/shared/fleet_params.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

// Deliberate corruptions that the module's own checks must catch (k3cli audit-checks); the shared
// fleet checks have theirs (FleetSimFalsify, core/modules/shared/fleet_falsifiers.h).
enum class TenantsFalsify : uint8_t {
    none,
    solo_seed,   // the solo run's tenant 1 is generated from another seed
    quotas_off,  // this run's quotas are off although the parameters ask for them
};

struct TenantsParams {
    uint32_t tenants = 3;
    QueuePolicy mechanism = QueuePolicy::drr;
    bool quotas = true;
    // Of every tenant outside the burst: 0.3, where the steady stream alone keeps the SLO without
    // isolation on the calibrated step model (at 0.4 it is already 2.5 x its solo p99 with no burst).
    double sessions_per_s = 0.3;
    double duration_s = 120;
    double burst_factor = 12, burst_start_s = 30, burst_s = 40;  // tenant 0's burst
    double noisy_user_len = 6000, output_len = 250;              // tokens
    double bucket_share = 0.8;                                   // of the fleet's prefill capacity
    double drr_quantum = 8192;                                   // uncached tokens per round
    uint64_t seed = 1;
    FleetRouterParams router{.router = RouterKind::least_loaded};
    FleetCacheParams cache{.state_capacity = 48, .kv_capacity_tokens = 600000};
    FleetInstanceParams instances{.instances = 2, .max_batch_tokens = 2048};
    FleetCostParams cost;
    TenantsFalsify falsify = TenantsFalsify::none;        // not a declared parameter
    FleetSimFalsify sim_falsify = FleetSimFalsify::none;  // not a declared parameter
};

// One simulation: this run, the well-behaved tenants alone, or another mechanism on the same workload.
struct TenantRun {
    std::string label;  // in the mechanisms table
    RunTag tag;         // of its checks
    QueuePolicy queue = QueuePolicy::fcfs;
    bool quota = false, solo = false, main = false;
    std::unique_ptr<FleetSim> sim;
};

// The claim is judged over kClaimSeeds workloads, the run's seed and the ones after it: the p99 of a
// burst's well-behaved requests on one seed is nearly their maximum (some tens of requests), so one seed
// decides nothing. Each other seed runs this run's isolation, the solo run and no isolation.
inline constexpr uint64_t kClaimSeeds = 8;
enum class ClaimRole : uint8_t { isolated, solo, none };
struct ClaimRun {
    uint64_t seed = 0;
    ClaimRole role = ClaimRole::isolated;
    std::unique_ptr<FleetSim> sim;
};

struct TenantsResult {
    FleetConfig config;  // every run's, but for the queue policy and the quotas
    std::shared_ptr<const Workload> all, solo;
    double burst_from_ms = 0, burst_to_ms = 0;
    std::optional<Refusal> refusal;
    // This run, the solo run, no isolation (FCFS, shared cache), then every other mechanism with quotas.
    std::vector<TenantRun> runs;
    // The claim's runs on the other seeds (on the run's own seed they are runs[0], [1] and [2]). None
    // when a shared fleet check is falsified: those checks read this seed's runs only.
    std::vector<ClaimRun> claim;

    bool in_burst(const RequestOutcome& o) const {
        return o.arrival_ms >= burst_from_ms && o.arrival_ms < burst_to_ms;
    }
    // The well-behaved tenants' requests that arrived during the burst.
    RequestSummary well_behaved(const FleetSim& s) const;
    // The bursting tenant's requests that arrived during the burst.
    RequestSummary bursting(const FleetSim& s) const;
    // The TTFTs of the well-behaved requests that arrived during the burst and completed.
    std::vector<double> well_behaved_ttfts(const FleetSim& s) const;
    // Each well-behaved request that arrived during the burst and got its first token in the solo run:
    // how much later it got it in `run` than alone, over its delay bound (burst_delay_bound_ms); one
    // that never got it in `run` counts its wait until the run's last event. `run` serves the solo run's
    // requests and tenant 0's.
    std::vector<double> burst_delay_over_bound(const FleetSim& run, const FleetSim& solo) const;
    // The run of `role` on seed number `k` (0: the run's own seed) of the claim, of claim_seeds().
    const FleetSim& claim_sim(uint64_t k, ClaimRole role) const;
    uint64_t claim_seeds() const { return 1 + claim.size() / 3; }
};

// Each well-behaved request of `run` (tenant != 0) with the solo run's request it is, paired in arrival
// order (the solo run serves exactly those requests): f(index in run, index in solo), while both last.
void for_each_solo_pair(const FleetSim& run, const FleetSim& solo,
                        const std::function<void(size_t here, size_t alone)>& f);

// What isolation cannot take away from a request of `run` (it arrived at an instance that may be in the
// middle of a step, and each chunk of its prefill shares a step with other tenants' work): the step in
// progress and one step per chunk, each at the longest step of the instance it ran on. Its chunks are
// its uncached prompt tokens over the share of the token budget each prefill is given first
// (max_batch_tokens / max_prefills).
double burst_delay_bound_ms(const FleetSim& run, const RequestOutcome& o);

// Each tenant's tokens completed during the burst against its max-min fair share (this run).
struct TenantShare {
    double served = 0, fair = 0;
    double served_over_fair() const { return fair > 0 ? served / fair : 1.0; }
};
std::vector<TenantShare> tenant_shares(const TenantsResult& t);

ParamList<TenantsParams> tenants_params();
void validate_tenants(const TenantsParams& p, Issues& issues);
TenantsResult setup_tenants(const TenantsParams& p);
// Its simulations (this seed's runs and the claim's) on this seed's workload (issue 20).
RunEstimate estimate_tenants(const TenantsParams& p);
std::unique_ptr<Run> start_tenants(const TenantsParams& p, const Params& raw);
void report_tenants(const TenantsParams& p, const TenantsResult& t, Report& r);

}  // namespace k3
