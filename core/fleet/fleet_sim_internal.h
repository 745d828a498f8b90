// Internal state of FleetSim shared by fleet_sim.cpp (events, routing, faults) and
// fleet_instance.cpp (batching, admission, completion). Not part of the interface.
#pragma once

#include "core/fleet/batch_former.h"
#include "core/fleet/fleet_sim.h"

namespace k3 {

enum class Phase : uint8_t { pending, queued, running, held, done, failed };
enum EventKind : uint32_t {
    ev_iteration_end,
    ev_wake,
    ev_fault,
    ev_up,
    ev_replicated,
    ev_reroute,
    ev_deliver,
    ev_sample,
    ev_down
};

// A checkpoint written by a request that resumed on a mismatched state is itself wrong: the
// metadata-mode handle carries that mark so that later resumes from it are counted.
inline constexpr uint64_t kTaintedHandle = 1;
// Above that mark the handle carries the checkpoint's StateRecord for the resume audit, which keeps
// its own account of mismatches (bit 1) rather than the simulator's.
inline uint64_t checkpoint_handle(bool tainted, const StateRecord& s) {
    return (tainted ? kTaintedHandle : 0) | (s.mismatched ? 2 : 0) | s.pos << 2;
}
inline StateRecord state_record_of(uint64_t handle) { return {handle >> 2, (handle & 2) != 0}; }

struct FleetSim::Live {
    Phase phase = Phase::pending;
    int32_t inst = -1;
    uint32_t ns = 0;      // cache namespace
    uint64_t target = 0;  // context to prefill before decoding: prompt + tokens generated so far
    uint64_t pos = 0;     // context computed: KV and state sit here
    uint64_t base = 0;    // first position this attempt's own pages hold: [base, pos)
    uint64_t resume = 0;  // where this attempt resumed
    uint32_t generated = 0;
    uint64_t kv_alloc = 0;  // private tokens its pages cover
    bool slot = false;
    StateRef state_ref = kNoRef;
    bool leased = false;
    Admission adm;  // lease and checkpoint plan (caching)
    // The engine's view of this attempt (engine sglang or vllm): SGLang's mamba_branching_seqlen and
    // mamba_last_track_seqlen, vLLM's shared-prefix junction (0 = none).
    uint64_t branching = 0, last_track = 0, junction = 0;
    // Shared pool (engine sglang / vllm): the tree owns this attempt's tokens below tree_owned (its
    // lease holds them); its own pages cover [own_start, pos).
    uint64_t tree_owned = 0;
    uint64_t own_start() const { return base > tree_owned ? base : tree_owned; }
    uint32_t plan_next = 0;
    uint64_t inserted = 0;      // cached prefix inserted into the instance's tree
    uint64_t replicated = 0;    // prefix sent to the host tier
    uint64_t host_written = 0;  // prefix written through to its instance's host tier (this attempt)
    bool tainted = false;       // resumed on a state that did not match its KV
    // The resume audit's own view of this attempt (it does not read `tainted`): whether its state
    // was inconsistent with its KV, and the record of the state it carries from elsewhere.
    bool audit_mismatched = false;
    StateRecord carry_record;
    int32_t migration_fault = -1;  // live migration awaiting its resume: fault and record index
    uint32_t migration_index = 0;
    // Brought along from elsewhere (host tier, migration): KV and state positions.
    bool carry = false;
    uint64_t carry_kv = 0, carry_state = 0;
    int32_t carry_to = -1;         // instance it is being delivered to
    bool host_loading = false;     // what it carries comes from its instance's host tier (load_from_host)
    uint64_t host_load_epoch = 0;  // of its instance when it started (a crash since loses it)
    // A transfer on its way (a host load, or the handoff from its prefill instance): the bytes it moves,
    // and what it brings: KV to brought_kv and the state at brought_state, with that state's handle.
    uint64_t transfer_bytes = 0, brought_kv = 0, brought_state = 0, brought_handle = 0;
    bool host_tried = false;    // this placement loaded from its host tier already (once per placement)
    bool host_held = false;     // host_lease holds the loaded prefix in the device's tree until admitted
    bool decode_stage = false;  // prefill/decode disaggregation: prefilled, for (or on) a decode instance
    bool in_transfer = false;   // on the link from its prefill instance (L.inst), to carry_to
    // Its pending ev_deliver carries this number; a fault that cuts the transfer bumps it, so the event
    // that was queued for the transfer finds it gone.
    uint32_t delivery = 0;
    RecoverySource recovered_from = RecoverySource::recompute;  // of a request a fault moved
    Lease host_lease;
    uint64_t admit_seq = 0;
    double cost = 0;  // queue cost (uncached tokens)
    bool routed = false;
    int32_t fault = -1;       // the fault that moved it, until it runs again
    uint64_t chunk_from = 0;  // engine sglang, vllm: where the prefill chunk now ending started
};

struct FleetSim::Inst {
    enum Status : uint8_t { up, draining, down };
    Status status = up;
    uint64_t epoch = 0;  // bumped by a crash: events of the old life are ignored
    std::vector<std::unique_ptr<RadixCache>> caches;
    std::unique_ptr<CacheObserver> events;  // the router's KV-event feed (kv_events, kv_cost)
    std::unique_ptr<PagePool> pool;
    uint64_t pool_tokens = 0;  // KV tokens the pool can hold
    WaitQueue queue;
    std::vector<uint32_t> running;  // in admission order
    std::vector<BatchItem> batch;
    uint32_t prefilling = 0;
    bool busy = false;
    double iter_start = 0;
    uint64_t iter_id = 0;  // the iteration-end event that counts (a shortened run of steps reschedules)
    // A run of decode-only steps simulated as one event (no request finishes and nothing is
    // waiting before its end): `steps` steps of `decode` sequences whose contexts sum to
    // `context0` at the first step. Any event that could change the batch cuts the run at the next
    // step boundary, so the outcome is the same as stepping one iteration at a time.
    uint32_t steps = 1;
    uint32_t run_decode = 0;
    double run_context0 = 0;
    double wake_at = -1;               // pending wake event (token buckets)
    double link_free = 0;              // outgoing link (replication, migration) busy until
    std::unique_ptr<RadixCache> host;  // its host tier (FleetConfig::host), if any
    double host_link_free = 0;         // host links busy until (writes and loads share them)
    double down_since = 0;
    bool migrate_pending = false;
    int32_t drain_fault = -1;
    int32_t last_fault = -1;  // the fault that last crashed or drained it (its transfers lost at delivery)
    // SGLang's new_token_ratio (batch_former.h): the share of their remaining output the running
    // requests are expected to still need, reserved at admission; set by a retraction (and not decayed
    // by the iteration it formed).
    double new_token_ratio = kSglangInitNewTokenRatio;
    bool ratio_set = false;
};

struct FleetSim::Replication {
    uint32_t inst = 0, req = 0;
    uint64_t epoch = 0, len = 0;
    std::vector<NewCheckpoint> cps;
    bool to_instance_host = false;  // into inst's host tier (FleetConfig::host), not the fleet's
    uint64_t bytes = 0;             // what it moves (the instance's host tier's writes)
    bool ended = false;             // its transfer ended (before the run did)
};

}  // namespace k3
