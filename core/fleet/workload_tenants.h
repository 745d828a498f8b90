// Tenants with their own rates and sizes (module 12): each tenant runs multi-turn chat sessions
// over its own system prompt (chat_workload with the tenant's configuration), and may burst: for a
// while its sessions start `burst_factor` times as often.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fleet/workload.h"

namespace k3 {

struct TenantSpec {
    double sessions_per_s = 0.5;  // session starts (Poisson)
    uint32_t system_len = 2048;
    double user_len_mean = 400;
    double output_len_mean = 200;
    uint32_t min_turns = 1, max_turns = 4;
    double think_ms_mean = 8000;
    // A burst: sessions start burst_factor x as often during [burst_start_s, burst_start_s + burst_s).
    double burst_factor = 1;
    double burst_start_s = 0, burst_s = 0;
};

// Sessions of every tenant over [0, duration_s) (burst sessions on top); Request::tenant is the
// index in `tenants`. Each tenant's requests depend only on its own spec, the seed and its index,
// so leaving a tenant out leaves the others' requests unchanged (a solo run).
Workload tenant_workload(const std::vector<TenantSpec>& tenants, double duration_s, uint64_t seed,
                         const std::vector<bool>& include = {});

}  // namespace k3
