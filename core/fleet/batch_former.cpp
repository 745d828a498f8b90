// FleetSim: the engines' batch formers (core/fleet/batch_former.h says which engine rule each step
// follows) and the tallies the fleet report's engine checks read.
#include "core/fleet/batch_former.h"

#include <algorithm>

#include "core/fleet/fleet_sim_internal.h"

namespace k3 {

// SGLang: max_running_requests = min(--max-running-requests, mamba slots // ratio), the slots being
// the mamba pool's (the shared pool's state slots, which the cache's states share). vLLM: its
// max_num_seqs; its pool refuses what does not fit.
uint32_t FleetSim::running_cap(uint32_t k) const {
    if (c_.engine == CacheEngine::ideal) return slots_.slots;
    if (c_.engine == CacheEngine::vllm || c_.falsify == FleetSimFalsify::sglang_cap_ignored)
        return c_.max_running;
    const uint64_t mamba = k < pool_sizes_.size() ? pool_sizes_[k].state_slots : slots_.slots;
    const uint32_t cap = sglang_max_running(uint32_t(std::min<uint64_t>(mamba, UINT32_MAX)),
                                            sglang_running_ratio(c_.sglang, c_.caching));
    return std::min(c_.max_running, cap);
}

// The next waiting request the queue's policy (and the tenants' quotas) lets in now; false if none,
// with a wake-up scheduled for when a token bucket lets one in.
bool FleetSim::pick_waiting(uint32_t k, double now, WaitQueue::Entry* e) {
    Inst& I = inst_[k];
    const std::function<bool(uint32_t)> allowed = [this](uint32_t t) {
        return run_t_[t] < cap_run_[t] && pre_t_[t] < cap_pre_[t];
    };
    double next = -1;
    if (I.queue.pick(now, e, &next, c_.quotas ? allowed : std::function<bool(uint32_t)>{})) return true;
    if (next >= 0 && (I.wake_at < 0 || next < I.wake_at)) {
        I.wake_at = next;
        q_.push(next, ev_wake, k);
    }
    return false;
}

// KV tokens the instance's working pool has free (its own pages are the running requests' kv_alloc).
uint64_t FleetSim::free_kv_tokens(uint32_t k) const {
    const Inst& I = inst_[k];
    uint64_t used = 0;
    for (uint32_t r : I.running) used += live_[r].kv_alloc;
    // The shared pool: what the running requests hold in the tree is used too; the rest of the tree
    // is evictable (SGLang's available_size + evictable_size).
    if (shared_pool())
        for (const auto& c : I.caches) used += c->stats().locked_kv_tokens;
    return I.pool_tokens > used ? I.pool_tokens - used : 0;
}

// SGLang's retraction (ScheduleBatch.retract_decode, release_req): the request's KV and state are
// freed and it goes to the back of the waiting queue; it prefills again from what the cache holds.
void FleetSim::retract(uint32_t k, uint32_t r) {
    ++t_.retractions;
    requeue(k, r, false);
}

bool FleetSim::form_sglang(uint32_t k, double now) {
    Inst& I = inst_[k];
    for (;;) {
        I.batch.clear();
        if (sglang_prefill_batch(k, now)) return true;
        I.batch.clear();
        if (sglang_decode_batch(k)) return true;
        if (I.running.empty()) {
            I.new_token_ratio = kSglangInitNewTokenRatio;  // idle: self_check_during_idle
            return false;
        }
        retract(k, I.running.back());  // nothing could run: free memory and plan again
    }
}

// _get_new_batch_prefill_raw with PrefillAdder: the chunked request first, then waiting requests.
bool FleetSim::sglang_prefill_batch(uint32_t k, double now) {
    Inst& I = inst_[k];
    const SglangConfig& sc = c_.sglang;
    uint64_t rem_input = c_.max_prefill_tokens, rem_chunk = sc.chunked_prefill_tokens;
    bool chunked = false;
    for (uint32_t r : I.running) {
        Live& L = live_[r];
        if (L.pos >= L.target) continue;
        const uint64_t end = sglang_next_extend_end(sc, L.pos, L.target);
        if (!grow(k, r, end)) {
            retract(k, r);
            return false;
        }
        I.batch.push_back({r, uint32_t(end - L.pos)});
        rem_input -= std::min(rem_input, end - L.pos);
        rem_chunk -= std::min(rem_chunk, end - L.pos);
        chunked = end < L.target;
        break;  // one chunked request
    }
    count_by_tenant(k);
    double rem_total = sglang_rem_total_tokens(k);
    const uint32_t cap = running_cap(k);
    auto room = [&] {
        if (I.running.size() < cap) return true;
        ++t_.cap_reached;
        return I.running.size() == cap && falsify_now(FleetSimFalsify::sglang_slot_over);
    };
    while (!chunked && rem_input > 0 && rem_chunk >= sc.page_size && I.status == Inst::up &&
           !I.queue.empty() && room()) {
        WaitQueue::Entry e;
        if (!pick_waiting(k, now, &e)) break;
        // PrefillAdder's memory check: the extend and the remaining output fit what is not reserved.
        const double max_new = double(sglang_max_new(e.req));
        if (double(std::min(uncached_cost(k, e.req), rem_chunk) + sc.page_size) + max_new > rem_total) {
            I.queue.unpick(e, now);
            break;
        }
        bool stop = false;
        if (!admit_picked(k, e, now, &stop)) {
            if (stop) break;
            continue;
        }
        const Live& L = live_[e.req];
        SglangConfig left = sc;
        left.chunked_prefill_tokens = uint32_t(rem_chunk);
        uint64_t end = sglang_first_extend_end(left, L.pos, L.target);
        if (end <= L.pos) end = L.pos + std::min(L.target - L.pos, rem_chunk);
        if (!grow(k, e.req, end)) {
            retract(k, e.req);
            break;
        }
        I.batch.push_back({e.req, uint32_t(end - L.pos)});
        rem_input -= std::min(rem_input, end - L.pos);
        rem_chunk -= std::min(rem_chunk, end - L.pos);
        chunked = end < L.target;
        rem_total -= double(end - L.pos) + (chunked ? 0 : max_new);  // _update_prefill_budget
    }
    if (chunked && !I.queue.empty()) ++t_.chunked_with_waiting;
    if (I.batch.empty()) return false;
    sglang_falsifications(k, now, chunked);
    return true;
}

// The formers' falsifiers (sglang_second_chunk, sglang_mixes_decode) on a prefill batch just formed.
void FleetSim::sglang_falsifications(uint32_t k, double now, bool chunked) {
    Inst& I = inst_[k];
    if (chunked && !I.queue.empty() && falsify_now(FleetSimFalsify::sglang_second_chunk)) {
        WaitQueue::Entry e;  // one more request, chunked to one token
        if (pick_waiting(k, now, &e)) {
            const AdmitResult a = admit(k, e.req, now);
            if (a == no_memory) I.queue.unpick(e, now);
            if (a == too_large) fail(e.req, FailReason::too_large, now);
            const Live& L = live_[e.req];
            if (a == admitted && L.target - L.pos > 1 && grow(k, e.req, L.pos + 1))
                I.batch.push_back({e.req, 1});
        }
    }
    for (uint32_t r : I.running) {
        const Live& L = live_[r];
        if (L.pos < L.target || !falsify_now(FleetSimFalsify::sglang_mixes_decode)) continue;
        for (uint32_t d : I.running)
            if (live_[d].pos >= live_[d].target && grow(k, d, live_[d].pos + decode_tokens(d, 1)))
                I.batch.push_back({d, 0});
        break;
    }
}

// min(max_new_tokens - output so far, CLIP_MAX_NEW_TOKENS): the output a request may still take.
uint64_t FleetSim::sglang_max_new(uint32_t r) const {
    const uint64_t out = out_[r].output, gen = live_[r].generated;
    return std::min<uint64_t>(out > gen ? out - gen : 0, kSglangClipMaxNewTokens);
}

// PrefillAdder.rem_total_tokens: the free KV less the decoding requests' remaining output x
// new_token_ratio (with the shared pool, the tree's evictable KV counts as free: free_kv_tokens).
double FleetSim::sglang_rem_total_tokens(uint32_t k) const {
    const Inst& I = inst_[k];
    double offset = 0;
    for (uint32_t r : I.running)
        if (live_[r].pos >= live_[r].target) offset += double(sglang_max_new(r)) * I.new_token_ratio;
    return double(free_kv_tokens(k)) - offset;
}

// update_running_batch: every running request decodes; when their next KV does not fit
// (check_decode_mem), retract_decode takes out the fewest output tokens first (sorted by output
// length, then prompt length descending, popped from the back) until the rest fits.
bool FleetSim::sglang_decode_batch(uint32_t k) {
    Inst& I = inst_[k];
    const uint64_t pt = I.pool->layout().page_tokens;
    bool retracted = false;
    for (;;) {
        uint64_t need = 0;
        int32_t victim = -1;
        for (uint32_t r : I.running) {
            const Live& L = live_[r];
            if (L.pos < L.target) continue;
            const uint64_t want = (L.pos + decode_tokens(r, 1) - L.own_start() + pt - 1) / pt * pt;
            need += want > L.kv_alloc ? want - L.kv_alloc : 0;
            const Live* v = victim < 0 ? nullptr : &live_[uint32_t(victim)];
            const uint32_t prompt = w_->requests[r].prompt_len;
            if (!v || L.generated < v->generated ||
                (L.generated == v->generated && prompt >= w_->requests[uint32_t(victim)].prompt_len))
                victim = int32_t(r);
        }
        if (victim < 0) return false;
        if (need <= free_kv_tokens(k)) break;
        retract(k, uint32_t(victim));
        retracted = true;
    }
    if (retracted) {  // retract_decode's new estimate over the requests left
        uint64_t decoded = 0, max_new = 0, n = 0;
        for (uint32_t r : I.running)
            if (live_[r].pos >= live_[r].target)
                decoded += live_[r].generated, max_new += out_[r].output, ++n;
        I.new_token_ratio = sglang_retract_ratio(decoded, max_new, n);
        I.ratio_set = true;
    }
    for (uint32_t r : I.running) {
        const Live& L = live_[r];
        if (L.pos >= L.target && grow(k, r, L.pos + decode_tokens(r, 1))) I.batch.push_back({r, 0});
    }
    return !I.batch.empty();
}

bool FleetSim::form_vllm(uint32_t k, double now) {
    Inst& I = inst_[k];
    for (;;) {
        I.batch.clear();
        uint64_t budget = c_.max_batch_tokens;
        uint32_t partial = 0;
        const bool preempted = vllm_running(k, budget, partial);
        if (!preempted) vllm_waiting(k, now, budget, partial);
        if (!I.batch.empty()) return true;
        if (I.running.empty() || !preempted) return false;
    }
}

// Schedule's running loop. Returns whether it preempted (then no waiting request is scheduled).
bool FleetSim::vllm_running(uint32_t k, uint64_t& budget, uint32_t& partial) {
    Inst& I = inst_[k];
    VllmEngineConfig v = c_.vllm;
    v.token_budget = c_.max_batch_tokens;
    const uint64_t threshold = vllm_long_prefill_threshold(v, c_.max_partial_prefills);
    const bool align = v.hybrid && c_.caching;
    const uint64_t preempted0 = t_.preemptions;
    for (size_t i = 0; i < I.running.size() && budget > 0; ++i) {
        const uint32_t r = I.running[i];
        const Live& L = live_[r];
        const bool prefill = L.pos < L.target;
        // A decode schedules its token and its drafts (a verify), and its KV takes what they yield.
        uint64_t n = prefill ? L.target - L.pos : 1 + spec_.drafts;
        if (!prefill && n > budget) break;
        if (threshold > 0 && n > threshold) n = threshold;
        n = std::min(n, budget);
        if (prefill && align) n = vllm_aligned_split(v, L.pos, n, L.target, L.junction);
        const bool is_partial = prefill && L.pos + n < L.target;
        if (n == 0 || (is_partial && c_.max_partial_prefills && partial >= c_.max_partial_prefills)) continue;
        if (!ensure_kv(k, r, L.pos + (prefill ? n : decode_tokens(r, 1)))) break;  // preempted itself
        if (is_partial && align) n = vllm_falsified_chunk(L.pos, n, v.block_tokens);
        I.batch.push_back({r, prefill ? uint32_t(n) : 0u});
        budget -= n;
        partial += is_partial;
    }
    return t_.preemptions != preempted0;
}

// Schedule's waiting loop: new and preempted requests while the budget and max_num_seqs allow.
void FleetSim::vllm_waiting(uint32_t k, double now, uint64_t budget, uint32_t partial) {
    Inst& I = inst_[k];
    VllmEngineConfig v = c_.vllm;
    v.token_budget = c_.max_batch_tokens;
    const uint64_t threshold = vllm_long_prefill_threshold(v, c_.max_partial_prefills);
    const bool align = v.hybrid && c_.caching;
    count_by_tenant(k);
    while (budget > 0 && I.status == Inst::up && I.running.size() < running_cap(k) && !I.queue.empty()) {
        WaitQueue::Entry e;
        if (!pick_waiting(k, now, &e)) return;
        bool stop = false;
        if (!admit_picked(k, e, now, &stop)) {
            if (stop) return;
            continue;
        }
        const Live& L = live_[e.req];
        uint64_t n = L.target - L.pos;
        if (threshold > 0 && n > threshold) n = threshold;
        n = std::min(n, budget);
        if (align) n = vllm_aligned_split(v, L.pos, n, L.target, L.junction);
        const bool full = c_.max_partial_prefills && partial >= c_.max_partial_prefills;
        t_.partial_limit_reached += full && L.target - L.pos > 1;
        if (full && L.target - L.pos > 1 && falsify_now(FleetSimFalsify::vllm_second_partial))
            n = 1;  // a second partial prefill
        else if (n == 0 || (full && L.pos + n < L.target))
            return;
        const bool is_partial = L.pos + n < L.target;
        if (!grow(k, e.req, L.pos + n)) return;  // allocate_slots failed: it waits in running
        if (is_partial && align) n = vllm_falsified_chunk(L.pos, n, v.block_tokens);
        I.batch.push_back({e.req, uint32_t(n)});
        budget -= n;
        partial += is_partial;
    }
}

// vllm_chunk_off_grid: the first non-final chunk that ends on the block grid ends one token early.
uint64_t FleetSim::vllm_falsified_chunk(uint64_t pos, uint64_t n, uint64_t block) {
    if (n > 1 && (pos + n) % block == 0 && falsify_now(FleetSimFalsify::vllm_chunk_off_grid)) return n - 1;
    return n;
}

// What the engine checks read, from the batch just formed (positions before it runs).
void FleetSim::observe_batch(uint32_t k) {
    const Inst& I = inst_[k];
    ++t_.batches_formed;
    uint32_t partial = 0;
    VllmEngineConfig v = c_.vllm;
    v.token_budget = c_.max_batch_tokens;
    for (const BatchItem& b : I.batch) {
        const Live& L = live_[b.req];
        if (!b.chunk || L.pos + b.chunk >= L.target) continue;
        ++partial;
        if (c_.engine != CacheEngine::vllm || !v.hybrid || !c_.caching) continue;
        ++t_.nonfinal_chunks;
        if (vllm_chunk_end_allowed(v, L.pos, b.chunk, L.target, L.junction)) continue;
        if (t_.chunks_off_split++ == 0)
            t_.first_off_split = "request " + std::to_string(b.req) + ": chunk [" + std::to_string(L.pos) +
                                 ", " + std::to_string(L.pos + b.chunk) + ") of " + std::to_string(L.target);
    }
    t_.max_partial_in_batch = std::max(t_.max_partial_in_batch, partial);
}

// Ends an iteration's tallies; SGLang's new_token_ratio decays once per decode iteration that did
// not retract.
void FleetSim::count_iteration(uint32_t k, bool prefill, bool decode, uint32_t steps) {
    if (prefill && decode)
        ++t_.mixed_iterations;
    else if (prefill)
        ++t_.prefill_iterations;
    else if (decode)
        t_.decode_iterations += steps;
    Inst& I = inst_[k];
    if (c_.engine != CacheEngine::sglang || prefill || !decode) return;
    for (uint32_t j = I.ratio_set ? 1 : 0; j < steps; ++j)
        I.new_token_ratio = std::max(I.new_token_ratio - kSglangNewTokenRatioDecay, kSglangMinNewTokenRatio);
    I.ratio_set = false;
}

}  // namespace k3
