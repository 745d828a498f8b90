// FleetSim: one instance's continuous batching with chunked prefill, admission through the prefix
// cache, preemption, and completion.
#include <algorithm>
#include <cmath>

#include "core/fleet/fleet_sim_internal.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {
// Tokens of q a request caches when it completes, page floored (as admit_request computes it).
uint64_t cache_len_of(const Request& q, uint64_t page) {
    const uint64_t len =
        std::min<uint64_t>(std::max<uint64_t>(q.cache_len(), q.prompt_len), q.tokens->size());
    return len / page * page;
}
// The engine's KV events of one instance, as the router receives them (kv_events, kv_cost).
class RouterEventFeed final : public CacheObserver {
  public:
    RouterEventFeed(Router& r, uint32_t k, const double& now) : r_(r), k_(k), now_(now) {}
    void kv_removed(const TokenSeq& seq, uint64_t start, uint64_t end, std::span<const uint32_t>) override {
        r_.kv_removed(k_, seq, start, end, now_);
    }

  private:
    Router& r_;
    uint32_t k_;
    const double& now_;
};

}  // namespace

void FleetSim::reset_instance(uint32_t k) {
    Inst& I = inst_[k];
    I.caches.clear();
    const uint32_t n = c_.quotas ? tenants_ : 1;
    double sum = 0;
    for (uint32_t t = 0; t < tenants_; ++t) sum += t < c_.tenants.size() ? c_.tenants[t].weight : 1.0;
    std::vector<double> weights(tenants_);
    for (uint32_t t = 0; t < tenants_; ++t) weights[t] = t < c_.tenants.size() ? c_.tenants[t].weight : 1.0;
    if (router_.wants_kv_events() && !I.events)
        I.events = std::make_unique<RouterEventFeed>(router_, k, now_);
    for (uint32_t t = 0; t < n; ++t) {
        CacheConfig cc = c_.cache;
        if (c_.quotas) {
            // A tenant's namespace gets its weight's share of the capacity (unbounded stays unbounded).
            const double share = weights[t] / sum;
            if (cc.state_capacity)
                cc.state_capacity = std::max<uint64_t>(1, uint64_t(double(cc.state_capacity) * share));
            if (cc.kv_capacity_tokens)
                cc.kv_capacity_tokens =
                    std::max<uint64_t>(1, uint64_t(double(cc.kv_capacity_tokens) * share));
        }
        I.caches.push_back(std::make_unique<RadixCache>(cc, I.events.get()));
    }
    // A crash loses the host tier with the process that held it.
    I.host = c_.host.on() ? std::make_unique<RadixCache>(CacheConfig{c_.cache.page_size, c_.host.state_slots,
                                                                     c_.host.kv_tokens, c_.cache.refresh})
                          : nullptr;
    PoolResult pr = make_instance_pool(k);
    if (!pr.pool) {
        error_ = "working memory: " + pr.error;
        return;
    }
    I.pool = std::move(pr.pool);
    I.pool_tokens = I.pool->layout().max_kv_pages * I.pool->layout().page_tokens;
    if (pool_sizes_.size() < inst_.size()) pool_sizes_.resize(inst_.size());
    pool_sizes_[k] = {I.pool_tokens, I.pool->layout().max_states};
    I.queue.configure(c_.queue, weights, c_.drr_quantum_tokens, &buckets_);
    I.running.clear();
    I.batch.clear();
    I.busy = false;
    I.migrate_pending = false;
    charge_cache(k);
}

RadixCache& FleetSim::cache_of(uint32_t k, uint32_t r) {
    auto& caches = inst_[k].caches;
    const size_t ns = c_.quotas ? std::min<size_t>(w_->requests[r].tenant, caches.size() - 1) : 0;
    return *caches[ns];
}

uint64_t FleetSim::lookup_len(uint32_t r) const {
    return std::min<uint64_t>(live_[r].target, w_->requests[r].tokens->size());
}

// A state after the whole context cannot give the last token's logits (that token is computed again,
// and a recurrent state does not step back): the guard resumes from the deepest checkpoint before it,
// as vLLM caps a hybrid model's hit at the prompt length - 1.
uint64_t FleetSim::resume_lookup_len(const RadixCache& c, uint32_t r) const {
    const uint64_t len = lookup_len(r), target = live_[r].target;
    if (c_.guard && target > 0 && c.match(*w_->requests[r].tokens, len).state_len >= target)
        return target - 1;
    return len;
}

uint64_t FleetSim::uncached_cost(uint32_t k, uint32_t r) const {
    const uint64_t len = lookup_len(r);
    if (!caching_at(k)) return len;
    const auto& caches = inst_[k].caches;
    const size_t ns = c_.quotas ? std::min<size_t>(w_->requests[r].tenant, caches.size() - 1) : 0;
    return len - caches[ns]->match(*w_->requests[r].tokens, engine_match_len(eng_, len)).state_len;
}

void FleetSim::kick(uint32_t k, double now) {
    Inst& I = inst_[k];
    if (I.busy || I.status == Inst::down) return;
    start_iteration(k, now);
}

// Like grow, but a decoding request that finds no free page preempts the most recently admitted
// running request (possibly itself), as vLLM's scheduler does.
bool FleetSim::ensure_kv(uint32_t k, uint32_t r, uint64_t context) {
    Inst& I = inst_[k];
    for (;;) {
        if (grow(k, r, context)) return true;
        const uint32_t victim = I.running.back();
        preempt(k, victim);
        if (victim == r) return false;
    }
}

void FleetSim::preempt(uint32_t k, uint32_t r) {
    ++t_.preemptions;
    ++out_[r].preemptions;
    ++stats_[k].preemptions;
    requeue(k, r, true);
}

// The request's memory is freed and it waits again: at the front of the queue (vLLM's recompute
// preemption) or at the back (SGLang's retraction, without a new queue cost).
void FleetSim::requeue(uint32_t k, uint32_t r, bool front) {
    Inst& I = inst_[k];
    Live& L = live_[r];
    t_.lost_tokens += L.pos - L.base;
    release_request(k, r);
    I.running.erase(std::find(I.running.begin(), I.running.end(), r));
    L.target = uint64_t(w_->requests[r].prompt_len) + L.generated;
    L.pos = L.base = 0;
    L.phase = Phase::queued;
    if (front)
        I.queue.push_front(r, w_->requests[r].tenant);
    else
        I.queue.push_back(r, w_->requests[r].tenant, 0);
}

// Every decoding request that can get its next page takes one token (victims of ensure_kv come from
// the back, so nothing already in the batch is ever preempted). Returns how many.
uint32_t FleetSim::batch_decodes(uint32_t k) {
    Inst& I = inst_[k];
    uint32_t decoding = 0;
    for (size_t i = 0; i < I.running.size(); ++i) {
        const uint32_t r = I.running[i];
        const Live& L = live_[r];
        if (L.pos < L.target) continue;
        if (!ensure_kv(k, r, L.pos + decode_tokens(r, 1))) continue;
        I.batch.push_back({r, 0});
        ++decoding;
    }
    return decoding;
}

// What each tenant holds on instance k now: running requests and prefills (run_t_, pre_t_).
// Returns the number of prefilling requests.
uint32_t FleetSim::count_by_tenant(uint32_t k) {
    std::fill(run_t_.begin(), run_t_.end(), 0u);
    std::fill(pre_t_.begin(), pre_t_.end(), 0u);
    uint32_t prefilling = 0;
    for (uint32_t r : inst_[k].running) {
        const uint32_t t = w_->requests[r].tenant;
        ++run_t_[t];
        if (live_[r].pos < live_[r].target) ++prefilling, ++pre_t_[t];
    }
    return prefilling;
}

// New requests, in the order of the wait queue's policy (and within the tenants' quotas), while
// the budget, the prefill and running limits and memory allow.
void FleetSim::admit_waiting(uint32_t k, double now, uint32_t budget, uint32_t prefilling) {
    Inst& I = inst_[k];
    while (budget > 0 && I.status == Inst::up && prefilling < c_.max_prefills &&
           I.running.size() < slots_.slots && !I.queue.empty()) {
        WaitQueue::Entry e;
        if (!pick_waiting(k, now, &e)) return;
        bool stop = false;
        if (!admit_picked(k, e, now, &stop)) {
            if (stop) return;
            continue;
        }
        ++prefilling;
    }
}

// Admits the request the wait queue picked: true when it runs now. False when it cannot: *stop when
// memory is short (it goes back to the queue, and the queue waits), else it failed (too large).
bool FleetSim::admit_picked(uint32_t k, const WaitQueue::Entry& e, double now, bool* stop) {
    const AdmitResult a = admit(k, e.req, now);
    if (a == no_memory) {
        inst_[k].queue.unpick(e, now);
        *stop = true;
        return false;
    }
    if (a == too_large) {
        fail(e.req, FailReason::too_large, now);
        return false;
    }
    if (a == loading) return false;  // it comes back to the queue with its host prefix
    ++run_t_[e.tenant];
    ++pre_t_[e.tenant];
    return true;
}

// Prefill chunks: each prefill gets at most its share `cap` of the budget first (vLLM caps long
// prefills' chunks when several run: long_prefill_token_threshold), oldest first or, under deficit
// round robin, the tenants with the fewest running requests first, so that fair queueing reaches
// the token budget too. What is left then goes to the same prefills in the same order.
void FleetSim::batch_prefills(uint32_t k, uint32_t budget, uint32_t cap) {
    Inst& I = inst_[k];
    prefill_order_.clear();
    for (uint32_t r : I.running)
        if (live_[r].pos < live_[r].target) prefill_order_.push_back(r);
    if (c_.queue == QueuePolicy::drr)
        std::stable_sort(prefill_order_.begin(), prefill_order_.end(), [this](uint32_t a, uint32_t b) {
            return run_t_[w_->requests[a].tenant] < run_t_[w_->requests[b].tenant];
        });
    const size_t first_prefill = I.batch.size();
    for (uint32_t r : prefill_order_) {
        const Live& L = live_[r];
        const uint32_t chunk =
            uint32_t(std::min<uint64_t>(std::min(L.target - L.pos, uint64_t(cap)), budget));
        if (chunk == 0 || !grow(k, r, L.pos + chunk)) continue;
        I.batch.push_back({r, chunk});
        budget -= chunk;
    }
    for (size_t i = first_prefill; i < I.batch.size() && budget > 0; ++i) {
        BatchItem& b = I.batch[i];
        const Live& L = live_[b.req];
        const uint32_t extra = uint32_t(std::min<uint64_t>(L.target - L.pos - b.chunk, budget));
        if (extra == 0 || !grow(k, b.req, L.pos + b.chunk + extra)) continue;
        b.chunk += extra;
        budget -= extra;
    }
}

// Decode only and nobody waiting: run until the first request finishes, with its pages taken now.
// If a page is missing, what was taken goes back and the run stops at the first page boundary:
// the step that needs the page then preempts exactly as one step at a time would. Returns the end.
double FleetSim::plan_decode_run(uint32_t k, const IterationWork& w, double now) {
    Inst& I = inst_[k];
    uint64_t m = UINT64_MAX;
    for (const BatchItem& b : I.batch) {
        const RequestOutcome& o = out_[b.req];
        m = std::min(m, accept_.steps_for(o.decode_step_tokens, o.output - live_[b.req].generated));
    }
    bool all = true;
    for (const BatchItem& b : I.batch)
        if (!grow(k, b.req, live_[b.req].pos + decode_tokens(b.req, m))) {
            all = false;
            break;
        }
    if (!all) {
        for (const BatchItem& b : I.batch) {
            Live& L = live_[b.req];
            const uint64_t pt = I.pool->layout().page_tokens;
            const uint64_t need = (L.pos + decode_tokens(b.req, 1) - L.own_start() + pt - 1) / pt * pt;
            if (L.kv_alloc > need && I.pool->truncate_kv(OwnerId(b.req) + 1, need) == AllocStatus::ok)
                L.kv_alloc = need;
            m = std::min(m, decode_steps_within(b.req, L.base + L.kv_alloc - L.pos));
        }
    }
    I.run_decode = w.decode;
    I.run_context0 = w.decode_context;
    I.steps = uint32_t(std::min<uint64_t>(m, UINT32_MAX));
    double end = now;
    for (uint32_t j = 0; j < I.steps; ++j) end += step_ms(k, j);
    return end;
}

// The batch of engine ideal: decodes first, then at most max_prefills prefilling requests, each
// capped at its share of the budget first. False when idle.
bool FleetSim::form_ideal(uint32_t k, double now) {
    Inst& I = inst_[k];
    const uint32_t cap = std::max<uint32_t>(1, c_.max_batch_tokens / c_.max_prefills);
    for (;;) {
        I.batch.clear();
        const uint32_t decoding = batch_decodes(k);
        // A verify schedules its token and its drafts (vLLM counts both against the budget).
        const uint32_t verified = decoding * (1 + spec_.drafts);
        const uint32_t budget = c_.max_batch_tokens > verified ? c_.max_batch_tokens - verified : 0;
        admit_waiting(k, now, budget, count_by_tenant(k));
        batch_prefills(k, budget, cap);
        if (!I.batch.empty()) return true;
        if (I.running.empty()) return false;  // idle
        // Running requests that cannot get a page and nothing decoding to finish: free memory by
        // preempting the newest one and plan again (vLLM does the same).
        preempt(k, I.running.back());
    }
}

void FleetSim::start_iteration(uint32_t k, double now) {
    Inst& I = inst_[k];
    const bool formed = c_.engine == CacheEngine::sglang ? form_sglang(k, now)
                        : c_.engine == CacheEngine::vllm ? form_vllm(k, now)
                                                         : form_ideal(k, now);
    if (!formed) return;  // idle
    observe_batch(k);
    IterationWork w;
    for (const BatchItem& b : I.batch) {
        const Live& L = live_[b.req];
        if (b.chunk)
            w.add_chunk(double(L.pos), double(b.chunk));
        else
            w.add_decode(cost_context(b.req));
    }
    add_drafts(w, spec_);
    I.steps = 1;
    const bool decode_run =
        c_.fast_decode && w.prefill_chunks == 0 && I.queue.empty() && I.status == Inst::up;
    double end = decode_run ? plan_decode_run(k, w, now) : now + cost_model(k).seconds(w) * 1000.0;
    if (falsify_now(FleetSimFalsify::late_iteration)) end += 0.01 * (end - now);
    I.busy = true;
    I.iter_start = now;
    q_.push(end, ev_iteration_end, k, ++I.iter_id);
}

double FleetSim::step_ms(uint32_t k, uint32_t j) const {
    const Inst& I = inst_[k];
    IterationWork w;
    w.decode = I.run_decode;
    // Each step moves every cost context on by the acceptance length (cost_context).
    w.decode_context = I.run_context0 + double(j) * double(I.run_decode) * accept_.length();
    add_drafts(w, spec_);
    return cost_model(k).seconds(w) * 1000.0;
}

// The iteration that ends now against the roofline of its batch, evaluated request by request
// (a run of decode steps advances each context by one per step), before the batch's positions move on.
void FleetSim::time_iteration(uint32_t k, double now) {
    const Inst& I = inst_[k];
    const BatchRoofline& model = k < c_.first_gpus.instances ? first_roofline_ : roofline_;
    BatchRoofline::Pass first, next;
    for (const BatchItem& b : I.batch) {
        if (b.chunk)
            model.add_chunk(first, double(live_[b.req].pos), double(b.chunk));
        else
            model.add_decode(first, cost_context(b.req), &next, spec_, accept_.length());
    }
    double roofline_s = 0;
    for (uint32_t j = 0; j < I.steps; ++j) roofline_s += model.step_seconds(first, next, double(j));
    const double clock = now - I.iter_start, roofline = roofline_s * 1000.0, gap = std::abs(clock - roofline);
    const double rounding = double(I.steps) * (std::nextafter(now, INFINITY) - now) + 1e-12 * roofline;
    t_.clock_ms += clock;
    t_.roofline_ms += roofline;
    ++t_.iterations_timed;
    t_.clock_gaps += gap > rounding;
    if (roofline > 0) t_.worst_clock_gap = std::max(t_.worst_clock_gap, gap / roofline);
}

void FleetSim::cut_run(uint32_t k, double now) {
    Inst& I = inst_[k];
    if (!I.busy || I.steps <= 1) return;
    double t = I.iter_start;
    uint32_t j = 0;
    while (j < I.steps) {
        t += step_ms(k, j++);
        if (t >= now) break;
    }
    if (j == I.steps) return;
    I.steps = j;
    q_.push(t, ev_iteration_end, k, ++I.iter_id);
}

uint32_t FleetSim::steps_done_by(uint32_t k, double now) const {
    const Inst& I = inst_[k];
    if (!I.busy || I.steps <= 1) return 0;
    double t = I.iter_start;
    uint32_t j = 0;
    while (j < I.steps) {
        t += step_ms(k, j);
        if (t > now) break;
        ++j;
    }
    return j;
}

// The context a decoding request's step is costed at: where its decode steps would have brought it at
// exactly the acceptance length per step (within a token of its position; its position without
// speculative decoding), so that a run of steps grows it by A per step whether it runs as one event or
// step by step.
double FleetSim::cost_context(uint32_t r) const {
    const RequestOutcome& o = out_[r];
    return double(live_[r].pos - o.decode_step_tokens) + accept_.length() * double(o.decode_steps);
}

uint64_t FleetSim::decode_tokens(uint32_t r, uint64_t m) const {
    const RequestOutcome& o = out_[r];
    return std::min<uint64_t>(o.output - live_[r].generated, accept_.tokens(o.decode_step_tokens, m));
}

// The most decode steps request r can take while its tokens fit in `room` more tokens of KV.
uint64_t FleetSim::decode_steps_within(uint32_t r, uint64_t room) const {
    const RequestOutcome& o = out_[r];
    const uint64_t left = o.output - live_[r].generated;
    return room >= left ? accept_.steps_for(o.decode_step_tokens, left)
                        : accept_.steps_within(o.decode_step_tokens, room);
}

// m decode steps of request r on instance k: the tokens they yield (decode_tokens) join its context.
void FleetSim::yield_decode_steps(uint32_t k, uint32_t r, uint32_t m) {
    const uint64_t n = decode_tokens(r, m);
    Live& L = live_[r];
    RequestOutcome& o = out_[r];
    L.pos += n;
    L.generated += uint32_t(n);
    o.decode_steps += m;
    o.decode_step_tokens += uint32_t(n);
    t_.iter_decode_tokens += n;
    stats_[k].decode_tokens += n;
}

void FleetSim::apply_decode_steps(uint32_t k, uint32_t m) {
    for (const BatchItem& b : inst_[k].batch) yield_decode_steps(k, b.req, m);
}

// The engine's match (engine sglang, vllm): the lease on its state-usable hit, its KV-visible hit, the
// branching point or junction; nothing is planned (the chunks place the states as they run).
void FleetSim::find_engine_hits(uint32_t k, uint32_t r, Hits& h) {
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    EngineAttempt a;
    uint64_t kv = 0;
    L.adm = Admission{};
    L.adm.lease = engine_admit(eng_, cache_of(k, r), *q.tokens, lookup_len(r), a, t_.engine, &kv);
    L.leased = true;
    L.adm.prompt_len = lookup_len(r);
    L.adm.cache_len = std::min<uint64_t>(std::max<uint64_t>(q.cache_len(), q.prompt_len), q.tokens->size());
    L.adm.kv_hit = kv;
    L.adm.state_hit = L.adm.lease.match.state_len;
    L.branching = c_.falsify == FleetSimFalsify::engine_no_branching ? 0 : a.branching;
    L.last_track = a.last_track;
    L.junction = a.junction;
    h.kv = kv;
    h.state = L.adm.state_hit;
    h.tainted_source = h.state > 0 && (L.adm.lease.state.handle & kTaintedHandle);
    h.record = state_record_of(L.adm.lease.state.handle);
}

// What request r can resume from on instance k: what it carries from another instance, or what
// the prefix cache holds (leased for it).
FleetSim::Hits FleetSim::find_hits(uint32_t k, uint32_t r) {
    Live& L = live_[r];
    Hits h;
    if (L.carry) {
        h.kv = L.carry_kv;
        h.state = L.carry_state;
        h.record = L.carry_record;
    } else if (caching_at(k) && eng_.on()) {
        find_engine_hits(k, r, h);
    } else if (caching_at(k)) {
        const Request& q = w_->requests[r];
        L.adm = admit_request(cache_of(k, r), c_.policy, *q.tokens, resume_lookup_len(cache_of(k, r), r),
                              q.cache_len());
        L.leased = true;
        h.kv = L.adm.kv_hit;
        h.state = L.adm.state_hit;
        h.tainted_source = h.state > 0 && (L.adm.lease.state.handle & kTaintedHandle);
        h.record = state_record_of(L.adm.lease.state.handle);
        const uint64_t page = c_.cache.page_size;
        if (h.state > 0 && h.state + page <= h.kv && falsify_now(FleetSimFalsify::checkpoint_one_page_off))
            h.state += page;
    }
    if (admit_seq_ == 0 && falsify_now(FleetSimFalsify::phantom_hit)) h.kv = h.state = lookup_len(r) / 2;
    return h;
}

// The admitted request resumes at `resume`: count consistency violations (a KV hit used past its
// state: a whole-context hit that recomputes its last token onto a state there uses none), what the
// guard held back, and the request's hits.
void FleetSim::account_resume(uint32_t r, const Hits& h, uint64_t resume) {
    Live& L = live_[r];
    RequestOutcome& o = out_[r];
    if (!c_.guard && h.kv > h.state && resume > h.state) {
        ++t_.violations;
        if (L.carry) ++t_.violations_moved;
        ++o.violations;
        L.tainted = true;
    } else if (!L.carry) {
        L.tainted = false;
    }
    if (c_.guard && h.kv > h.state)
        t_.guard_held_back += std::min(h.kv, L.target) - std::min(h.state, L.target);
    if (h.tainted_source && resume > 0) {
        ++t_.tainted_resumes;
        ++o.violations;
        L.tainted = true;
    }
    const Request& q = w_->requests[r];
    if (!o.admitted) {
        o.admitted = true;
        o.kv_hit = std::min<uint64_t>(h.kv, q.prompt_len);
        o.state_hit = std::min<uint64_t>(h.state, q.prompt_len);
    }
    o.skipped += resume;
}

FleetSim::AdmitResult FleetSim::admit(uint32_t k, uint32_t r, double now) {
    Inst& I = inst_[k];
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    if (load_from_host(k, r, now)) return loading;
    const Hits h = find_hits(k, r);
    release_host_lease(k, r);  // the admission holds its own lease now
    uint64_t resume = c_.guard ? h.state : h.kv;
    if (c_.guard && h.kv > h.state && falsify_now(FleetSimFalsify::guard_lets_one_through)) resume = h.kv;
    // Logits need at least one computed token: a whole-context hit recomputes the last one.
    if (L.target > 0) resume = std::min(resume, L.target - 1);
    const uint64_t base = L.carry ? 0 : resume;
    const uint64_t left = q.output_len > L.generated ? q.output_len - L.generated : 0;
    if (L.target + left - base > I.pool_tokens) {
        release_request(k, r);
        return too_large;
    }
    if (alloc_running_state(k, r) != AllocStatus::ok) {
        release_request(k, r);
        return no_memory;
    }
    L.slot = true;
    const PoolStats held = I.pool->stats();
    ++t_.state_admissions;
    t_.states_held += held.states;
    t_.state_bytes_held += held.state_bytes;
    t_.peak_running = std::max(t_.peak_running, uint32_t(I.running.size() + 1));
    L.base = base;
    L.tree_owned = 0;
    L.kv_alloc = 0;
    t_.overlapped_admissions += !I.running.empty();
    account_resume(r, h, resume);
    audit_resume(r, h, resume);
    // What a decode instance resumes from came with the request from its prefill instance.
    admissions_.push_back({r, k, h.kv, resume, L.generated, L.carry || L.decode_stage});
    if (L.carry) {
        // Nothing leased locally: plan this request's checkpoints from where it resumes.
        const uint64_t page = c_.cache.page_size;
        L.adm = Admission{};
        L.adm.prompt_len = lookup_len(r);
        L.adm.cache_len = cache_len_of(q, page);
        if (caching_at(k))
            L.adm.plan = plan_checkpoints(c_.policy, uint32_t(page), L.adm.cache_len, resume, resume);
        L.carry = false;
    }
    start_running(k, r, resume, now);
    L.chunk_from = resume;
    return admitted;
}

void FleetSim::start_running(uint32_t k, uint32_t r, uint64_t resume, double now) {
    Inst& I = inst_[k];
    Live& L = live_[r];
    L.pos = resume;
    L.resume = resume;
    L.plan_next = 0;
    L.inserted = 0;
    L.replicated = std::min(L.replicated, resume);
    L.admit_seq = admit_seq_++;
    L.phase = Phase::running;
    L.inst = int32_t(k);
    I.running.push_back(r);
    ++stats_[k].admitted;
    stats_[k].peak_running = std::max<uint32_t>(stats_[k].peak_running, uint32_t(I.running.size()));
    if (L.fault >= 0) {
        FaultOutcome& fo = fault_out_[uint32_t(L.fault)];
        fo.recovered_ms = std::max(fo.recovered_ms, now);
        ++fo.resumed_from[size_t(L.recovered_from)];
        L.recovered_from = RecoverySource::recompute;
        L.fault = -1;
    }
}

// Inserts what the request has computed into its instance's prefix cache: progress after every
// prefill chunk, everything (with the output when the output tokens are known) at completion.
void FleetSim::cache_progress(uint32_t k, uint32_t r, double now, bool final) {
    if (eng_.on()) {
        engine_progress(k, r, now, final);
        return;
    }
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    RadixCache& c = cache_of(k, r);
    const uint64_t page = c_.cache.page_size;
    const uint64_t upto = (final ? L.adm.cache_len : std::min(L.pos, L.adm.cache_len)) / page * page;
    if (upto > L.inserted && upto > L.resume) {
        cp_scratch_.clear();
        const auto& plan = L.adm.plan;
        while (L.plan_next < plan.size() && plan[L.plan_next].pos <= upto) {
            const PlannedCheckpoint& p = plan[L.plan_next++];
            // A request that resumed past its state (no guard) never computed the states before it.
            if (p.pos <= L.resume) continue;
            const StateRecord written{p.pos, L.audit_mismatched};
            cp_scratch_.push_back(
                {p.pos, {checkpoint_handle(L.tainted, written), cost_.state_bytes()}, p.kind});
        }
        c.insert(q.tokens, upto, cp_scratch_);
        if (router_.wants_kv_events()) router_.kv_stored(k, *q.tokens, upto, now);
        L.inserted = upto;
        const bool boundary = final || L.pos >= L.target;
        if (boundary) {
            apply_retention(c_.policy, c, *q.tokens, upto);
            replicate(k, r, upto, now);
            write_through(k, r, upto, now);
        }
        c.enforce_capacity();
    }
    if (final && L.leased) {
        c.release(L.adm.lease);
        L.leased = false;
        c.enforce_capacity();
    }
}

// The engine's caching (engine sglang, vllm) after the prefill chunk that just ran, [chunk_from, pos),
// or at completion; the lease is given back at completion.
void FleetSim::engine_progress(uint32_t k, uint32_t r, double now, bool final) {
    Live& L = live_[r];
    EngineAttempt a{L.branching, L.last_track, L.junction};
    if (!final) {
        const uint64_t start = L.chunk_from;
        L.chunk_from = L.pos;
        const EngineInsert ins = engine_after_chunk(eng_, a, start, L.pos, L.target, t_.engine);
        L.last_track = a.last_track;
        engine_insert(k, r, ins, {}, now);
        return;
    }
    const EngineInsert ins =
        engine_at_finish(eng_, a, L.pos, L.adm.cache_len, L.target, t_.engine, &eng_states_);
    L.last_track = a.last_track;
    engine_insert(k, r, ins, eng_states_, now);
    if (L.leased) {
        RadixCache& c = cache_of(k, r);
        c.release(L.adm.lease);
        L.leased = false;
        c.enforce_capacity();
    }
}

// Inserts q[0, ins.len) with the engine's states (`states` besides the one at its end), then SGLang's
// re-lock on what was inserted (cache_unfinished_req: the tree owns the request's KV below it).
void FleetSim::engine_insert(uint32_t k, uint32_t r, const EngineInsert& ins,
                             std::span<const uint64_t> states, double now) {
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    RadixCache& c = cache_of(k, r);
    const uint64_t page = c.config().page_size;
    const uint64_t len = std::min<uint64_t>(ins.len, q.tokens->size()) / page * page;
    if (len == 0) return;
    cp_scratch_.clear();
    const auto add = [&](uint64_t pos, CheckpointKind kind) {
        // A state at or before the resume is the one the request resumed from (or one it never computed).
        if (pos <= L.resume || pos > len) return;
        const StateRecord written{pos, L.audit_mismatched};
        cp_scratch_.push_back({pos, {checkpoint_handle(L.tainted, written), cost_.state_bytes()}, kind});
    };
    for (uint64_t p : states) add(p, CheckpointKind::interval);
    if (ins.state && ins.len == len) add(len, ins.kind);
    if (len <= L.inserted && cp_scratch_.empty() && !ins.relock) return;
    c.insert(q.tokens, len, cp_scratch_);
    if (router_.wants_kv_events() && len > L.inserted) router_.kv_stored(k, *q.tokens, len, now);
    L.inserted = std::max(L.inserted, len);
    // vLLM's running request holds its cached blocks as SGLang's holds its re-locked path: what the
    // shared pool hands to the tree (hand_to_tree), so both hold the path they inserted.
    if ((ins.relock || (shared_pool() && c_.engine == CacheEngine::vllm)) && L.leased) {
        c.release(L.adm.lease);
        L.adm.lease = c.acquire(*q.tokens, len, false);
        hand_to_tree(k, r, L.adm.lease.match.kv_len);
    }
    c.enforce_capacity();
}

void FleetSim::end_iteration(uint32_t k, double now) {
    Inst& I = inst_[k];
    I.busy = false;
    InstanceStats& st = stats_[k];
    st.busy_ms += now - I.iter_start;
    st.iterations += I.steps;
    // A run of decode steps grows its contexts step by step: its last step is its longest.
    const double step = I.steps > 1 ? step_ms(k, I.steps - 1) : now - I.iter_start;
    st.longest_step_ms = std::max(st.longest_step_ms, step);
    bool pre = false, dec = false;
    for (const BatchItem& b : I.batch) (b.chunk ? pre : dec) = true;
    count_iteration(k, pre, dec, I.steps);
    timeline_.add(k, I.iter_start, now, I.status == Inst::draining ? 3 : pre && dec ? 2 : pre ? 0 : 1);
    time_iteration(k, now);
    for (const BatchItem& b : I.batch) {
        const uint32_t r = b.req;
        Live& L = live_[r];
        RequestOutcome& o = out_[r];
        if (L.phase != Phase::running || L.inst != int32_t(k)) continue;
        bool finished = false;
        if (b.chunk) {
            L.pos += b.chunk;
            o.prefill_work += b.chunk;
            t_.iter_prefill_tokens += b.chunk + (falsify_now(FleetSimFalsify::skew_ledger) ? 1 : 0);
            st.prefill_tokens += b.chunk;
            if (caching_at(k)) cache_progress(k, r, now, false);
            if (L.pos >= L.target) {
                // A prefill instance computes the first token only under SGLang's handoff (vLLM's
                // decoder recomputes the last prompt token and makes it); the decoder streams it.
                const bool prefill_stage = c_.pd.on() && is_prefill(k);
                const bool first = !prefill_stage || c_.pd.handoff == StateHandoff::slot;
                if (first && L.generated < o.output) {
                    ++L.generated;
                    ++t_.iter_first_tokens;
                }
                if (prefill_stage && hand_off(k, r, now)) continue;
                if (o.first_token_ms < 0) o.first_token_ms = now;
                finished = L.generated >= o.output;
            }
        } else {
            yield_decode_steps(k, r, I.steps);
            finished = L.generated >= o.output;
            if (!finished && I.steps > 1) {
                // Give back pages taken ahead for a run that was cut short.
                const uint64_t pt = I.pool->layout().page_tokens;
                const uint64_t need = (L.pos - L.own_start() + pt - 1) / pt * pt;
                if (L.kv_alloc > need && I.pool->truncate_kv(OwnerId(r) + 1, need) == AllocStatus::ok)
                    L.kv_alloc = need;
            }
        }
        if (finished) complete(k, r, now);
    }
    I.batch.clear();
    I.steps = 1;
    if (I.status == Inst::draining) {
        if (I.migrate_pending) {
            migrate_running(k, now);
            return;
        }
        if (I.running.empty()) {
            go_down(k, now);
            return;
        }
    }
    start_iteration(k, now);
}

void FleetSim::complete(uint32_t k, uint32_t r, double now) {
    Inst& I = inst_[k];
    Live& L = live_[r];
    if (caching_at(k)) cache_progress(k, r, now, true);
    L.phase = Phase::done;  // before the release: a completed attempt logs no abandoned work
    if (falsify_now(FleetSimFalsify::leak_pages)) {  // its working memory is not given back
        L.slot = false;
        L.kv_alloc = 0;
    }
    release_request(k, r);
    charge_cache(k);
    I.running.erase(std::find(I.running.begin(), I.running.end(), r));
    ++stats_[k].completed;
    ++finished_;
    if (falsify_now(FleetSimFalsify::drop_completion)) return;
    RequestOutcome& o = out_[r];
    o.completed = true;
    o.finish_ms = now;
    o.generated = L.generated;
    o.instance = int32_t(k);
}

}  // namespace k3
