// Replays a workload through one instance's prefix cache in metadata mode: requests one after the
// other (no concurrency), each looked up, resumed from its state-usable hit, then cached with the
// policy's checkpoints, with eviction to the configured capacities. Module 5 and its benchmark use
// it; the fleet drives the same per-request steps (core/cache/request_flow.h) from its scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/cache/request_flow.h"
#include "core/fleet/workload.h"

namespace k3 {

struct ReplayConfig {
    CacheConfig cache;
    CheckpointPolicy policy;
    uint64_t state_bytes = 0;         // bytes per checkpoint (accounting preset, after the codec)
    uint64_t kv_bytes_per_token = 0;  // attention KV of all attention layers
    bool record_requests = false;     // keep per-request hits (tests, plots)
};

struct ReplayTotals {
    uint64_t requests = 0;
    uint64_t prompt_tokens = 0;
    uint64_t kv_hit_tokens = 0;      // KV-visible
    uint64_t state_hit_tokens = 0;   // state-usable: what is actually skipped
    uint64_t recomputed_tokens = 0;  // prompt - state-usable hit
    uint64_t gap_requests = 0;       // requests whose KV match ran deeper than their state match
    uint64_t full_hits = 0;          // whole prompt resumed from a state
    uint64_t no_state_hit = 0;       // resumed from scratch
    uint64_t state_over_kv = 0;      // requests with state hit > KV hit (must stay 0)
    uint64_t checkpoints_planned = 0, states_added = 0, states_redundant = 0, retention_dropped = 0;
    uint64_t junctions_planned = 0;
    uint64_t peak_state_bytes = 0, peak_kv_bytes = 0, peak_total_bytes = 0;

    double token_hit_kv() const { return prompt_tokens ? double(kv_hit_tokens) / double(prompt_tokens) : 0; }
    double token_hit_state() const {
        return prompt_tokens ? double(state_hit_tokens) / double(prompt_tokens) : 0;
    }
};

struct RequestHit {
    uint64_t kv_hit = 0, state_hit = 0;
};

class WorkloadReplay {
  public:
    WorkloadReplay(const Workload& w, const ReplayConfig& c);

    // Replays requests until the deadline passes (at least one request per call) or max_requests
    // more are done; returns the fraction done.
    double run(const Deadline* deadline = nullptr, uint64_t max_requests = UINT64_MAX);
    bool done() const { return next_ >= w_.requests.size(); }
    uint64_t processed() const { return next_; }

    const ReplayTotals& totals() const { return t_; }
    const RadixCache& cache() const { return cache_; }
    RadixCache& cache() { return cache_; }
    const std::vector<RequestHit>& hits() const { return hits_; }
    uint64_t kv_bytes_held() const { return cache_.stats().kv_tokens * c_.kv_bytes_per_token; }

  private:
    const Workload& w_;
    ReplayConfig c_;
    RadixCache cache_;
    size_t next_ = 0;
    ReplayTotals t_;
    std::vector<RequestHit> hits_;
};

// Several replays of one workload, run one after the other in slices (the sweeps of modules 5 and 14).
struct ReplayResult {
    std::string label;
    double x = 0;  // what was varied
    ReplayConfig cfg;
    ReplayTotals t;
    CacheStats s;  // the cache at the end of the replay
};

class ReplayQueue {
  public:
    void add(std::string label, double x, const ReplayConfig& c);
    // Replays until the deadline passes (at least one request); returns the fraction of all replays done.
    double step(const Workload& w, const Deadline& d);
    const std::vector<ReplayResult>& results() const { return todo_; }
    bool empty() const { return todo_.empty(); }
    bool done() const { return next_ >= todo_.size(); }

  private:
    std::vector<ReplayResult> todo_;
    size_t next_ = 0;
    std::unique_ptr<WorkloadReplay> cur_;
};

}  // namespace k3
