// One request through one prefix cache, in the order a server does it: admit (look up, lock what
// the request resumes from, plan its checkpoints), run, complete (cache its tokens with the planned
// checkpoints, apply retention, unlock, evict to capacity). Workload replay and the fleet use this.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/cache/checkpoint_policy.h"
#include "core/cache/radix_cache.h"

namespace k3 {

struct Admission {
    Lease lease;
    uint64_t prompt_len = 0;
    uint64_t cache_len = 0;  // tokens cached when the request completes (page-floored)
    uint64_t kv_hit = 0;     // KV-visible prefix of the prompt
    uint64_t state_hit = 0;  // state-usable prefix: the request resumes here
    uint64_t recompute = 0;  // prompt tokens to prefill: prompt_len - state_hit
    std::vector<PlannedCheckpoint> plan;
};

// cache_len: tokens of q cached at completion (the prompt, or prompt + output when the output tokens
// are known), at least prompt_len.
Admission admit_request(RadixCache& cache, const CheckpointPolicy& policy, const TokenSeq& q,
                        uint64_t prompt_len, uint64_t cache_len);

struct Completion {
    InsertResult insert;
    uint32_t retention_dropped = 0;
};

// Metadata mode: each planned checkpoint is a state of state_bytes bytes.
Completion complete_request(RadixCache& cache, const CheckpointPolicy& policy, Admission& a,
                            const TokenSeqPtr& q, uint64_t state_bytes);

// Real-state mode: states[i] is the state the request produced at a.plan[i].pos (the model takes
// them during prefill: interval and junction positions are on the chunk grid), pages the KV page ids
// of q[0, a.cache_len) (RadixCache::insert adopts those of the part that was not cached yet). The
// cache owns every state passed from here on.
Completion complete_request(RadixCache& cache, const CheckpointPolicy& policy, Admission& a,
                            const TokenSeqPtr& q, std::span<const CheckpointRef> states,
                            std::span<const uint32_t> pages = {});

}  // namespace k3
