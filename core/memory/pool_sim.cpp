#include "core/memory/pool_sim.h"

#include <algorithm>
#include <deque>

#include "core/base/fmath.h"
#include "core/base/rng.h"

namespace k3 {

uint32_t prefix_cache_grid(const PoolLayout& l) {
    if (l.design == PoolDesign::hybrid_pages) return l.page_tokens;
    return l.page_tokens * ((64 + l.page_tokens - 1) / l.page_tokens);
}

std::vector<uint32_t> prefix_lengths(const PoolWorkload& w) {
    std::vector<uint32_t> v;
    const double lo = w.prefix_min, hi = std::max(w.prefix_max, w.prefix_min);
    for (int k = 0; k < w.prefixes; ++k) {
        const double f = w.prefixes > 1 ? double(k) / double(w.prefixes - 1) : 0.0;
        v.push_back(uint32_t(lo * k3exp(f * k3log(hi / lo)) + 0.5));  // geometric spread, portable exp/log
    }
    return v;
}

std::vector<SimRequest> make_request_stream(const PoolWorkload& w) {
    Rng rng(w.seed);
    Rng arrivals = rng.fork(1), lengths = rng.fork(2), prefixes = rng.fork(3);
    const std::vector<uint32_t> plen = prefix_lengths(w);
    std::vector<SimRequest> out;
    double t = 0;
    auto around = [](Rng& r, double mean) {
        return std::max<uint32_t>(1, uint32_t(mean * r.uniform(0.5, 1.5) + 0.5));
    };
    const int shift_from = int(w.shift_at * w.requests + 0.5);
    for (int i = 0; i < w.requests; ++i) {
        SimRequest r;
        r.id = uint32_t(i);
        t += arrivals.exponential(w.arrival_rate);
        r.arrival = uint64_t(t);
        r.phase = i >= shift_from ? 1 : 0;
        const double scale = r.phase ? w.shift_factor : 1.0;
        r.prompt = around(lengths, w.prompt_tokens * scale);
        r.output = around(lengths, w.output_tokens);
        if (!plen.empty() && prefixes.bernoulli(w.prefix_share)) {
            r.prefix = int(prefixes.below(plen.size()));
            r.prompt += plen[size_t(r.prefix)];
        }
        out.push_back(r);
    }
    return out;
}

namespace {

struct Entry {
    bool alive = false;
    uint32_t refs = 0;
    uint64_t last_use = 0;
    uint64_t tokens = 0;
};

struct Live {
    uint32_t idx;
    uint64_t own_tokens;  // KV the request owns (prompt beyond the cached prefix, plus output)
    uint32_t generated;
    int entry;  // cache entry it references, -1 none
};

class Scheduler {
  public:
    Scheduler(PagePool& pool, std::vector<SimRequest> reqs, std::vector<uint32_t> plen,
              const PoolSimOptions& o, PoolSimResult& res)
        : pool_(pool),
          reqs_(std::move(reqs)),
          plen_(std::move(plen)),
          o_(o),
          res_(res),
          entries_(plen_.size()) {
        prompt_.resize(reqs_.size());
        left_.resize(reqs_.size());
        first_admit_.assign(reqs_.size(), UINT64_MAX);
        for (size_t i = 0; i < reqs_.size(); ++i) prompt_[i] = reqs_[i].prompt, left_[i] = reqs_[i].output;
        res_.hits_by_prefix.assign(plen_.size(), 0);
        res_.outcomes.assign(reqs_.size(), PoolRequestOutcome::none);
        audit_every_ = o.audit_every > 0 ? uint64_t(o.audit_every) : 0;
    }

    bool advance(const Deadline* deadline);  // true when the stream is served
    double progress() const {
        return reqs_.empty() ? 1.0 : double(res_.finished + res_.dropped) / double(reqs_.size());
    }

  private:
    static OwnerId req_owner(uint32_t i) { return OwnerId(i) + 1; }
    static OwnerId entry_owner(size_t k) { return kCacheOwnerBase + k; }

    bool evict_one();
    AllocStatus allocate(uint32_t i, uint64_t own, int create_entry, uint64_t entry_tokens);
    bool try_admit(uint32_t i);
    void preempt(size_t pos);
    void drop_running(size_t pos);
    void finish(size_t pos);
    void arrive();
    void admit();
    void sample();
    std::string recount_bytes(const PoolSample& p) const;
    void audit();
    void finalise();
    void set_outcome(uint32_t i, PoolRequestOutcome o);
    void drop_waiting_head();
    bool fault_due(PoolSimFault f) const { return o_.fault == f && !fault_done_ && t_ >= o_.fault_step; }
    void damage_pool();

    PagePool& pool_;
    const std::vector<SimRequest> reqs_;
    const std::vector<uint32_t> plen_;
    const PoolSimOptions o_;
    PoolSimResult& res_;
    std::vector<Entry> entries_;
    std::vector<uint64_t> prompt_;  // current prompt (grows with output kept across preemption)
    std::vector<uint32_t> left_;    // output tokens still to generate
    std::vector<uint64_t> first_admit_;
    std::deque<uint32_t> waiting_;
    std::vector<Live> running_;  // in admission order
    uint64_t t_ = 0;
    AllocStatus last_fail_ = AllocStatus::ok;
    double running_sum_ = 0, wait_sum_ = 0, latency_sum_ = 0;
    uint32_t admitted_first_ = 0;
    uint32_t step_refused_[5] = {};  // refusals in the current step, by cause
    uint32_t step_with_room_ = 0;
    uint64_t need_bytes_ = 0;  // data bytes the request being admitted needs at least
    uint64_t audit_every_ = 0;
    size_t next_ = 0;  // next request to arrive
    uint64_t slice_start_ = 0;
    bool done_ = false;
    bool fault_done_ = false;  // the falsifier's fault has struck (once per run)
};

void Scheduler::set_outcome(uint32_t i, PoolRequestOutcome o) {
    if (res_.outcomes[i] != PoolRequestOutcome::none) ++res_.outcome_conflicts;
    res_.outcomes[i] = o;
}

// The queue's head leaves unserved: it cannot fit even in an otherwise empty pool (or a falsifier
// says so).
void Scheduler::drop_waiting_head() {
    const uint32_t head = waiting_.front();
    waiting_.pop_front();
    res_.drops.push_back({head, uint64_t(o_.states_per_request), prompt_[head]});
    set_outcome(head, PoolRequestOutcome::dropped);
    ++res_.dropped;
}

// The falsifier's damage to the pool: the oldest running request is the victim, the next the other owner.
void Scheduler::damage_pool() {
    PagePool::Damage d;
    switch (o_.fault) {
        case PoolSimFault::second_owner: d = PagePool::Damage::second_owner; break;
        case PoolSimFault::page_count: d = PagePool::Damage::page_count; break;
        case PoolSimFault::lost_page: d = PagePool::Damage::lost_page; break;
        default: return;
    }
    if (fault_done_ || t_ < o_.fault_step || running_.size() < 2) return;
    fault_done_ = pool_.damage(d, req_owner(running_[0].idx), req_owner(running_[1].idx));
}

// Evict the least recently used unreferenced cache entry. False when none is evictable.
bool Scheduler::evict_one() {
    int best = -1;
    for (size_t k = 0; k < entries_.size(); ++k) {
        const Entry& e = entries_[k];
        if (e.alive && e.refs == 0 && (best < 0 || e.last_use < entries_[size_t(best)].last_use))
            best = int(k);
    }
    if (best < 0) return false;
    pool_.release(entry_owner(size_t(best)));
    entries_[size_t(best)] = Entry{};
    ++res_.evictions;
    return true;
}

// Everything a request needs at admission, all or nothing: its state slots, its own KV and, when
// it creates a cache entry, the entry's KV and checkpoint state.
AllocStatus Scheduler::allocate(uint32_t i, uint64_t own, int create_entry, uint64_t entry_tokens) {
    const OwnerId me = req_owner(i);
    auto fail = [&](AllocStatus st) {
        pool_.release(me);
        if (create_entry >= 0) pool_.release(entry_owner(size_t(create_entry)));
        return st;
    };
    StateRef s;
    for (int k = 0; k < o_.states_per_request; ++k)
        if (AllocStatus st = pool_.alloc_state(me, &s); st != AllocStatus::ok) return fail(st);
    if (create_entry >= 0) {
        const OwnerId eo = entry_owner(size_t(create_entry));
        if (AllocStatus st = pool_.alloc_state(eo, &s); st != AllocStatus::ok) return fail(st);
        if (AllocStatus st = pool_.grow_kv(eo, entry_tokens); st != AllocStatus::ok) return fail(st);
    }
    if (AllocStatus st = pool_.grow_kv(me, own); st != AllocStatus::ok) return fail(st);
    return AllocStatus::ok;
}

bool Scheduler::try_admit(uint32_t i) {
    const SimRequest& r = reqs_[i];
    const uint64_t prompt = prompt_[i];
    const int k = r.prefix;
    // The reusable part: the shared prefix floored to the cache grid, leaving at least one prompt
    // token to compute (a hit must still produce logits).
    const uint64_t g = o_.cache_grid;
    const uint64_t cacheable = k >= 0 ? std::min<uint64_t>(plen_[size_t(k)], prompt - 1) / g * g : 0;
    auto admitted = [&](uint64_t own, int entry, bool hit) {
        running_.push_back({i, own, 0, entry});
        if (entry >= 0) {
            ++entries_[size_t(entry)].refs;
            entries_[size_t(entry)].last_use = t_;
        }
        if (hit && first_admit_[i] == UINT64_MAX) {
            ++res_.prefix_hits;
            ++res_.hits_by_prefix[size_t(k)];
            res_.reused_tokens += cacheable;
        }
        if (first_admit_[i] == UINT64_MAX) {
            first_admit_[i] = t_;
            wait_sum_ += double(t_ - r.arrival);
            ++admitted_first_;
        }
        return true;
    };
    {  // the least this request needs in data bytes (with a hit if one is available now)
        const bool hit_now = cacheable > 0 && entries_[size_t(k)].alive;
        const PoolModel& m = pool_.model();
        need_bytes_ = uint64_t(o_.states_per_request) * m.state_bytes() +
                      (hit_now ? prompt - cacheable : prompt) * m.kv_bytes_per_token();
    }
    for (;;) {
        const bool hit = cacheable > 0 && entries_[size_t(k)].alive;
        const bool create = cacheable > 0 && !hit;
        if (hit) ++entries_[size_t(k)].refs;  // pinned: eviction must not take the entry we reuse
        AllocStatus st = allocate(i, cacheable ? prompt - cacheable : prompt, create ? k : -1, cacheable);
        if (hit) --entries_[size_t(k)].refs;
        if (st == AllocStatus::ok) {
            if (create) {
                entries_[size_t(k)] = Entry{true, 0, t_, cacheable};
                ++res_.entries_created;
            }
            return admitted(cacheable ? prompt - cacheable : prompt, cacheable ? k : -1, hit);
        }
        last_fail_ = st;
        if (evict_one()) continue;
        if (create) {
            // The checkpoint is optional (sglang #37619: skip it when no slot is free): admit uncached.
            st = allocate(i, prompt, -1, 0);
            if (st == AllocStatus::ok) return admitted(prompt, -1, false);
            last_fail_ = st;
        }
        return false;
    }
}

void Scheduler::preempt(size_t pos) {
    const Live l = running_[pos];
    pool_.release(req_owner(l.idx));
    if (l.entry >= 0) --entries_[size_t(l.entry)].refs, entries_[size_t(l.entry)].last_use = t_;
    prompt_[l.idx] += l.generated;  // recompute: the output so far becomes prompt
    left_[l.idx] -= l.generated;
    running_.erase(running_.begin() + std::ptrdiff_t(pos));
    waiting_.push_front(l.idx);
    ++res_.preemptions;
}

// A request alone in the pool (with the cache entry it reads) that cannot grow by one token.
void Scheduler::drop_running(size_t pos) {
    const Live l = running_[pos];
    const bool reads_entry = l.entry >= 0;
    const uint64_t entry_tokens = reads_entry ? entries_[size_t(l.entry)].tokens : 0;
    res_.drops.push_back(
        {l.idx, uint64_t(o_.states_per_request) + (reads_entry ? 1 : 0), l.own_tokens + 1 + entry_tokens});
    set_outcome(l.idx, PoolRequestOutcome::dropped);
    pool_.release(req_owner(l.idx));
    if (reads_entry) --entries_[size_t(l.entry)].refs, entries_[size_t(l.entry)].last_use = t_;
    running_.erase(running_.begin() + std::ptrdiff_t(pos));
    ++res_.dropped;
}

void Scheduler::finish(size_t pos) {
    const Live l = running_[pos];
    if (fault_due(PoolSimFault::leak_request))
        fault_done_ = true;  // its memory stays with an owner nobody will release
    else
        pool_.release(req_owner(l.idx));
    set_outcome(l.idx, PoolRequestOutcome::finished);
    if (l.entry >= 0) --entries_[size_t(l.entry)].refs, entries_[size_t(l.entry)].last_use = t_;
    latency_sum_ += double(t_ - reqs_[l.idx].arrival);
    running_.erase(running_.begin() + std::ptrdiff_t(pos));
    ++res_.finished;
}

void Scheduler::sample() {
    const PoolStats s = pool_.stats();
    const PoolModel& m = pool_.model();
    PoolSample p;
    p.step = t_;
    p.running = uint32_t(running_.size());
    p.waiting = uint32_t(waiting_.size());
    for (size_t k = 0; k < entries_.size(); ++k) {
        if (!entries_[k].alive) continue;
        p.kv_cached += pool_.kv_tokens(entry_owner(k)) * m.kv_bytes_per_token();
        p.state_cached += uint64_t(pool_.states(entry_owner(k)).size()) * pool_.layout().state_data_bytes;
    }
    p.kv_running = s.kv_filled_bytes - p.kv_cached;
    p.state_running = s.state_bytes - p.state_cached;
    p.padding = s.padding_bytes;
    p.kv_unfilled = s.kv_unfilled_bytes();
    p.free = s.free_bytes;
    running_sum_ += double(running_.size());
    ++res_.steps;
    res_.sum_data += double(s.data_bytes());
    res_.sum_padding += double(s.padding_bytes);
    res_.sum_unfilled += double(s.kv_unfilled_bytes());
    res_.sum_free += double(s.free_bytes);
    res_.sum_states_ideal += double(s.states_if_contiguous);
    res_.sum_states_placeable += double(s.states_placeable);
    res_.peak_data = std::max(res_.peak_data, s.data_bytes());
    size_t late = 0;
    for (const Live& l : running_) late += reqs_[l.idx].phase;
    const int phase = running_.empty() ? -1 : late == 0 ? 0 : late == running_.size() ? 1 : -1;
    if (phase >= 0) {
        PoolSimResult::Phase& ph = res_.phases[phase];
        ++ph.steps;
        ph.running += double(running_.size());
        ph.data += double(s.data_bytes());
        ph.free += double(s.free_bytes);
        ph.states_ideal += double(s.states_if_contiguous);
        ph.states_placeable += double(s.states_placeable);
        for (int c = 0; c < 5; ++c) ph.refused_by[c] += step_refused_[c];
        ph.refused_with_room += step_with_room_;
    }
    for (uint32_t& c : step_refused_) c = 0;
    step_with_room_ = 0;
    if (t_ % res_.sample_stride == 0) {
        ++res_.recounts;
        if (std::string e = recount_bytes(p); !e.empty() && res_.recount_mismatches++ == 0)
            res_.recount_error = "step " + std::to_string(t_) + ": " + e;
        res_.samples.push_back(p);
        if (res_.samples.size() >= 2 * PoolSimResult::kMaxSamples) {  // keep every other: stride doubles
            std::vector<PoolSample> half;
            for (size_t j = 0; j < res_.samples.size(); j += 2) half.push_back(res_.samples[j]);
            res_.samples = std::move(half);
            res_.sample_stride *= 2;
        }
    }
    res_.peak_running = std::max(res_.peak_running, uint32_t(running_.size()));
}

// One sample's bytes recounted from the pool's own tables, apart from the running totals the sample
// was made from: each owner's page and slot lists (split between requests and cache entries as the
// sample splits them) and the design's free structures. Empty when they tile the budget and equal the
// sample; else the first difference.
std::string Scheduler::recount_bytes(const PoolSample& p) const {
    const PoolLayout& l = pool_.layout();
    const uint64_t kv_per_token = pool_.model().kv_bytes_per_token();
    uint64_t kv[2] = {0, 0}, state[2] = {0, 0}, held = 0;  // [request, cache entry]
    for (OwnerId o : pool_.owners()) {
        const size_t cached = is_cache_owner(o) ? 1 : 0;
        const uint64_t slots = pool_.states(o).size();
        kv[cached] += pool_.kv_tokens(o) * kv_per_token;
        state[cached] += slots * l.state_data_bytes;
        held += uint64_t(pool_.kv_pages(o).size()) * l.kv_page_bytes + slots * l.state_slot_bytes;
    }
    const uint64_t free = pool_.free_list_bytes();
    auto differ = [](const char* what, uint64_t recounted, uint64_t against) {
        return std::string(what) + ": recounted " + std::to_string(recounted) + " B against " +
               std::to_string(against) + " B";
    };
    if (held + free + l.unusable_bytes != l.budget_bytes)
        return differ("held + free + unusable, the budget", held + free + l.unusable_bytes, l.budget_bytes);
    if (kv[0] != p.kv_running) return differ("running KV", kv[0], p.kv_running);
    if (kv[1] != p.kv_cached) return differ("cached KV", kv[1], p.kv_cached);
    if (state[0] != p.state_running) return differ("running state", state[0], p.state_running);
    if (state[1] != p.state_cached) return differ("cached state", state[1], p.state_cached);
    const uint64_t structure = held - kv[0] - kv[1] - state[0] - state[1];
    if (structure != p.padding + p.kv_unfilled)
        return differ("padding and unfilled KV", structure, p.padding + p.kv_unfilled);
    if (free != p.free) return differ("free", free, p.free);
    return {};
}

void Scheduler::audit() {
    ++res_.audits;
    if (!res_.audit_error.empty()) return;
    std::string e = pool_.audit();
    if (e.empty()) {
        // The scheduler's view: each running request and live entry holds what it should.
        for (const Live& l : running_)
            if (pool_.kv_tokens(req_owner(l.idx)) != l.own_tokens ||
                pool_.states(req_owner(l.idx)).size() != size_t(o_.states_per_request))
                e = "request " + std::to_string(l.idx) + " holds the wrong amount of memory";
        for (size_t k = 0; k < entries_.size(); ++k)
            if (entries_[k].alive && (pool_.kv_tokens(entry_owner(k)) != entries_[k].tokens ||
                                      pool_.states(entry_owner(k)).size() != 1))
                e = "cache entry " + std::to_string(k) + " holds the wrong amount of memory";
        if (pool_.owners().size() !=
            running_.size() + size_t(std::count_if(entries_.begin(), entries_.end(),
                                                   [](const Entry& x) { return x.alive; })))
            e = "pool owners differ from running requests plus cache entries";
    }
    if (!e.empty()) res_.audit_error = "step " + std::to_string(t_) + ": " + e;
}

// This step's arrivals join the queue.
void Scheduler::arrive() {
    while (next_ < reqs_.size() && reqs_[next_].arrival <= t_) {
        if (fault_due(PoolSimFault::lose_request)) {
            fault_done_ = true;
            ++next_;
            continue;
        }
        if (reqs_[next_].prefix >= 0) res_.wanted_prefix_tokens += plen_[size_t(reqs_[next_].prefix)];
        waiting_.push_back(uint32_t(next_++));
    }
}

// Admission: FCFS while the head fits.
void Scheduler::admit() {
    while (!waiting_.empty()) {
        const uint32_t head = waiting_.front();
        if (fault_due(PoolSimFault::refuse_fitting)) {
            fault_done_ = true;
            drop_waiting_head();
            continue;
        }
        if (try_admit(head)) {
            waiting_.pop_front();
            continue;
        }
        ++res_.blocked_steps;
        ++res_.blocked_by[size_t(last_fail_)];
        ++step_refused_[size_t(last_fail_)];
        const uint64_t free = pool_.stats().free_bytes;
        res_.free_at_block_sum += free;
        if (free >= need_bytes_) ++res_.refused_with_room, ++step_with_room_;
        if (!running_.empty()) return;
        drop_waiting_head();  // it cannot fit even in an otherwise empty pool
    }
}

bool Scheduler::advance(const Deadline* deadline) {
    if (done_) return true;
    const size_t n = reqs_.size();
    for (; t_ < o_.max_steps; ++t_) {
        // The clock only decides where a slice ends; results never depend on it.
        if (deadline && t_ % 64 == 0 && t_ > slice_start_ && deadline->passed()) {
            slice_start_ = t_;
            return false;
        }
        arrive();
        admit();
        damage_pool();
        // Decode: one token per running request.
        for (size_t pos = 0; pos < running_.size();) {
            Live& l = running_[pos];
            AllocStatus st;
            bool self_preempted = false;
            while ((st = pool_.grow_kv(req_owner(l.idx), l.own_tokens + 1)) != AllocStatus::ok) {
                if (evict_one()) continue;
                const size_t victim = running_.size() - 1;
                if (victim == pos) {
                    // Alone and still no room: it would come back, refill the pool and fail again.
                    if (running_.size() == 1)
                        drop_running(pos);
                    else
                        preempt(pos);
                    self_preempted = true;
                    break;
                }
                preempt(victim);
            }
            if (self_preempted) continue;
            Live& cur = running_[pos];
            ++cur.own_tokens;
            ++cur.generated;
            if (cur.generated == left_[cur.idx]) {
                finish(pos);
                continue;
            }
            ++pos;
        }
        sample();
        if (t_ == o_.snapshot_step) {
            res_.snapshot = pool_.map();
            res_.snapshot_step = t_;
        }
        if (audit_every_ > 0 && t_ % audit_every_ == 0) {
            audit();
            if (res_.audits % 128 == 0) audit_every_ *= 2;  // long runs: audits thin out, cost stays bounded
        }
        if (next_ == n && waiting_.empty() && running_.empty()) break;
    }
    finalise();
    return true;
}

void Scheduler::finalise() {
    done_ = true;
    res_.completed = next_ == reqs_.size() && waiting_.empty() && running_.empty();
    audit();
    // Release what is left (only when stopped early) and the cache; everything must come back.
    for (const Live& l : running_) pool_.release(req_owner(l.idx));
    running_.clear();
    for (size_t k = 0; k < entries_.size(); ++k)
        if (entries_[k].alive) pool_.release(entry_owner(k)), entries_[k] = Entry{};
    res_.end_stats = pool_.stats();
    const PoolStats& s = res_.end_stats;
    res_.freed_at_end = s.kv_pages == 0 && s.states == 0 && s.kv_tokens == 0 && pool_.owners().empty() &&
                        pool_.free_list_bytes() + s.unusable_bytes == s.budget_bytes;
    audit();
    res_.mean_running = res_.steps ? running_sum_ / double(res_.steps) : 0;
    res_.mean_wait = admitted_first_ ? wait_sum_ / admitted_first_ : 0;
    res_.mean_latency = res_.finished ? latency_sum_ / res_.finished : 0;
    res_.compactions = pool_.compactions();
    res_.bytes_moved = pool_.bytes_moved();
}

}  // namespace

struct PoolSimulation::Impl {
    PoolSimResult res;
    Scheduler sched;
    Impl(PagePool& pool, std::vector<SimRequest> r, std::vector<uint32_t> p, const PoolSimOptions& o)
        : sched(pool, std::move(r), std::move(p), o, res) {}
};

PoolSimulation::PoolSimulation(PagePool& pool, std::vector<SimRequest> requests,
                               std::vector<uint32_t> prefix_len, const PoolSimOptions& o)
    : impl_(std::make_unique<Impl>(pool, std::move(requests), std::move(prefix_len), o)) {}
PoolSimulation::~PoolSimulation() = default;
bool PoolSimulation::advance(const Deadline* deadline) { return impl_->sched.advance(deadline); }
double PoolSimulation::progress() const { return impl_->sched.progress(); }
const PoolSimResult& PoolSimulation::result() const { return impl_->res; }

PoolSimResult simulate_pool(PagePool& pool, const std::vector<SimRequest>& requests,
                            const std::vector<uint32_t>& prefix_len, const PoolSimOptions& o) {
    PoolSimulation sim(pool, requests, prefix_len, o);
    sim.advance(nullptr);
    return sim.result();
}

}  // namespace k3
