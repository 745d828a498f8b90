#include "core/fleet/workload_tenants.h"

#include <algorithm>

namespace k3 {

namespace {
Workload tenant_part(const TenantSpec& t, uint32_t sessions, double rate, double t0_ms, uint64_t seed,
                     uint32_t tenant) {
    ChatConfig c;
    c.sessions = sessions;
    c.session_rate_per_s = rate;
    c.system_prompts = 1;
    c.system_len = t.system_len;
    c.user_len_mean = t.user_len_mean;
    c.output_len_mean = t.output_len_mean;
    c.min_turns = t.min_turns;
    c.max_turns = t.max_turns;
    c.think_ms_mean = t.think_ms_mean;
    c.seed = seed;
    Workload w = chat_workload(c);
    for (Request& r : w.requests) {
        r.arrival_ms += t0_ms;
        r.tenant = tenant;
    }
    return w;
}
}  // namespace

Workload tenant_workload(const std::vector<TenantSpec>& tenants, double duration_s, uint64_t seed,
                         const std::vector<bool>& include) {
    std::vector<Workload> parts;
    for (uint32_t i = 0; i < tenants.size(); ++i) {
        if (i < include.size() && !include[i]) continue;
        const TenantSpec& t = tenants[i];
        const uint64_t s = mix64(seed * 0x9e3779b97f4a7c15ull + i);
        const uint32_t n = uint32_t(std::max(0.0, t.sessions_per_s * duration_s + 0.5));
        if (n > 0) parts.push_back(tenant_part(t, n, t.sessions_per_s, 0, s, i));
        if (t.burst_factor > 1 && t.burst_s > 0) {
            // The extra sessions of the burst: (factor - 1) x the rate over the burst window.
            const double extra = t.sessions_per_s * (t.burst_factor - 1);
            const uint32_t m = uint32_t(std::max(0.0, extra * t.burst_s + 0.5));
            if (m > 0) parts.push_back(tenant_part(t, m, extra, t.burst_start_s * 1000.0, mix64(s + 1), i));
        }
    }
    Workload w = merge_workloads(std::move(parts), "tenants");
    return w;
}

}  // namespace k3
