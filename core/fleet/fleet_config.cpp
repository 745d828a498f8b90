#include "core/fleet/fleet_config.h"

#include "core/base/numfmt.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {
template <class E>
std::optional<E> parse_in(const std::vector<std::string>& ids, std::string_view s) {
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == s) return E(i);
    return std::nullopt;
}
}  // namespace

const std::vector<std::string>& router_ids() {
    static const std::vector<std::string> v = {"round_robin", "least_loaded", "p2c",
                                               "prefix",      "state_aware",  "session"};
    return v;
}
const std::vector<std::string>& router_labels() {
    static const std::vector<std::string> v = {"round robin",
                                               "least loaded",
                                               "power of two choices",
                                               "prefix affinity (KV-visible, SGLang cache_aware)",
                                               "state-aware affinity (checkpoint depth)",
                                               "session hashing, bounded load"};
    return v;
}
const char* router_id(RouterKind k) { return router_ids()[size_t(k)].c_str(); }
std::optional<RouterKind> parse_router(std::string_view s) { return parse_in<RouterKind>(router_ids(), s); }

const std::vector<std::string>& queue_policy_ids() {
    static const std::vector<std::string> v = {"fcfs", "token_bucket", "drr"};
    return v;
}
const std::vector<std::string>& queue_policy_labels() {
    static const std::vector<std::string> v = {"first come first served (no isolation)",
                                               "token buckets per tenant",
                                               "deficit round robin on uncached tokens"};
    return v;
}
const char* queue_policy_id(QueuePolicy q) { return queue_policy_ids()[size_t(q)].c_str(); }
std::optional<QueuePolicy> parse_queue_policy(std::string_view s) {
    return parse_in<QueuePolicy>(queue_policy_ids(), s);
}

const std::vector<std::string>& recovery_ids() {
    static const std::vector<std::string> v = {"recompute", "host_tier", "migrate"};
    return v;
}
const std::vector<std::string>& recovery_labels() {
    static const std::vector<std::string> v = {"drop and recompute elsewhere",
                                               "checkpoints replicated to a host tier",
                                               "live migration on drain (+ host tier on crash)"};
    return v;
}
std::optional<Recovery> parse_recovery(std::string_view s) { return parse_in<Recovery>(recovery_ids(), s); }

MemoryPlan memory_plan(const FleetConfig& c) {
    const MemoryAccount a = account_memory(c.model);
    MemoryPlan m;
    m.device = c.hardware.mem_bytes * double(c.gpus);
    m.weights = 2.0 * c.model.total_params;
    m.working = double(c.working_bytes);
    m.cache_kv = double(c.cache.kv_capacity_tokens) * double(a.kv_bytes_per_token);
    m.cache_states = double(c.cache.state_capacity) * double(a.state_bytes);
    m.cache_bounded = c.cache.kv_capacity_tokens > 0 && c.cache.state_capacity > 0;
    return m;
}

std::string check_fleet_config(const FleetConfig& c) {
    if (c.instances == 0) return "at least one instance";
    if (!(c.model.active_params > 0) || !(c.model.total_params > 0))
        return "model " + c.model.id + " has no parameter counts: the roofline needs a published preset";
    if (c.max_running == 0 || c.max_batch_tokens == 0 || c.max_prefills == 0)
        return "batching limits must be positive";
    if (c.cache.page_size == 0 || c.page_tokens == 0) return "page sizes must be positive";
    if (c.policy.interval == 0 || c.policy.interval % c.cache.page_size != 0)
        return "checkpoint interval " + std::to_string(c.policy.interval) +
               " is not a multiple of the page size " + std::to_string(c.cache.page_size);
    for (const FaultSpec& f : c.faults)
        if (f.instance >= c.instances)
            return "fault on instance " + std::to_string(f.instance) + " of " + std::to_string(c.instances);
    if (!(c.load > 0)) return "load multiplier must be positive";
    if ((c.recovery != Recovery::recompute || c.migration_move != MigrationMove::everything) &&
        !(c.link.bytes_per_s > 0))
        return "the recovery needs a link with a positive bandwidth";
    return {};
}

}  // namespace k3
