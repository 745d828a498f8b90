// FleetSim: prefill/decode disaggregation (FleetConfig::pd). A request prefills on a prefill instance,
// then hands off: its prefix stays in that instance's cache, its KV and one state cross the link to a
// decode instance, where it resumes from them.
#include <algorithm>

#include "core/fleet/fleet_sim_internal.h"

namespace k3 {

// Request r finished its prefill on prefill instance k: it leaves for a decode instance (the decode
// router's, least loaded). False when it does not (SGLang's one-token output is done here).
bool FleetSim::hand_off(uint32_t k, uint32_t r, double now) {
    Inst& I = inst_[k];
    Live& L = live_[r];
    RequestOutcome& o = out_[r];
    const Request& q = w_->requests[r];
    const bool slot = c_.pd.handoff == StateHandoff::slot;
    if (slot && o.output <= 1) return false;  // SGLang's prefill made the only token
    const uint64_t N = q.prompt_len;
    // SGLang: the slot, after all N tokens. vLLM: the state after N - 1, the decoder recomputes token N.
    const uint64_t kv = slot ? N : N - 1;
    const uint64_t state = c_.falsify == FleetSimFalsify::pd_state_past_kv && !slot ? N : kv;
    release_request(k, r);  // its prefill's work is logged as this attempt's; the lease and pages go back
    I.running.erase(std::find(I.running.begin(), I.running.end(), r));
    charge_cache(k);
    L.decode_stage = true;
    L.target = uint64_t(q.prompt_len) + L.generated;
    L.pos = L.base = 0;
    const int32_t d = choose_decode(r);
    if (d < 0) {
        route(r, now);  // to the gateway, or failed: it prefills again where it lands
        return true;
    }
    // With a decode-side cache only the KV the decode instance lacks crosses.
    uint64_t have = 0;
    if (caching_at(uint32_t(d))) have = std::min(kv, cache_of(uint32_t(d), r).match(*q.tokens, kv).kv_len);
    const uint64_t tokens = kv - have;
    const StepModel::SequenceCoefficients& rank = cost_.step_model().sequence();
    const double link_ms =
        (double(tokens) * rank.kv_bytes_per_token + rank.state_bytes / 2) / c_.pd.link.bytes_per_s * 1000.0;
    // Layer by layer the transfer runs beside the last chunk; it cannot end before the chunk does.
    const double start = std::max(c_.pd.layerwise ? I.iter_start : now, I.link_free);
    I.link_free = start + link_ms;
    const double arrive = std::max(now, I.link_free);
    o.transfer_kv_tokens = tokens;
    o.transfer_bytes = tokens * cost_.kv_bytes_per_token() + cost_.state_bytes();
    t_.pd_bytes_sent += o.transfer_bytes;
    if (falsify_now(FleetSimFalsify::pd_record_drops_state)) o.transfer_bytes -= cost_.state_bytes();
    o.transfer_state_pos = state;
    o.transfer_ms = arrive - now;
    ++t_.pd_transfers;
    t_.pd_kv_tokens += tokens;
    L.in_transfer = true;
    L.pd_bytes = tokens * cost_.kv_bytes_per_token() + cost_.state_bytes();
    L.phase = Phase::held;
    L.carry_to = d;
    L.host_load_kv = kv;  // what it brings: KV to kv, the state at `state` with its record
    L.host_load_state = {state, checkpoint_handle(L.tainted, {state, L.audit_mismatched})};
    q_.push(arrive, ev_deliver, 0, r);
    return true;
}

// Request r's transfer reached its decode instance: into its cache (decode-side caching), or carried
// by the request in pages of its own. SGLang streams the first token the prefill computed now.
void FleetSim::transfer_arrived(uint32_t r, double now) {
    Live& L = live_[r];
    RequestOutcome& o = out_[r];
    L.in_transfer = false;
    if (!falsify_now(FleetSimFalsify::pd_transfer_unlogged)) t_.pd_bytes_arrived += L.pd_bytes;
    if (c_.pd.handoff == StateHandoff::slot && o.first_token_ms < 0) o.first_token_ms = now;
    const uint32_t k = uint32_t(L.carry_to);
    // The tree holds whole pages: a state off the page grid stays with the request.
    const uint64_t page = c_.cache.page_size;
    if (caching_at(k) && L.host_load_state.first % page == 0 && L.host_load_kv % page == 0) {
        insert_loaded(k, r, now);
        return;
    }
    L.carry = true;
    L.carry_kv = L.host_load_kv;
    L.carry_state = L.host_load_state.first;
    L.carry_record = state_record_of(L.host_load_state.second);
}

}  // namespace k3
