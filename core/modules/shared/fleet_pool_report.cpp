// The shared pool of an instance under an engine's rules (core/fleet/fleet_shared_pool.cpp): its
// budget from the device, what it holds, what the running requests evicted from the cache.
#include "core/base/numfmt.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

void report_shared_pool(Report& r, const FleetSim& s, const RunTag& tag) {
    const FleetConfig& c = s.config();
    if (c.engine == CacheEngine::ideal) return;
    const std::string name = tag.name.empty() ? "" : tag.name + ": ";
    const std::string sfx = tag.key.empty() ? "" : "_" + tag.key;
    const SharedPoolPlan p = shared_pool_plan(c);
    const FleetTotals& t = s.totals();
    if (tag.key.empty()) {
        r.scalar("pool_budget_bytes",
                 "One pool per instance: memory_fraction of the GPUs less weights and activations", "B",
                 p.budget);
        r.scalar("pool_activation_bytes", "Activations of a full batch (estimate)", "B", p.activations);
        r.scalar("pool_kv_tokens", "KV tokens the pool holds when nothing else is in it", "tokens",
                 double(s.pool_sizes().empty() ? 0 : s.pool_sizes()[0].kv_tokens));
        r.scalar("pool_state_slots", "States the pool holds when nothing else is in it", "states",
                 double(s.pool_sizes().empty() ? 0 : s.pool_sizes()[0].state_slots));
        r.scalar("cache_kv_evicted_by_allocation",
                 "Cached KV tokens evicted because a request could not allocate", "tokens",
                 double(t.pool_evicted_kv));
        r.scalar("cache_states_evicted_by_allocation",
                 "Cached states evicted because a request could not allocate", "states",
                 double(t.pool_evicted_states));
        r.notes.push_back("One pool per instance (" + std::string(cache_engine_id(c.engine)) + "): " +
                          format_bytes(p.reserved) + " reserved of " + format_bytes(p.device) + ", less " +
                          format_bytes(p.weights) + " of weights and " + format_bytes(p.activations) +
                          " of activations (an estimate of what profiling a full batch finds) leaves " +
                          format_bytes(p.budget) +
                          " for the running requests and the prefix cache together; the cache holds what the "
                          "running requests leave and gives way when they cannot allocate.");
    }
    if (!c.caching) return;  // no cache to crowd out
    r.check("pool_never_overcommitted" + sfx,
            name + "The prefix cache never held more than the shared pool left it", t.pool_overcommits == 0,
            format_grouped(double(t.pool_overcommits)) +
                " times the cache could not be charged to the pool even after evicting all it could (what "
                "leases held); " +
                format_grouped(double(t.pool_evicted_kv)) + " KV tokens and " +
                format_grouped(double(t.pool_evicted_states)) + " states evicted to make room");
}

}  // namespace k3
