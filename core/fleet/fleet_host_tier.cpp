// FleetSim: each instance's host tier in normal serving (FleetConfig::host; SGLang HiCache's host KV
// pool and MambaPoolHost). Writes go through as each prefill ends, loads come back before a request
// whose host match is deeper than its device match runs; both queue on the instance's host links.
#include <algorithm>

#include "core/fleet/fleet_sim_internal.h"

namespace k3 {

// One transfer of KV tokens and states over a link of each rank: every rank moves its own shard in
// parallel (a rank's KV per token and state, as the step model holds them).
double FleetSim::rank_link_ms(double kv_tokens, double states, const Link& link) const {
    const StepModel::SequenceCoefficients& q = cost_.step_model().sequence();
    const double rank_bytes = kv_tokens * q.kv_bytes_per_token + states * q.state_bytes / 2;
    return rank_bytes / link.bytes_per_s * 1000.0;
}

// The instance's bytes of KV tokens and states (all its ranks).
uint64_t FleetSim::moved_bytes(uint64_t kv_tokens, uint64_t states) const {
    return kv_tokens * cost_.kv_bytes_per_token() + states * cost_.state_bytes();
}

// Writes what request r inserted on instance k up to `len` through to the instance's host tier: its
// new KV and the checkpoints of its plan in that span.
void FleetSim::write_through(uint32_t k, uint32_t r, uint64_t len, double now) {
    Live& L = live_[r];
    Inst& I = inst_[k];
    if (!I.host || len <= L.host_written) return;
    Replication x;
    x.inst = k;
    x.req = r;
    x.epoch = I.epoch;
    x.len = len;
    x.to_instance_host = true;
    const uint64_t from = std::max(L.host_written, L.resume);
    for (const PlannedCheckpoint& p : L.adm.plan)
        if (p.pos > from && p.pos <= len)
            x.cps.push_back({p.pos,
                             {checkpoint_handle(L.tainted, {p.pos, L.audit_mismatched}), cost_.state_bytes()},
                             p.kind});
    const uint64_t tokens = len - L.host_written;
    ++t_.host_writes;
    x.bytes = moved_bytes(tokens, x.cps.size());
    t_.host_write_bytes += x.bytes;
    L.host_written = len;
    I.host_link_free =
        std::max(now, I.host_link_free) + rank_link_ms(double(tokens), double(x.cps.size()), c_.host.link);
    repl_.push_back(std::move(x));
    q_.push(I.host_link_free, ev_replicated, uint32_t(repl_.size() - 1));
}

// Whether request r, picked on instance k, loads its prefix from the host tier first: when the host's
// resumable match is deeper than the device's. The KV the device lacks and the state cross the host
// links; when they arrive, insert_loaded puts them into the device's tree (HiCache's load back) and the
// request goes back to the front of k's queue, where its admission finds them.
bool FleetSim::load_from_host(uint32_t k, uint32_t r, double now) {
    Live& L = live_[r];
    Inst& I = inst_[k];
    if (!I.host || L.carry || L.host_tried || !c_.caching || eng_.on()) return false;
    const TokenSeq& seq = *w_->requests[r].tokens;
    RadixCache& dev = cache_of(k, r);
    const Match dm = dev.match(seq, resume_lookup_len(dev, r));
    const Match hm = I.host->match(seq, resume_lookup_len(*I.host, r));
    const uint64_t device = c_.guard ? dm.state_len : dm.kv_len, host = c_.guard ? hm.state_len : hm.kv_len;
    if (host <= device) return false;
    const uint64_t kv_tokens = hm.kv_len - std::min(dm.kv_len, hm.kv_len);
    L.host_loading = L.host_tried = true;
    L.host_load_epoch = I.epoch;
    L.brought_kv = hm.kv_len;
    L.brought_state = hm.state_len;
    L.brought_handle = I.host->state_at(hm).handle;
    L.carry_to = int32_t(k);
    L.phase = Phase::held;
    L.transfer_bytes = moved_bytes(kv_tokens, 1);
    ++t_.host_loads;
    t_.host_load_bytes += L.transfer_bytes;
    t_.host_hit_tokens += host - device;
    I.host_link_free = std::max(now, I.host_link_free) + rank_link_ms(double(kv_tokens), 1, c_.host.link);
    if (L.fault >= 0) L.recovered_from = RecoverySource::instance_host;  // a fault moved it here
    schedule_delivery(r, I.host_link_free);
    return true;
}

// What request r brought to instance k (a host load, or a transfer from its prefill instance into a
// decode-side cache) goes into k's tree: KV to brought_kv and the state as a checkpoint that keeps
// its record (the resume audit reads it), held for r until its admission takes its own lease.
void FleetSim::insert_loaded(uint32_t k, uint32_t r, double now) {
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    if (L.brought_kv == 0) return;  // nothing but the zero state
    RadixCache& dev = cache_of(k, r);
    cp_scratch_.clear();
    if (L.brought_state > 0)
        cp_scratch_.push_back(
            {L.brought_state, {L.brought_handle, cost_.state_bytes()}, CheckpointKind::external});
    dev.insert(q.tokens, L.brought_kv, cp_scratch_);
    if (router_.wants_kv_events()) router_.kv_stored(k, *q.tokens, L.brought_kv, now);
    // Held for the request until its admission takes its own lease (release_host_lease).
    L.host_lease = dev.acquire(*q.tokens, L.brought_kv, false);
    L.host_held = true;
    dev.enforce_capacity();
}

void FleetSim::release_host_lease(uint32_t k, uint32_t r) {
    Live& L = live_[r];
    if (!L.host_held) return;
    cache_of(k, r).release(L.host_lease);
    L.host_held = false;
    cache_of(k, r).enforce_capacity();
}

}  // namespace k3
