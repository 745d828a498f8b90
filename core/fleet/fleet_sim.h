// A discrete-event simulation of a fleet of serving instances of a hybrid model (README's modules
// modules 11-13, reference/serving.md §4-5).
//
// Each instance has
//   - a prefix cache: the radix tree with state checkpoints of core/cache in metadata mode, one per
//     tenant namespace when tenants get cache quotas; requests resume from their state-usable match
//     and leave checkpoints where the policy says, inserted as their prefill chunks complete (as
//     vLLM caches computed blocks and SGLang caches unfinished requests), so a request that arrives
//     while an earlier one is still prefilling sees what is done so far;
//   - working memory: a static-split page pool (core/memory/pool.h, metadata mode) with one working
//     state slot per running request and KV pages for the part of its context it computed itself;
//   - continuous batching with chunked prefill: every iteration decodes one token for each decoding
//     request and fills the rest of a token budget with prefill chunks; when a decoding request
//     needs a KV page and none is free, the most recently admitted request is preempted (vLLM's
//     recompute preemption: its memory is freed and it later resumes from the cache);
//     (that is engine ideal's batching; engines sglang and vllm form batches by their own schedulers,
//     core/fleet/batch_former.h);
//   - an iteration time from the calibrated step model (core/fleet/fleet_cost.h): an estimate.
// Requests arrive, a router (core/fleet/router.h) picks an instance, the instance's wait queue
// (core/fleet/wait_queue.h) orders admission. Faults crash or drain instances; requests move,
// resume from a host tier or migrate; a consistency guard decides where they may resume, and an
// audit that does not consult it checks every resume against its state's own record.
//
// Deterministic: events are ordered by (time, insertion number), every container is a vector or a
// deque iterated in order, randomness comes from k3::Rng seeded from the config, and no figure
// depends on the wall clock. The wall clock only decides where a slice stops.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/cache/request_flow.h"
#include "core/fleet/batch_roofline.h"
#include "core/fleet/event_queue.h"
#include "core/fleet/fleet_config.h"
#include "core/fleet/fleet_cost.h"
#include "core/fleet/fleet_engine.h"
#include "core/fleet/router.h"
#include "core/fleet/spec_decode.h"
#include "core/fleet/timeline_recorder.h"
#include "core/fleet/wait_queue.h"
#include "core/fleet/workload.h"
#include "core/memory/pool.h"

namespace k3 {

class FleetRouterView;

enum class FailReason : uint8_t { none, no_instance, too_large, stalled };
const char* fail_reason_name(FailReason f);

// What happened to one request.
struct RequestOutcome {
    double arrival_ms = 0, first_token_ms = -1, finish_ms = -1;
    uint32_t prompt = 0, output = 0, generated = 0, tenant = 0;
    int32_t instance = -1;  // where it finished (or last ran)
    // Cache hits at its first admission, over its prompt: KV-visible and state-usable.
    uint64_t kv_hit = 0, state_hit = 0;
    // The deepest state-usable match any eligible instance had when the request was first routed.
    uint64_t best_state_hit = 0;
    uint64_t prefill_work = 0;  // context tokens computed, over all attempts
    uint64_t skipped = 0;       // context tokens resumed instead of computed, over all attempts
    // Context tokens computed by attempts that did not complete (preempted, crashed, moved away),
    // logged when each ended: what the work recount of the shared checks adds to the last attempt's.
    uint64_t abandoned_work = 0;
    uint32_t preemptions = 0, moves = 0, violations = 0;
    // Decode steps (verifies, with speculative decoding) and the tokens they yielded, over all attempts.
    uint32_t decode_steps = 0, decode_step_tokens = 0;
    // Prefill/decode disaggregation: its transfers from the prefill stage (more than one when a fault
    // sent it back through that stage): KV tokens and bytes summed over them, the contexts its prefills
    // handed off (summed), and of the last one the position of the state it carried and how long it
    // took from the prefill's end, queueing included.
    uint32_t transfers = 0;
    uint64_t transfer_kv_tokens = 0, transfer_bytes = 0, transfer_context = 0, transfer_state_pos = 0;
    double transfer_ms = -1;
    bool admitted = false, completed = false;
    FailReason failed = FailReason::none;

    double ttft_ms() const { return first_token_ms - arrival_ms; }
    double e2e_ms() const { return finish_ms - arrival_ms; }
    // Time per output token after the first (TPOT); 0 for single-token outputs.
    double tpot_ms() const { return output > 1 ? (finish_ms - first_token_ms) / double(output - 1) : 0; }
};

// One admission of a request on an instance (every attempt, in order): what the recounts of the
// shared checks replay (core/modules/shared/fleet_recount.h).
struct AdmissionRecord {
    uint32_t req = 0, instance = 0;
    uint64_t kv_hit = 0, resume = 0;  // its KV-visible match there and the position it resumed at
    uint32_t generated = 0;           // output tokens it had generated before
    bool carried = false;  // resumed from what it brought along (host tier, migration), not the tree
};

struct InstanceStats {
    double busy_ms = 0, down_ms = 0;
    uint64_t iterations = 0, prefill_tokens = 0, decode_tokens = 0;
    uint64_t routed = 0, admitted = 0, completed = 0, preemptions = 0;
    uint32_t peak_running = 0;
    uint64_t peak_queue = 0;
    // Its longest step (an iteration, or one step of a run of decode steps): no request that arrives
    // waits less than what the step in progress has left (module 12's delay bound).
    double longest_step_ms = 0;
    uint64_t cache_nodes = 0, cache_kv_tokens = 0, cache_states = 0;  // at the end (all namespaces)
    uint64_t cache_kv_evicted = 0, cache_states_evicted = 0;
};

// A live-migrated request's context at the source and at the destination (the migration's own
// record, apart from the fault's counters): what it had computed, what the blob carried, where the
// destination resumed it.
struct MigrationRecord {
    uint32_t request = 0;
    uint64_t computed = 0;    // context computed at the source: its KV and its state sat here
    uint64_t kv_carried = 0;  // KV tokens the blob carried
    uint64_t state_pos = 0;   // position of the state the blob carried (0: none)
    int64_t resumed_at = -1;  // where the destination resumed it (-1: it never resumed)
    // Computed context that survived the move: what the destination could use and did.
    uint64_t kept() const {
        const uint64_t resumed = resumed_at < 0 ? 0 : uint64_t(resumed_at);
        return std::min({computed, kv_carried, state_pos, resumed});
    }
};

// Where a request a fault moved resumed when it first ran again: from scratch or its new instance's
// device cache, from that instance's own host tier (FleetConfig::host), from the fleet-wide remote tier
// (recovery host_tier), or from its live migration's blob.
enum class RecoverySource : uint8_t { recompute, instance_host, remote_tier, migration };

// One fault and what it cost.
struct FaultOutcome {
    FaultSpec spec;
    uint64_t requests_moved = 0;      // running or queued on the instance
    uint64_t running_moved = 0;       // of which had started
    uint64_t lost_tokens = 0;         // computed context that was thrown away
    uint64_t cached_tokens_lost = 0;  // KV tokens its prefix cache held
    uint64_t migrated = 0;            // requests moved live
    uint64_t migrated_bytes = 0;
    uint64_t host_restores = 0;  // requests resumed from the fleet-wide remote tier (recovery host_tier)
    uint64_t host_bytes = 0;
    uint64_t host_tokens_lost = 0;  // KV tokens the crashed instance's own host tier held (FleetConfig::host)
    // Where the moved requests resumed when they first ran again (RecoverySource).
    std::array<uint64_t, 4> resumed_from{};
    // Prefill/decode disaggregation: handoffs the fault cut (their sender or receiver crashed, or their
    // decoder was drained before they arrived), each with the admissions made before it was cut.
    struct CutTransfer {
        uint32_t request = 0;
        uint64_t bytes = 0, admissions_before = 0;
    };
    std::vector<CutTransfer> cut_transfers;
    double drained_ms = -1;                   // drain: when the instance was empty
    double recovered_ms = -1;                 // when the last moved request was running again
    std::vector<MigrationRecord> migrations;  // one per live migration, in order
};

// What a resumed state is, as the request that computed it recorded it: the position it computed
// it at, and whether that request itself had resumed on a mismatched state (then this state is
// wrong too). Checkpoints carry it in their handle, migrations and host-tier restores with the
// request.
struct StateRecord {
    uint64_t pos = 0;  // 0: the zero state
    bool mismatched = false;
};

// An audit of every resume (admission past position 0), whatever the guard decided: the resumed
// state's record against the KV it is paired with. A resume is consistent when the state was
// computed at exactly the position the request continues from and the KV reaches that position.
struct ResumeAudit {
    uint64_t resumes = 0;
    uint64_t mismatched = 0;       // state at another position than the resume, or KV short of it
    uint64_t from_mismatched = 0;  // state at the right position but written after a mismatch
    std::string first;             // the first inconsistent resume, for the check's detail
    uint64_t inconsistent() const { return mismatched + from_mismatched; }
};

struct FleetTotals {
    uint64_t events = 0;
    double end_ms = 0;  // last completion
    // Work ledger, tallied by the iterations (the requests keep their own tallies).
    uint64_t iter_prefill_tokens = 0, iter_decode_tokens = 0, iter_first_tokens = 0;
    uint64_t preemptions = 0;
    uint64_t lost_tokens = 0;  // computed then thrown away (preemptions, crashes)
    // Resumes where KV and state did not sit at the same position (the guard forbids them) and
    // resumes from a checkpoint that such a request had written.
    uint64_t violations = 0, tainted_resumes = 0;
    uint64_t violations_moved = 0;  // of the violations: resumes of requests brought from elsewhere
    uint64_t guard_held_back = 0;   // tokens the guard recomputed because the state was shallower
    uint64_t host_inserts = 0, host_restores = 0;
    // The instances' host tiers in normal serving (FleetConfig::host): writes through and their bytes
    // (KV and states, as the instance holds them), loads back, their bytes and the context tokens they
    // gave resumes beyond the device's.
    uint64_t host_writes = 0, host_write_bytes = 0;
    uint64_t host_loads = 0, host_load_bytes = 0, host_hit_tokens = 0;
    // Where those bytes went, tallied as each transfer ends: written into the host tier, or lost with
    // an instance that crashed meanwhile, or still on the links when the run ended (its records read
    // then); loaded into a request that then queued, or dropped with it.
    uint64_t host_write_arrived_bytes = 0, host_write_lost_bytes = 0, host_write_pending_bytes = 0;
    uint64_t host_load_arrived_bytes = 0, host_load_lost_bytes = 0;
    // Prefill-to-decode transfers: sent (bytes as each left its prefill instance), arrived, and lost
    // (cut by a fault before they arrived).
    uint64_t pd_transfers = 0, pd_bytes_sent = 0, pd_bytes_arrived = 0, pd_bytes_lost = 0, pd_kv_tokens = 0;
    uint64_t gateway_waits = 0;  // requests held because no instance was up
    // The simulated clock against the step time of each iteration's batch recounted request by
    // request (core/fleet/batch_roofline.h): both summed over the iterations that ended, the largest
    // gap of one iteration relative to its recounted time, and the iterations whose gap exceeds the
    // clock's own rounding (each step's end rounded at the event time, and 1e-12 of the time for the
    // two evaluations' orders of summation).
    double clock_ms = 0, roofline_ms = 0, worst_clock_gap = 0;
    uint64_t iterations_timed = 0, clock_gaps = 0;
    // The working pools' state bytes as they held them, read from the pool after every admission:
    // summed over admissions, with the state slots held at those moments, and the most running
    // requests an instance held.
    uint64_t state_admissions = 0, states_held = 0, state_bytes_held = 0;
    uint32_t peak_running = 0;
    // Shared pool (engine sglang / vllm): what allocations evicted from the prefix cache, and the
    // times the cache held more than the pool could charge it even after evicting (0 when sound).
    uint64_t pool_evicted_kv = 0, pool_evicted_states = 0, pool_overcommits = 0;
    // The batch formers (core/fleet/batch_former.h): iterations by what their batch held (a run of
    // decode steps counts its steps), SGLang's retractions (vLLM's preemptions are `preemptions`),
    // and what the engine checks read, tallied from every batch as it was formed: the most requests
    // one batch left with their prefill unfinished, the prefill batches that also decoded, and the
    // non-final chunks (vllm) with those that end where vllm_aligned_split would not.
    uint64_t retractions = 0;
    uint64_t prefill_iterations = 0, decode_iterations = 0, mixed_iterations = 0;
    uint32_t max_partial_in_batch = 0;
    uint64_t batches_formed = 0, nonfinal_chunks = 0, chunks_off_split = 0;
    // When each limit had something to decide: SGLang's running cap reached with requests waiting,
    // prefill batches that ended on a chunked request with requests waiting, vLLM steps whose partial
    // prefills had reached max_partial_prefills when a waiting request would have been partial.
    uint64_t cap_reached = 0, chunked_with_waiting = 0, partial_limit_reached = 0;
    std::string first_off_split;  // the first such chunk, for the check's detail
    // The engine's own counts (engine sglang or vllm, core/fleet/fleet_engine.h), and the admissions
    // made while another request was running on the same instance (0: the requests never overlapped,
    // what the engine comparison needs).
    EngineCounters engine;
    uint64_t overlapped_admissions = 0;
};

// Requests in flight per instance at regular times.
struct LoadSample {
    double t_ms = 0;
    std::vector<uint32_t> in_flight;  // per instance: queued + running
    uint32_t held = 0;                // at the gateway or moving
};

class FleetSim {
  public:
    FleetSim(std::shared_ptr<const Workload> w, const FleetConfig& c);
    ~FleetSim();
    FleetSim(const FleetSim&) = delete;
    FleetSim& operator=(const FleetSim&) = delete;

    // Empty if the simulation can run; else why not (nothing runs).
    const std::string& error() const { return error_; }
    // Advances until the deadline passes (checked every few hundred events) or max_events more
    // events are processed or the run ends; returns progress (finished requests / requests).
    double run(const Deadline* deadline = nullptr, uint64_t max_events = UINT64_MAX);
    bool done() const { return done_; }
    double progress() const;

    const FleetConfig& config() const { return c_; }
    const Router& router() const { return router_; }
    // What a running request holds for its state and how many state slots each instance has.
    const RunningStateSlots& running_slots() const { return slots_; }
    const Workload& workload() const { return *w_; }
    // Instance k's step model (FleetConfig::first_gpus); without an instance, the fleet's main preset.
    const CostModel& cost_model(uint32_t k = UINT32_MAX) const {
        return k < c_.first_gpus.instances ? first_cost_ : cost_;
    }
    // What each instance's working pool held at its (last) start: KV tokens and state slots.
    struct PoolSize {
        uint64_t kv_tokens = 0, state_slots = 0;
    };
    const std::vector<PoolSize>& pool_sizes() const { return pool_sizes_; }
    const std::vector<RequestOutcome>& outcomes() const { return out_; }
    const std::vector<InstanceStats>& instance_stats() const { return stats_; }
    const std::vector<FaultOutcome>& faults() const { return fault_out_; }
    const FleetTotals& totals() const { return t_; }
    const std::vector<LoadSample>& load_samples() const { return samples_; }
    const ResumeAudit& resume_audit() const { return audit_; }
    const std::vector<AdmissionRecord>& admissions() const { return admissions_; }
    // Per-instance lanes (at most config().max_timeline_spans spans): categories
    // timeline_categories(), times in seconds.
    std::vector<TimelineSpan> timeline() const;
    static const std::vector<std::string>& timeline_categories();
    // Audits every cache and pool; "" when consistent. A finished run audits once and then frees its
    // prefix trees and pools (the figures are kept): these report that final state.
    std::string audit() const;
    // Leases still held and pool owners still present (0 and 0 after a finished run).
    uint64_t leases_held() const;
    uint64_t pool_owners() const;

  private:
    struct Live;
    struct Inst;
    struct BatchItem {
        uint32_t req;
        uint32_t chunk;  // prefill tokens; 0 = one decode step
    };
    struct Replication;
    enum AdmitResult { admitted, no_memory, too_large, loading };  // loading: from its host tier first
    struct Hits {  // what a request can resume from on the instance admitting it
        uint64_t kv = 0, state = 0;
        bool tainted_source = false;  // the state comes from a tainted (inconsistent) checkpoint
        StateRecord record;           // the state's own record (the resume audit's input)
    };

    void configure_tenants();
    // ---- events (fleet_sim.cpp) ----
    void handle(const FleetEvent& e);
    void arrive(uint32_t r, double now);
    void route(uint32_t r, double now);
    void enqueue(uint32_t k, uint32_t r, double now, const FleetRouterView* view = nullptr,
                 bool returning = false);
    void reroute(uint32_t r, double now);
    void fail(uint32_t r, FailReason why, double now);
    void crash(uint32_t f, double now);
    void drain(uint32_t f, double now);
    void migrate_running(uint32_t k, double now);
    void go_down(uint32_t k, double now);
    void come_up(uint32_t k, double now);
    void sample(double now);
    void replicate(uint32_t k, uint32_t r, uint64_t len, double now);
    void write_through(uint32_t k, uint32_t r, uint64_t len, double now);
    bool load_from_host(uint32_t k, uint32_t r, double now);
    void insert_loaded(uint32_t k, uint32_t r, double now);
    // ---- prefill/decode disaggregation (fleet_pd.cpp) ----
    bool is_prefill(uint32_t k) const { return k < c_.pd.prefill_instances; }
    bool caching_at(uint32_t k) const {
        return c_.caching && (is_prefill(k) || !c_.pd.on() || c_.pd.decode_cache);
    }
    bool hand_off(uint32_t k, uint32_t r, double now);
    int32_t choose_decode(uint32_t r);  // the decode stage's router (fleet_sim.cpp, where the views are)
    void transfer_arrived(uint32_t r, double now);
    void release_host_lease(uint32_t k, uint32_t r);
    double rank_link_ms(double kv_tokens, double states, const Link& link) const;
    uint64_t moved_bytes(uint64_t kv_tokens, uint64_t states) const;
    void deliver(uint32_t r, double now);
    void schedule_delivery(uint32_t r, double at);
    void cut_transfers(uint32_t k, uint32_t f, std::vector<uint32_t>& moved);
    void lose_transfer(uint32_t r, int32_t f);
    // Whether instance k serves request r's stage (every instance does, colocated).
    bool serves(uint32_t k, uint32_t r) const;
    Router& router_of(uint32_t r);
    bool any_instance_returns(uint32_t r) const;
    void release_request(uint32_t k, uint32_t r);
    void finish_if_done(double now);

    // ---- instance scheduling (fleet_instance.cpp) ----
    void kick(uint32_t k, double now);
    void start_iteration(uint32_t k, double now);
    uint32_t batch_decodes(uint32_t k);
    uint32_t count_by_tenant(uint32_t k);
    void admit_waiting(uint32_t k, double now, uint32_t budget, uint32_t prefilling);
    void batch_prefills(uint32_t k, uint32_t budget, uint32_t cap);
    double plan_decode_run(uint32_t k, const IterationWork& w, double now);
    void end_iteration(uint32_t k, double now);
    AdmitResult admit(uint32_t k, uint32_t r, double now);
    bool admit_picked(uint32_t k, const WaitQueue::Entry& e, double now, bool* stop);
    Hits find_hits(uint32_t k, uint32_t r);
    void find_engine_hits(uint32_t k, uint32_t r, Hits& h);
    void account_resume(uint32_t r, const Hits& h, uint64_t resume);
    void start_running(uint32_t k, uint32_t r, uint64_t resume, double now);
    bool ensure_kv(uint32_t k, uint32_t r, uint64_t context);
    bool grow(uint32_t k, uint32_t r, uint64_t context);
    void preempt(uint32_t k, uint32_t r);
    void complete(uint32_t k, uint32_t r, double now);
    void cache_progress(uint32_t k, uint32_t r, double now, bool final);
    void engine_progress(uint32_t k, uint32_t r, double now, bool final);  // engine sglang, vllm
    void engine_insert(uint32_t k, uint32_t r, const EngineInsert& ins, std::span<const uint64_t> states,
                       double now);
    double step_ms(uint32_t k, uint32_t j) const;
    void cut_run(uint32_t k, double now);
    uint32_t steps_done_by(uint32_t k, double now) const;
    void apply_decode_steps(uint32_t k, uint32_t m);
    void yield_decode_steps(uint32_t k, uint32_t r, uint32_t m);
    RadixCache& cache_of(uint32_t k, uint32_t r);
    uint64_t lookup_len(uint32_t r) const;
    uint64_t resume_lookup_len(const RadixCache& c, uint32_t r) const;  // what r may resume from in c
    uint64_t uncached_cost(uint32_t k, uint32_t r) const;
    void reset_instance(uint32_t k);

    // ---- the instance's memory (fleet_shared_pool.cpp) ----
    bool shared_pool() const;
    uint32_t running_states() const;
    PoolResult make_instance_pool(uint32_t k);
    void charge_cache(uint32_t k);
    bool evict_for(uint32_t k, bool state);
    AllocStatus alloc_running_state(uint32_t k, uint32_t r);
    void hand_to_tree(uint32_t k, uint32_t r, uint64_t upto);
    std::string audit_cache_charge() const;
    static uint64_t request_owners(const PagePool& p);
    void time_iteration(uint32_t k, double now);
    // Whether falsifier f (FleetConfig::falsify) fires now: the first time it is asked, if set.
    bool falsify_now(FleetSimFalsify f);

    // ---- the resume audit and migration records (fleet_resume_audit.cpp) ----
    void audit_resume(uint32_t r, const Hits& h, uint64_t resume);
    void record_migration(uint32_t r, int32_t f, uint64_t state_pos);

    friend class FleetRouterView;

    std::shared_ptr<const Workload> w_;
    FleetConfig c_;
    RunningStateSlots slots_;
    std::vector<PoolSize> pool_sizes_;
    std::string error_;
    CostModel cost_, first_cost_;              // the main preset's and first_gpus' step models
    BatchRoofline roofline_, first_roofline_;  // ... and their rooflines (time_iteration)
    Router router_;
    Router decode_router_;  // prefill/decode disaggregation: the decode stage's (least loaded)
    EventQueue q_;
    size_t next_arrival_ = 0;
    std::vector<uint32_t> order_;  // requests by scaled arrival time (ties: by id)
    std::vector<Live> live_;
    std::vector<Inst> inst_;
    std::vector<RequestOutcome> out_;
    std::vector<InstanceStats> stats_;
    std::vector<FaultOutcome> fault_out_;
    std::vector<uint32_t> gateway_;  // requests waiting for an instance to come up
    std::unique_ptr<RadixCache> host_;
    std::vector<Replication> repl_;
    std::vector<NewCheckpoint> cp_scratch_;
    TokenBuckets buckets_;
    TimelineRecorder timeline_;
    std::vector<LoadSample> samples_;
    std::vector<AdmissionRecord> admissions_;
    double sample_dt_ = 0;
    FleetTotals t_;
    ResumeAudit audit_;
    uint64_t finished_ = 0, admit_seq_ = 0;
    uint32_t tenants_ = 1;
    // Quotas: running state slots and concurrent prefills a tenant may hold on one instance, and
    // what it holds on the instance being scheduled.
    std::vector<uint32_t> cap_run_, cap_pre_, run_t_, pre_t_;
    std::vector<uint32_t> prefill_order_;
    bool done_ = false;
    double now_ = 0;
    bool freed_ = false;
    bool falsified_ = false;  // the fleet falsifier hook has corrupted its one event
    std::string final_audit_;
    uint64_t final_leases_ = 0, final_owners_ = 0;

  public:
    // The running requests an instance may hold under the engine's scheduler: SGLang caps them at
    // the state slots / ratio (batch_former.h), vLLM and ideal at the state slots.
    uint32_t running_cap(uint32_t k) const;  // instance k's, from its pool

  private:
    // ---- the engines' batch formers (batch_former.cpp) ----
    bool form_ideal(uint32_t k, double now);
    bool form_sglang(uint32_t k, double now);
    bool sglang_prefill_batch(uint32_t k, double now);
    bool sglang_decode_batch(uint32_t k);
    void sglang_falsifications(uint32_t k, double now, bool chunked);
    bool form_vllm(uint32_t k, double now);
    bool vllm_running(uint32_t k, uint64_t& budget, uint32_t& partial);
    void vllm_waiting(uint32_t k, double now, uint64_t budget, uint32_t partial);
    uint64_t vllm_falsified_chunk(uint64_t pos, uint64_t n, uint64_t block);
    bool pick_waiting(uint32_t k, double now, WaitQueue::Entry* e);
    void retract(uint32_t k, uint32_t r);
    void requeue(uint32_t k, uint32_t r, bool front);  // preempt and retract: memory freed, queued again
    uint64_t free_kv_tokens(uint32_t k) const;
    void observe_batch(uint32_t k);
    void count_iteration(uint32_t k, bool prefill, bool decode, uint32_t steps);
    uint64_t sglang_max_new(uint32_t r) const;
    double sglang_rem_total_tokens(uint32_t k) const;
    // The tokens the next m decode steps give request r: the acceptance rule's, up to its output.
    uint64_t decode_tokens(uint32_t r, uint64_t m) const;
    uint64_t decode_steps_within(uint32_t r, uint64_t room) const;
    double cost_context(uint32_t r) const;
    SpecAcceptance accept_;
    SpecWork spec_;
    FleetEngineRules eng_;  // the engine's caching rules (engine sglang, vllm; ideal: off)
    std::vector<uint64_t> eng_states_;
};

}  // namespace k3
