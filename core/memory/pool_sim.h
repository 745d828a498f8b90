// A seeded request stream served from one page pool by a small scheduler (module 3 `pool`).
//
// Time is simulated: one step is one scheduler iteration in which every running request decodes
// one token. A request is admitted whole (its prompt's KV and its state slots at once, FCFS, no
// skipping the head of the queue), grows one token per step, and frees everything when done.
// Prefix caching keeps, per shared prefix, one cache entry: the KV of the prefix floored to the
// cache grid plus one state checkpoint at that position (a hybrid hit needs both, serving.md §0).
// Unreferenced entries are evicted LRU when memory is short; when eviction cannot make room for a
// growing request, the most recently admitted request is preempted by recompute (vLLM's default):
// its memory is freed and it re-enters the queue with prompt + generated tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/memory/pool.h"

namespace k3 {

struct PoolWorkload {
    uint64_t seed = 1;
    int requests = 300;
    double arrival_rate = 0.25;               // requests per step (Poisson arrivals)
    int prompt_tokens = 1024;                 // mean of a prompt's own part (uniform in [0.5, 1.5] x mean)
    int output_tokens = 256;                  // mean output length (uniform in [0.5, 1.5] x mean)
    double prefix_share = 0.5;                // share of requests whose prompt starts with a shared prefix
    int prefixes = 6;                         // distinct shared prefixes
    int prefix_min = 256, prefix_max = 4096;  // their lengths, spread geometrically
    double shift_at = 0.5;                    // share of the stream after which prompts change
    double shift_factor = 4;                  // prompt-length multiplier after the shift (1 = no shift)
};

struct SimRequest {
    uint32_t id = 0;
    uint64_t arrival = 0;  // step
    uint32_t prompt = 0;   // tokens, shared prefix included
    uint32_t output = 0;
    int prefix = -1;    // shared prefix index, -1 = none
    uint8_t phase = 0;  // 0 before the mix shift, 1 after
};

std::vector<uint32_t> prefix_lengths(const PoolWorkload& w);
std::vector<SimRequest> make_request_stream(const PoolWorkload& w);

// Owners the simulator uses: request i is owner 1 + i, the cache entry of prefix k is
// kCacheOwnerBase + k.
inline constexpr OwnerId kCacheOwnerBase = OwnerId(1) << 40;
inline bool is_cache_owner(OwnerId o) { return o >= kCacheOwnerBase; }

// Deliberate faults for module 3's falsifiers (k3cli audit-checks); none in every real run. A pool
// damage (PagePool::Damage) strikes at the first step at or after fault_step with two requests running:
// the oldest is the victim, the next the other owner.
enum class PoolSimFault : uint8_t {
    none,
    second_owner,    // PagePool::Damage::second_owner
    page_count,      // PagePool::Damage::page_count
    lost_page,       // PagePool::Damage::lost_page
    leak_request,    // the first request to finish at or after fault_step keeps its pages and slots
    lose_request,    // the first request to arrive at or after fault_step is never queued nor counted
    refuse_fitting,  // the queue's head at fault_step is dropped as if it could never fit
};

struct PoolSimOptions {
    uint32_t cache_grid = 64;      // a cached prefix is a whole number of these tokens (a page multiple)
    int states_per_request = 1;    // working state slots a running request holds
    uint64_t snapshot_step = 0;    // record the pool map at this step
    int audit_every = 16;          // full pool audit every this many steps, doubling every 128 audits
    uint64_t max_steps = 4000000;  // safety stop
    PoolSimFault fault = PoolSimFault::none;  // falsifiers only
    uint64_t fault_step = 0;
};

// What became of one request of the stream.
enum class PoolRequestOutcome : uint8_t { none, finished, dropped };

// A request dropped because it could not fit even with the pool to itself (and the prefix-cache entry
// it reads, if any): the state slots and KV tokens it needed then.
struct PoolDrop {
    uint32_t request = 0;
    uint64_t states = 0, tokens = 0;
};

// The grid a design's prefix cache works in (PoolSimOptions::cache_grid): vLLM caches whole blocks;
// SGLang's static and unified pools the smallest multiple of their page of at least 64 tokens
// (mamba_cache_chunk_size = max(64, page_size) for the page sizes SGLang uses).
uint32_t prefix_cache_grid(const PoolLayout& l);

// One step's occupancy. Bytes by what they hold; they add up with unusable to the budget.
struct PoolSample {
    uint64_t step = 0;
    uint32_t running = 0, waiting = 0;
    uint64_t kv_running = 0, kv_cached = 0;        // filled KV bytes of requests / cache entries
    uint64_t state_running = 0, state_cached = 0;  // state data bytes
    uint64_t padding = 0, kv_unfilled = 0, free = 0;
};

struct PoolSimResult {
    bool completed = false;  // every request finished or was dropped before max_steps
    uint64_t steps = 0;      // makespan
    // dropped: could not be admitted, or could not grow, even with the pool to itself
    uint32_t finished = 0, dropped = 0, preemptions = 0, evictions = 0;
    uint32_t blocked_steps = 0;      // steps whose queue head could not be admitted
    uint32_t blocked_by[5] = {};     // ... by AllocStatus of the last failed allocation
    uint64_t free_at_block_sum = 0;  // free bytes in the pool at those moments (summed)
    // Refusals although the pool's free bytes covered the request's data bytes (its state slots and
    // its prompt's KV): memory free but locked to the other kind, fragmented, or lost to rounding.
    uint32_t refused_with_room = 0;
    uint32_t peak_running = 0;
    double mean_running = 0;
    double mean_wait = 0, mean_latency = 0;         // steps: arrival -> first admission, arrival -> finish
    uint32_t prefix_hits = 0, entries_created = 0;  // hits counted at first admission only
    uint64_t wanted_prefix_tokens = 0, reused_tokens = 0;
    std::vector<uint32_t> hits_by_prefix;
    uint64_t compactions = 0, bytes_moved = 0;
    // Sums over every step (divide by `steps` for time means) and peaks.
    double sum_data = 0, sum_padding = 0, sum_unfilled = 0, sum_free = 0;
    double sum_states_ideal = 0, sum_states_placeable = 0;  // PoolStats::states_if_contiguous / _placeable
    uint64_t peak_data = 0;
    double fragmentation() const {
        return sum_states_ideal > 0 ? 1.0 - sum_states_placeable / sum_states_ideal : 0.0;
    }
    // Steps with only pre-shift (0) or only post-shift (1) requests running; mixed steps in neither.
    struct Phase {
        uint64_t steps = 0;
        double running = 0, data = 0, free = 0, states_ideal = 0, states_placeable = 0;  // sums
        uint32_t refused_by[5] = {};
        uint32_t refused_with_room = 0;
    } phases[2];
    // Evenly strided samples (every step until kMaxSamples, then every 2nd, 4th, ...).
    static constexpr size_t kMaxSamples = 400;
    std::vector<PoolSample> samples;
    uint64_t sample_stride = 1;
    std::vector<MapUnit> snapshot;  // pool map at snapshot_step (empty if the run ended before)
    uint64_t snapshot_step = 0;
    uint32_t audits = 0;
    std::string audit_error;  // first failure, empty if every audit passed
    // Every recorded sample's bytes recounted from the owners' page and slot lists and the pool's
    // free structures (PagePool::free_list_bytes), apart from the running totals the sample shows.
    uint32_t recounts = 0, recount_mismatches = 0;
    std::string recount_error;  // the first mismatch
    // Per request, what became of it (each set once; a second outcome counts in outcome_conflicts).
    std::vector<PoolRequestOutcome> outcomes;
    uint32_t outcome_conflicts = 0;
    std::vector<PoolDrop> drops;
    PoolStats end_stats;  // after the last request and the cache were released
    bool freed_at_end = false;
};

// A simulation that runs in slices (the page stays responsive): call advance() until it returns
// true; the result is the same however the work is sliced. The pool must outlive it.
class PoolSimulation {
  public:
    PoolSimulation(PagePool& pool, std::vector<SimRequest> requests, std::vector<uint32_t> prefix_len,
                   const PoolSimOptions& o);
    ~PoolSimulation();
    bool advance(const Deadline* deadline);  // nullptr: to the end
    double progress() const;                 // share of requests finished or dropped
    const PoolSimResult& result() const;     // final once advance() returned true

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The whole run in one call.
PoolSimResult simulate_pool(PagePool& pool, const std::vector<SimRequest>& requests,
                            const std::vector<uint32_t>& prefix_len, const PoolSimOptions& o);

}  // namespace k3
