// Where a request leaves state checkpoints (placement) and which ones the tree keeps afterwards
// (retention), after the engines of reference/serving.md §2:
//   interval      a state at every multiple of `interval` (a multiple of the kernel chunk, so a resume
//                 is bitwise exact): SGLang's chunk-end tracking, vLLM's block boundaries
//   end           only at the end of each request (SGLang no_buffer's request end, llama.cpp)
//   interval_end  both
//   branch        Marconi-style admission: the request end, plus the junction where this request's
//                 KV match runs deeper than its state match (floored to the chunk grid): the next
//                 sibling resumes there (SGLang branching seqlen, vLLM #37898)
//   cap           interval + end + junctions, then at most N states per path: the shallowest
//                 interior ones go first; tail, forks, leaves and locked states stay
//                 (SGLang --mamba-max-states-per-path, #31230)
//   segmented     interval + end + junctions, then one state per N-token segment plus the latest
//                 boundary and the junctions (vLLM prefix_cache_retention_interval, #43447/#47782)
//   spread        interval + end + junctions, then at most N states per path spread evenly along it
//                 (mlx-serve #310: spread checkpoints cover a long prompt at lower cost)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cache/radix_cache.h"

namespace k3 {

enum class PolicyKind : uint8_t { interval, end, interval_end, branch, cap, segmented, spread };

const std::vector<std::string>& policy_ids();
const std::vector<std::string>& policy_labels();
const char* policy_id(PolicyKind k);
std::optional<PolicyKind> parse_policy(std::string_view s);

struct CheckpointPolicy {
    PolicyKind kind = PolicyKind::interval;
    uint32_t interval = 512;             // placement grid (a multiple of chunk and of the page size)
    uint32_t chunk = 64;                 // kernel chunk: junctions are floored to lcm(chunk, page)
    uint32_t max_states_per_path = 3;    // cap, spread
    uint32_t retention_interval = 4096;  // segmented

    bool places_interval() const;
    bool places_end() const;
    bool places_junction() const;
};

struct PlannedCheckpoint {
    uint64_t pos = 0;
    CheckpointKind kind = CheckpointKind::interval;
};

// Checkpoints a request leaves when it resumes at state_hit (its state-usable match), had a
// KV-visible match of kv_hit, and is cached up to cache_len (page multiple). Positions are page
// aligned, in (state_hit, cache_len], ascending, one per position (junction > end > interval).
std::vector<PlannedCheckpoint> plan_checkpoints(const CheckpointPolicy& p, uint32_t page_size,
                                                uint64_t cache_len, uint64_t state_hit, uint64_t kv_hit);

// Applies the policy's retention to the cached path of q[0, len) right after it was inserted.
// Returns the number of states dropped (tombstoned).
uint32_t apply_retention(const CheckpointPolicy& p, RadixCache& cache, const TokenSeq& q, uint64_t len);

// Which states on a path retention keeps (true = keep), given the path's states shallowest first.
// Separate from apply_retention so that the rule can be tested on its own.
std::vector<bool> retention_keep(const CheckpointPolicy& p, const std::vector<RadixCache::PathState>& states);

}  // namespace k3
