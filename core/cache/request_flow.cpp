#include "core/cache/request_flow.h"

#include <algorithm>

namespace k3 {

Admission admit_request(RadixCache& cache, const CheckpointPolicy& policy, const TokenSeq& q,
                        uint64_t prompt_len, uint64_t cache_len) {
    Admission a;
    a.prompt_len = std::min(prompt_len, q.size());
    const uint64_t P = cache.config().page_size;
    a.cache_len = std::min(std::max(cache_len, a.prompt_len), q.size()) / P * P;
    a.lease = cache.acquire(q, a.prompt_len);
    a.kv_hit = a.lease.match.kv_len;
    a.state_hit = a.lease.match.state_len;
    a.recompute = a.prompt_len - a.state_hit;
    a.plan = plan_checkpoints(policy, cache.config().page_size, a.cache_len, a.state_hit, a.kv_hit);
    return a;
}

Completion complete_request(RadixCache& cache, const CheckpointPolicy& policy, Admission& a,
                            const TokenSeqPtr& q, std::span<const CheckpointRef> states,
                            std::span<const uint32_t> pages) {
    std::vector<NewCheckpoint> cps;
    cps.reserve(a.plan.size());
    for (size_t i = 0; i < a.plan.size() && i < states.size(); ++i)
        cps.push_back({a.plan[i].pos, states[i], a.plan[i].kind});
    Completion c;
    c.insert = cache.insert(q, a.cache_len, std::move(cps), pages);
    c.retention_dropped = apply_retention(policy, cache, *q, a.cache_len);
    cache.release(a.lease);
    cache.enforce_capacity();
    return c;
}

Completion complete_request(RadixCache& cache, const CheckpointPolicy& policy, Admission& a,
                            const TokenSeqPtr& q, uint64_t state_bytes) {
    const std::vector<CheckpointRef> states(a.plan.size(), CheckpointRef{0, state_bytes});
    return complete_request(cache, policy, a, q, states);
}

}  // namespace k3
