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
    if (slot && L.generated >= o.output) return false;  // SGLang's prefill made the last token
    // The context it prefilled: its prompt, and the tokens it had generated when a fault sent it back.
    const uint64_t N = L.target;
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
    // Layer by layer the transfer runs beside the last chunk; it cannot end before the chunk does.
    const double start = std::max(c_.pd.layerwise ? I.iter_start : now, I.link_free);
    I.link_free = start + rank_link_ms(double(tokens), 1, c_.pd.link);
    const double arrive = std::max(now, I.link_free);
    L.transfer_bytes = moved_bytes(tokens, 1);
    ++o.transfers;
    o.transfer_kv_tokens += tokens;
    o.transfer_context += N;
    o.transfer_bytes += L.transfer_bytes;
    if (falsify_now(FleetSimFalsify::pd_record_drops_state)) o.transfer_bytes -= cost_.state_bytes();
    o.transfer_state_pos = state;
    o.transfer_ms = arrive - now;
    ++t_.pd_transfers;
    t_.pd_bytes_sent += L.transfer_bytes;
    t_.pd_kv_tokens += tokens;
    L.in_transfer = true;
    L.phase = Phase::held;
    L.carry_to = d;
    L.brought_kv = kv;
    L.brought_state = state;
    L.brought_handle = checkpoint_handle(L.tainted, {state, L.audit_mismatched});
    schedule_delivery(r, arrive);
    return true;
}

// Faults (module 13). A handoff still on the link when its sender or its receiver crashes is lost:
// Mooncake's and NIXL's transfers fail with either end, and neither SGLang nor vLLM hands the KV to
// another decoder; the gateway retries the request, which goes back through the prefill stage (the
// prefill instance's cache usually still holds its prefix). vLLM's kv_load_failure_policy=recompute,
// which recomputes on the decoder instead, is not modelled. The crash's victims are re-routed once it
// is detected, with the rest of the crashed instance's requests.
void FleetSim::cut_transfers(uint32_t k, uint32_t f, std::vector<uint32_t>& moved) {
    if (!c_.pd.on()) return;
    for (uint32_t r = 0; r < live_.size(); ++r) {
        Live& L = live_[r];
        if (!L.in_transfer || (L.inst != int32_t(k) && L.carry_to != int32_t(k))) continue;
        if (falsify_now(FleetSimFalsify::pd_cut_transfer_delivered)) {
            lose_transfer(r, int32_t(f));  // recorded as cut, but its delivery still comes
            L.in_transfer = L.decode_stage = true;
            continue;
        }
        ++L.delivery;  // the delivery queued for it will find it gone
        // The KV its prefill computed for the decoder is thrown away (the prefill's cache may keep it).
        fault_out_[f].lost_tokens += L.brought_kv;
        t_.lost_tokens += L.brought_kv;
        lose_transfer(r, int32_t(f));
        L.carry_to = -1;
        moved.push_back(r);
    }
}

// Request r's transfer did not arrive (cut by fault f, or its decoder no longer takes it): its bytes
// are lost, and it goes back to the prefill stage, without what the transfer brought.
void FleetSim::lose_transfer(uint32_t r, int32_t f) {
    Live& L = live_[r];
    L.in_transfer = false;
    L.decode_stage = false;
    if (!falsify_now(FleetSimFalsify::pd_lost_transfer_unlogged)) t_.pd_bytes_lost += L.transfer_bytes;
    if (f >= 0) fault_out_[uint32_t(f)].cut_transfers.push_back({r, L.transfer_bytes, admissions_.size()});
}

// Request r's transfer reached its decode instance: into its cache (decode-side caching), or carried
// by the request in pages of its own. SGLang streams the first token the prefill computed now.
void FleetSim::transfer_arrived(uint32_t r, double now) {
    Live& L = live_[r];
    RequestOutcome& o = out_[r];
    L.in_transfer = false;
    if (!falsify_now(FleetSimFalsify::pd_transfer_unlogged)) t_.pd_bytes_arrived += L.transfer_bytes;
    if (c_.pd.handoff == StateHandoff::slot && o.first_token_ms < 0) o.first_token_ms = now;
    const uint32_t k = uint32_t(L.carry_to);
    // The tree holds whole pages: a state off the page grid stays with the request.
    const uint64_t page = c_.cache.page_size;
    if (caching_at(k) && L.brought_state % page == 0 && L.brought_kv % page == 0) {
        insert_loaded(k, r, now);
        return;
    }
    L.carry = true;
    L.carry_kv = L.brought_kv;
    L.carry_state = L.brought_state;
    L.carry_record = state_record_of(L.brought_handle);
}

}  // namespace k3
