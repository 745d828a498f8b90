// FleetSim: the event loop, routing, faults and recovery. Instance scheduling (batching,
// admission, completion) is in fleet_instance.cpp.
#include <algorithm>
#include <optional>

#include "core/fleet/fleet_sim_internal.h"
#include "core/lifecycle/migration_cost.h"
#include "core/model/accounting.h"

namespace k3 {

const char* fail_reason_name(FailReason f) {
    switch (f) {
        case FailReason::none: return "none";
        case FailReason::no_instance: return "no instance left";
        case FailReason::too_large: return "larger than an instance's working memory";
        case FailReason::stalled: return "stalled";
    }
    return "?";
}

const std::vector<std::string>& FleetSim::timeline_categories() {
    static const std::vector<std::string> c = {"prefill", "decode", "prefill + decode", "draining", "down"};
    return c;
}

// What routers see: instances that are up, their requests in flight, their cache matches.
// Matches are remembered for the request being routed (routers, the best-match statistic and the
// queue cost ask for the same ones).
class FleetRouterView final : public RouterView {
  public:
    // Under prefill/decode disaggregation a stage's router sees only that stage's instances.
    enum class Stage : uint8_t { all, prefill, decode };
    explicit FleetRouterView(const FleetSim& s, Stage stage = Stage::all)
        : s_(s), stage_(stage), memo_(s.inst_.size()), have_(s.inst_.size(), 0) {}
    // The view of the stage request r is in.
    FleetRouterView(const FleetSim& s, uint32_t r)
        : FleetRouterView(s, !s.c_.pd.on()             ? Stage::all
                             : s.live_[r].decode_stage ? Stage::decode
                                                       : Stage::prefill) {}
    uint32_t instances() const override { return uint32_t(s_.inst_.size()); }
    bool eligible(uint32_t i) const override {
        if (stage_ != Stage::all && s_.is_prefill(i) != (stage_ == Stage::prefill)) return false;
        return s_.inst_[i].status == FleetSim::Inst::up;
    }
    double load(uint32_t i) const override {
        return double(s_.inst_[i].queue.size() + s_.inst_[i].running.size());
    }
    // One request per view: the memo is keyed by instance only.
    Match match(uint32_t i, const Request& r, uint64_t len) const override {
        if (!s_.caching_at(i)) return {};
        if (!have_[i]) {
            const auto& caches = s_.inst_[i].caches;
            const size_t ns = s_.c_.quotas ? std::min<size_t>(r.tenant, caches.size() - 1) : 0;
            memo_[i] = caches[ns]->match(*r.tokens, len);
            have_[i] = 1;
        }
        return memo_[i];
    }
    double now_ms() const override { return s_.now_; }
    bool one_namespace() const override { return !s_.c_.quotas; }
    // Dynamo's active blocks: those of every request routed here and not finished (queued ones
    // count their whole context, running ones what they hold).
    double active_blocks(uint32_t i, uint32_t block) const override {
        const auto& I = s_.inst_[i];
        uint64_t n = 0;
        for (uint32_t r : I.running) n += (s_.live_[r].pos + block - 1) / block;
        I.queue.for_each([&](uint32_t r) { n += (s_.live_[r].target + block - 1) / block; });
        return double(n);
    }

  private:
    const FleetSim& s_;
    Stage stage_;
    mutable std::vector<Match> memo_;
    mutable std::vector<uint8_t> have_;
};

namespace {

// The routers' falsifiers (module 11's router checks) as the router's own corruption hook.
std::optional<Router::Corrupt> router_corruption(FleetSimFalsify f) {
    switch (f) {
        case FleetSimFalsify::approx_misinsert: return Router::Corrupt::approx_misinsert;
        case FleetSimFalsify::events_early: return Router::Corrupt::events_early;
        case FleetSimFalsify::cost_not_minimum: return Router::Corrupt::cost_not_minimum;
        case FleetSimFalsify::events_lose_first_block: return Router::Corrupt::events_lose_first_block;
        default: return std::nullopt;
    }
}

// What the sim cannot run: no workload, a bad configuration, or a request with no prompt token (it
// has nothing to prefill, hence no first output token: it would be admitted, find nothing to run, be
// preempted and admitted again, forever).
std::string check_inputs(const Workload* w, const FleetConfig& c) {
    if (!w) return "no workload";
    for (const Request& r : w->requests)
        if (r.prompt_len == 0) return "request " + std::to_string(r.id) + " has no prompt token";
    return check_fleet_config(c);
}

}  // namespace

// The tenants' token buckets (their weights' shares of the rate) and quotas: shares of the running
// cap (it reads the pools just made, the same on every instance) and of the prefills.
void FleetSim::configure_tenants() {
    double sum = 0;
    for (uint32_t t = 0; t < tenants_; ++t) sum += t < c_.tenants.size() ? c_.tenants[t].weight : 1.0;
    auto share = [&](uint32_t t) { return (t < c_.tenants.size() ? c_.tenants[t].weight : 1.0) / sum; };
    if (c_.queue == QueuePolicy::token_bucket) {
        std::vector<double> rates(tenants_);
        for (uint32_t t = 0; t < tenants_; ++t) rates[t] = c_.bucket_rate_tokens_per_s * share(t);
        buckets_.configure(rates, c_.bucket_burst_s);
    }
    for (uint32_t t = 0; t < tenants_; ++t) {
        cap_run_.push_back(std::max<uint32_t>(1, uint32_t(double(running_cap(0)) * share(t))));
        cap_pre_.push_back(std::max<uint32_t>(1, uint32_t(double(c_.max_prefills) * share(t))));
    }
    run_t_.assign(tenants_, 0);
    pre_t_.assign(tenants_, 0);
}

FleetSim::FleetSim(std::shared_ptr<const Workload> w, const FleetConfig& c)
    : w_(std::move(w)),
      c_(with_engine_grid(c)),
      router_(c.router, c.instances, c.seed),
      decode_router_(RouterConfig{.kind = RouterKind::least_loaded}, c.instances, c.seed) {
    error_ = check_inputs(w_.get(), c_);
    eng_ = fleet_engine_rules(c_);
    if (std::optional<Router::Corrupt> rc = router_corruption(c_.falsify)) router_.corrupt(*rc);
    if (!error_.empty()) {
        done_ = true;
        return;
    }
    slots_ = running_state_slots(c_);
    // kv_read_sharded: the iterations cost the KV a decode reads as if spread over the ranks (the
    // merged view of DP attention) while the instance runs tensor parallel attention.
    cost_ = CostModel(c_, c_.falsify == FleetSimFalsify::kv_read_sharded);
    roofline_ = BatchRoofline(cost_.step_model());
    if (c_.first_gpus.on()) {
        first_cost_ = CostModel(on_instance_gpus(c_, 0), c_.falsify == FleetSimFalsify::kv_read_sharded);
        first_roofline_ = BatchRoofline(first_cost_.step_model());
    }
    accept_ = SpecAcceptance(c_.spec_state == SpecState::off                   ? 1.0
                             : c_.falsify == FleetSimFalsify::spec_accepts_all ? 1.0 + c_.draft_len
                                                                               : c_.acceptance_len);
    spec_ = spec_work(c_);
    const size_t n = w_->requests.size();
    live_.resize(n);
    out_.resize(n);
    tenants_ = std::max<uint32_t>(1, uint32_t(c_.tenants.size()));
    for (size_t i = 0; i < n; ++i) {
        const Request& r = w_->requests[i];
        out_[i].arrival_ms = r.arrival_ms / c_.load;
        out_[i].prompt = r.prompt_len;
        out_[i].output = r.output_len;
        out_[i].tenant = r.tenant;
        tenants_ = std::max(tenants_, r.tenant + 1);
    }
    order_.resize(n);
    for (size_t i = 0; i < n; ++i) order_[i] = uint32_t(i);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](uint32_t a, uint32_t b) { return out_[a].arrival_ms < out_[b].arrival_ms; });

    inst_.resize(c_.instances);
    stats_.resize(c_.instances);
    for (uint32_t k = 0; k < c_.instances && error_.empty(); ++k) reset_instance(k);
    configure_tenants();
    if (!error_.empty()) {
        done_ = true;
        return;
    }
    if (c_.recovery != Recovery::recompute) {
        CacheConfig hc = c_.cache;
        // A bounded host tier gives half its bytes to KV and half to checkpoints.
        hc.kv_capacity_tokens =
            c_.host_tier_bytes ? std::max<uint64_t>(1, c_.host_tier_bytes / 2 / cost_.kv_bytes_per_token())
                               : 0;
        hc.state_capacity =
            c_.host_tier_bytes ? std::max<uint64_t>(1, c_.host_tier_bytes / 2 / cost_.state_bytes()) : 0;
        host_ = std::make_unique<RadixCache>(hc);
    }
    fault_out_.resize(c_.faults.size());
    for (size_t f = 0; f < c_.faults.size(); ++f) {
        fault_out_[f].spec = c_.faults[f];
        q_.push(c_.faults[f].at_ms, ev_fault, uint32_t(f));
    }
    timeline_.reset(c_.instances);
    const double horizon = n ? out_[order_.back()].arrival_ms : 0;
    sample_dt_ = horizon > 0 && c_.series_points > 0 ? horizon / double(c_.series_points) : 0;
    if (sample_dt_ > 0) q_.push(0, ev_sample);
    if (n == 0) done_ = true;
}

FleetSim::~FleetSim() {
    // Leases first, then the trees (RadixCache's destructor lets go of everything anyway).
    for (uint32_t k = 0; k < inst_.size(); ++k)
        for (uint32_t r : inst_[k].running) release_request(k, r);
    for (Inst& I : inst_) I.caches.clear();  // while the router their KV events go to is alive
}

double FleetSim::progress() const {
    return live_.empty() ? 1.0 : done_ ? 1.0 : double(finished_) / double(live_.size());
}

double FleetSim::run(const Deadline* deadline, uint64_t max_events) {
    uint64_t n = 0;
    const size_t N = live_.size();
    while (!done_) {
        const bool arrival =
            next_arrival_ < N && (q_.empty() || out_[order_[next_arrival_]].arrival_ms < q_.top().t);
        if (arrival) {
            const uint32_t r = order_[next_arrival_++];
            now_ = out_[r].arrival_ms;
            arrive(r, now_);
        } else if (!q_.empty()) {
            const FleetEvent e = q_.pop();
            now_ = e.t;
            handle(e);
        } else {
            // Nothing can happen any more: whatever is still in flight is stuck (a bug if it ever shows).
            for (uint32_t r = 0; r < N; ++r)
                if (live_[r].phase != Phase::done && live_[r].phase != Phase::failed) {
                    if (live_[r].inst >= 0 && live_[r].phase == Phase::running) {
                        auto& run = inst_[uint32_t(live_[r].inst)].running;
                        release_request(uint32_t(live_[r].inst), r);
                        run.erase(std::find(run.begin(), run.end(), r));
                    }
                    fail(r, FailReason::stalled, now_);
                }
        }
        ++t_.events;
        ++n;
        finish_if_done(now_);
        if (n >= max_events) break;
        if (deadline && (n & 255) == 0 && deadline->passed()) break;
    }
    return progress();
}

void FleetSim::finish_if_done(double now) {
    if (done_ || finished_ < live_.size()) return;
    done_ = true;
    for (const RequestOutcome& o : out_) t_.end_ms = std::max(t_.end_ms, o.finish_ms);
    const double end = std::max(t_.end_ms, now);
    for (uint32_t k = 0; k < inst_.size(); ++k) {
        Inst& I = inst_[k];
        if (I.status == Inst::down) {
            stats_[k].down_ms += end - I.down_since;
            timeline_.add(k, I.down_since, end, 4);
        }
        InstanceStats& s = stats_[k];
        for (const auto& c : I.caches) {
            const CacheStats& cs = c->stats();
            s.cache_nodes += cs.nodes;
            s.cache_kv_tokens += cs.kv_tokens;
            s.cache_states += cs.states;
            s.cache_kv_evicted += cs.kv_tokens_evicted;
            s.cache_states_evicted += cs.states_evicted;
        }
    }
    // Audit once, then let go of the trees and pools: a module keeps several finished runs for its
    // comparison tables, and the trees of the Mooncake trace weigh tens of megabytes each.
    final_audit_ = audit();
    final_leases_ = leases_held();
    final_owners_ = pool_owners();
    freed_ = true;
    for (const Replication& x : repl_)  // writes still on the host links when the last request finished
        if (x.to_instance_host && !x.ended) t_.host_write_pending_bytes += x.bytes;
    for (Inst& I : inst_) {
        I.caches.clear();
        I.host.reset();
        I.pool.reset();
    }
    host_.reset();
    repl_.clear();
    repl_.shrink_to_fit();
    std::vector<Live>().swap(live_);
}

void FleetSim::handle(const FleetEvent& e) {
    switch (e.kind) {
        case ev_iteration_end:
            if (inst_[e.a].iter_id == e.b && inst_[e.a].busy) end_iteration(e.a, e.t);
            break;
        case ev_wake:
            if (inst_[e.a].wake_at == e.t) inst_[e.a].wake_at = -1;
            kick(e.a, e.t);
            break;
        case ev_fault:
            if (c_.faults[e.a].kind == FaultKind::crash)
                crash(e.a, e.t);
            else
                drain(e.a, e.t);
            break;
        case ev_up: come_up(e.a, e.t); break;
        case ev_down:
            if (inst_[e.a].status == Inst::draining) go_down(e.a, e.t);
            break;
        case ev_replicated: {
            Replication& x = repl_[e.a];
            x.ended = true;
            RadixCache* into = x.to_instance_host ? inst_[x.inst].host.get() : host_.get();
            const bool arrived = inst_[x.inst].epoch == x.epoch && into;
            if (arrived && !(x.to_instance_host && falsify_now(FleetSimFalsify::host_write_unlogged))) {
                into->insert(w_->requests[x.req].tokens, x.len, std::move(x.cps));
                into->enforce_capacity();
                t_.host_inserts += !x.to_instance_host;
                t_.host_write_arrived_bytes += x.bytes;
            } else if (!arrived) {
                t_.host_write_lost_bytes += x.bytes;
            }
            x.cps = {};
            break;
        }
        case ev_reroute: reroute(uint32_t(e.b), e.t); break;
        case ev_deliver:
            if (e.a == live_[e.b].delivery) deliver(uint32_t(e.b), e.t);  // else a fault cut it
            break;
        case ev_sample: sample(e.t); break;
    }
}

// ---- requests ----

void FleetSim::arrive(uint32_t r, double now) {
    live_[r].target = w_->requests[r].prompt_len;
    route(r, now);
}

bool FleetSim::serves(uint32_t k, uint32_t r) const {
    return !c_.pd.on() || is_prefill(k) != live_[r].decode_stage;
}

Router& FleetSim::router_of(uint32_t r) {
    return c_.pd.on() && live_[r].decode_stage ? decode_router_ : router_;
}

// Whether an instance of request r's stage is up or comes back: else it fails (no instance).
bool FleetSim::any_instance_returns(uint32_t r) const {
    for (uint32_t k = 0; k < inst_.size(); ++k) {
        if (!serves(k, r)) continue;
        if (inst_[k].status != Inst::down) return true;
        for (const FaultSpec& f : c_.faults)
            if (f.instance == k && f.down_ms > 0 && f.at_ms + f.down_ms >= now_) return true;
    }
    return false;
}

void FleetSim::route(uint32_t r, double now) {
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    // Under an engine the routers probe with the engine's match rule (one token left for the logits).
    const uint64_t len = engine_match_len(eng_, lookup_len(r));
    const FleetRouterView view(*this, r);
    const RouteDecision d = router_of(r).choose(q, len, view);
    if (d.instance < 0) {
        if (any_instance_returns(r)) {
            L.phase = Phase::held;
            gateway_.push_back(r);
            ++t_.gateway_waits;
        } else {
            fail(r, FailReason::no_instance, now);
        }
        return;
    }
    if (!L.routed) {
        L.routed = true;
        if (caching_at(uint32_t(d.instance)))
            for (uint32_t k = 0; k < inst_.size(); ++k)
                if (view.eligible(k))
                    out_[r].best_state_hit =
                        std::max(out_[r].best_state_hit, view.match(k, q, len).state_len);
    }
    enqueue(uint32_t(d.instance), r, now, &view);
}

// Request r's transfer ended: a host-tier restore or a migration (queued where it was sent), a host
// load (back to the front of its own instance's queue, its prefix put into the tree), or a handoff
// from its prefill instance. If its instance went down (or, for a host load, crashed and came back), it
// is routed anew.
void FleetSim::deliver(uint32_t r, double now) {
    Live& L = live_[r];
    const int32_t k = L.carry_to;
    const bool returning = L.host_loading;
    const bool up = k >= 0 && inst_[uint32_t(k)].status == Inst::up &&
                    (!returning || inst_[uint32_t(k)].epoch == L.host_load_epoch);
    L.carry_to = -1;
    L.host_loading = false;
    if (L.in_transfer && !up) {
        // Its decoder was drained meanwhile: it takes no new work, and the KV that reached it does not
        // move on from there; like a crash's, the retry goes through the prefill stage.
        const int32_t f = k >= 0 ? inst_[uint32_t(k)].last_fault : -1;
        lose_transfer(r, f);
        L.fault = f;
        ++out_[r].moves;
        reroute(r, now);
        return;
    }
    if (L.in_transfer) {
        L.carry_to = k;
        transfer_arrived(r, now);
        L.carry_to = -1;
    }
    if (returning) {
        (up ? t_.host_load_arrived_bytes : t_.host_load_lost_bytes) += L.transfer_bytes;
        if (up) insert_loaded(uint32_t(k), r, now);
    }
    if (up)
        enqueue(uint32_t(k), r, now, nullptr, returning);
    else
        route(r, now);
}

int32_t FleetSim::choose_decode(uint32_t r) {
    const FleetRouterView view(*this, FleetRouterView::Stage::decode);
    return decode_router_.choose(w_->requests[r], engine_match_len(eng_, lookup_len(r)), view).instance;
}

// The delivery of request r's transfer (a host-tier restore or load, a migration, a handoff) at `at`.
void FleetSim::schedule_delivery(uint32_t r, double at) { q_.push(at, ev_deliver, live_[r].delivery, r); }

void FleetSim::enqueue(uint32_t k, uint32_t r, double now, const FleetRouterView* view, bool returning) {
    Live& L = live_[r];
    Inst& I = inst_[k];
    L.inst = int32_t(k);
    L.phase = Phase::queued;
    if (L.carry)
        L.cost = double(L.target - std::min(L.target, c_.guard ? L.carry_state : L.carry_kv));
    else if (view && c_.caching) {
        const uint64_t len = lookup_len(r);
        L.cost = double(len - view->match(k, w_->requests[r], len).state_len);
    } else
        L.cost = double(uncached_cost(k, r));
    if (returning) {  // it was picked before (a host load): first in line again, not routed anew
        I.queue.push_front(r, w_->requests[r].tenant);
    } else {
        I.queue.push_back(r, w_->requests[r].tenant, L.cost);
        ++stats_[k].routed;
        L.host_written = 0;  // a new instance: its host tier has none of it
        L.host_tried = false;
    }
    stats_[k].peak_queue = std::max<uint64_t>(stats_[k].peak_queue, I.queue.size());
    cut_run(k, now);  // it joins at the next step boundary
    kick(k, now);
}

void FleetSim::fail(uint32_t r, FailReason why, double now) {
    Live& L = live_[r];
    L.phase = Phase::failed;
    out_[r].failed = why;
    out_[r].generated = L.generated;
    out_[r].finish_ms = -1;
    (void)now;
    ++finished_;
}

// Lets go of the request's lease and working memory. An attempt that ends here still running
// (preempted, crashed, moved, stalled; complete() marks its request done first) logs what it computed.
void FleetSim::release_request(uint32_t k, uint32_t r) {
    Live& L = live_[r];
    Inst& I = inst_[k];
    if (L.phase == Phase::running) out_[r].abandoned_work += L.pos - L.resume;
    if (L.leased) {
        cache_of(k, r).release(L.adm.lease);
        L.leased = false;
    }
    release_host_lease(k, r);
    if (L.slot || L.kv_alloc) I.pool->release(OwnerId(r) + 1);
    L.slot = false;
    L.kv_alloc = 0;
}

// A request that was queued or running on an instance that failed or drained goes elsewhere. With a
// host tier it may resume from what was replicated there, if that is deeper than what the chosen
// instance's own cache offers.
void FleetSim::reroute(uint32_t r, double now) {
    Live& L = live_[r];
    const Request& q = w_->requests[r];
    L.target = uint64_t(q.prompt_len) + L.generated;
    L.pos = L.base = 0;
    if (L.carry || !host_) {
        route(r, now);
        return;
    }
    const uint64_t len = engine_match_len(eng_, lookup_len(r));
    const FleetRouterView view(*this, r);
    const RouteDecision d = router_of(r).choose(q, len, view);
    if (d.instance < 0) {
        route(r, now);  // to the gateway, or failed
        return;
    }
    const Match hm = host_->match(*q.tokens, resume_lookup_len(*host_, r));
    const Match lm = view.match(uint32_t(d.instance), q, len);
    const uint64_t host_resume = c_.guard ? hm.state_len : hm.kv_len;
    const uint64_t local_resume = c_.guard ? lm.state_len : lm.kv_len;
    if (host_resume > local_resume) {
        // The replicated KV and one checkpoint come back as a blob of module 10 (exact size).
        const lifecycle::StrategyCost mv =
            lifecycle::migration_costs(c_.model, {double(hm.kv_len), 0}, c_.link, cost_.instance_hardware(),
                                       c_.efficiency)[lifecycle::MigrationStrategy::move_all];
        const uint64_t bytes = uint64_t(mv.bytes);
        L.carry = true;
        L.carry_kv = hm.kv_len;
        L.carry_state = hm.state_len;
        L.carry_record = state_record_of(host_->state_at(hm).handle);
        L.carry_to = d.instance;
        L.phase = Phase::held;
        L.recovered_from = RecoverySource::remote_tier;
        ++t_.host_restores;
        if (L.fault >= 0) {
            ++fault_out_[uint32_t(L.fault)].host_restores;
            fault_out_[uint32_t(L.fault)].host_bytes += bytes;
        }
        schedule_delivery(r, now + mv.transfer_s * 1000.0);
        return;
    }
    enqueue(uint32_t(d.instance), r, now, &view);
}

// ---- faults ----

void FleetSim::crash(uint32_t f, double now) {
    const uint32_t k = c_.faults[f].instance;
    Inst& I = inst_[k];
    if (I.status == Inst::down) return;
    FaultOutcome& fo = fault_out_[f];
    ++I.epoch;
    ++I.iter_id;
    if (I.busy) {
        // Decode steps of a run that finished before the crash happened; the step in flight is lost.
        apply_decode_steps(k, steps_done_by(k, now));
        stats_[k].busy_ms += now - I.iter_start;
        timeline_.add(k, I.iter_start, now, I.status == Inst::draining ? 3 : 2);
        I.busy = false;
    }
    I.last_fault = int32_t(f);
    for (const auto& c : I.caches) fo.cached_tokens_lost += c->stats().kv_tokens;
    // Its own host tier goes with the process (reset_instance brings it back empty).
    if (I.host) fo.host_tokens_lost += I.host->stats().kv_tokens;
    std::vector<uint32_t> moved = I.running;
    for (uint32_t r : I.running) {
        Live& L = live_[r];
        fo.lost_tokens += L.pos - L.base;
        t_.lost_tokens += L.pos - L.base;
        if (L.pos > 0 && falsify_now(FleetSimFalsify::crash_resume_in_place)) {
            L.carry = true;  // what was lost is taken as carried along: KV and state at pos
            L.carry_kv = L.carry_state = L.pos;
            L.carry_record = {};
        }
        release_request(k, r);
        ++fo.running_moved;
    }
    for (const WaitQueue::Entry& e : I.queue.take_all()) {
        release_host_lease(k, e.req);
        live_[e.req].carry = false;  // what it brought sat in the crashed instance's memory
        moved.push_back(e.req);
    }
    I.running.clear();
    I.batch.clear();
    cut_transfers(k, f, moved);
    for (uint32_t r : moved) {
        Live& L = live_[r];
        // A decoder's requests lose their KV and state with it: the gateway retries them through the
        // prefill stage (SGLang's and vLLM's routers), unless the remote tier holds their prefix.
        if (c_.pd.on() && !is_prefill(k)) L.decode_stage = false;
        L.phase = Phase::held;
        L.fault = int32_t(f);
        ++out_[r].moves;
        ++fo.requests_moved;
        q_.push(now + c_.detect_ms, ev_reroute, 0, r);
    }
    reset_instance(k);
    I.status = Inst::down;
    I.down_since = now;
    if (c_.faults[f].down_ms > 0) q_.push(now + c_.faults[f].down_ms, ev_up, k);
}

void FleetSim::drain(uint32_t f, double now) {
    const uint32_t k = c_.faults[f].instance;
    Inst& I = inst_[k];
    if (I.status != Inst::up) return;
    FaultOutcome& fo = fault_out_[f];
    cut_run(k, now);
    I.status = Inst::draining;
    I.drain_fault = I.last_fault = int32_t(f);
    // Requests that have not started go elsewhere now; they have nothing to carry. A decoder's keep
    // nothing of the KV that reached it: they go back through the prefill stage, as its transfers still
    // on the way do when they arrive (deliver).
    for (const WaitQueue::Entry& e : I.queue.take_all()) {
        Live& L = live_[e.req];
        release_host_lease(k, e.req);
        if (c_.pd.on() && !is_prefill(k)) L.carry = L.decode_stage = false;
        L.phase = Phase::held;
        L.fault = int32_t(f);
        ++out_[e.req].moves;
        ++fo.requests_moved;
        q_.push(now, ev_reroute, 0, e.req);
    }
    if (c_.recovery == Recovery::migrate) {
        if (I.busy)
            I.migrate_pending = true;
        else
            migrate_running(k, now);
    } else if (!I.busy && I.running.empty()) {
        go_down(k, now);
    }
}

// Live migration on drain: each running request's KV and state move to another instance over the
// link, one after the other, and resume there where they stopped (module 10's blob). Moving KV with
// only the last checkpoint leaves the state behind the KV: the guard recomputes from the checkpoint.
void FleetSim::migrate_running(uint32_t k, double now) {
    Inst& I = inst_[k];
    I.migrate_pending = false;
    const int32_t f = I.drain_fault;
    for (uint32_t r : I.running) {
        Live& L = live_[r];
        uint64_t state_pos = L.pos;
        if (c_.migration_move == MigrationMove::kv_and_checkpoint) {
            state_pos = L.resume;
            for (const PlannedCheckpoint& p : L.adm.plan)
                if (p.pos <= L.pos && p.pos > state_pos && p.pos > L.resume) state_pos = p.pos;
        }
        // Module 10's blob: KV of every token, a state, token ids and sampler (the exact blob size).
        const lifecycle::StrategyCost mv =
            lifecycle::migration_costs(c_.model, {double(L.pos), 0}, c_.link, cost_.instance_hardware(),
                                       c_.efficiency)[lifecycle::MigrationStrategy::move_all];
        const uint64_t bytes = uint64_t(mv.bytes);
        I.link_free = std::max(now, I.link_free) + mv.transfer_s * 1000.0;
        release_request(k, r);
        L.target = uint64_t(w_->requests[r].prompt_len) + L.generated;
        record_migration(r, f, state_pos);  // the blob: KV to pos, the state at state_pos
        L.pos = L.base = 0;
        L.phase = Phase::held;
        ++out_[r].moves;
        if (f >= 0) {
            FaultOutcome& fo = fault_out_[uint32_t(f)];
            ++fo.requests_moved;
            ++fo.running_moved;
            ++fo.migrated;
            fo.migrated_bytes += bytes;
            L.fault = f;
            L.recovered_from = RecoverySource::migration;
        }
        // To an instance of its own stage: a decoder's requests to another decoder.
        const FleetRouterView view(*this, r);
        const RouteDecision d =
            router_of(r).choose(w_->requests[r], engine_match_len(eng_, lookup_len(r)), view);
        L.carry_to = d.instance;  // -1: delivered to whatever is up when it arrives
        schedule_delivery(r, I.link_free);
    }
    I.running.clear();
    I.batch.clear();
    q_.push(std::max(now, I.link_free), ev_down, k);
}

void FleetSim::go_down(uint32_t k, double now) {
    Inst& I = inst_[k];
    if (c_.pd.on() && I.link_free > now) {  // a drained prefill instance's handoffs finish first
        q_.push(I.link_free, ev_down, k);
        return;
    }
    if (I.drain_fault >= 0) fault_out_[uint32_t(I.drain_fault)].drained_ms = now;
    for (uint32_t r : I.running) release_request(k, r);  // none after a drain; kept for safety
    I.running.clear();
    reset_instance(k);
    I.status = Inst::down;
    I.down_since = now;
    if (I.drain_fault >= 0) {
        const FaultSpec& f = c_.faults[uint32_t(I.drain_fault)];
        if (f.down_ms > 0) q_.push(now + f.down_ms, ev_up, k);
    }
    I.drain_fault = -1;
}

void FleetSim::come_up(uint32_t k, double now) {
    Inst& I = inst_[k];
    if (I.status != Inst::down) return;
    stats_[k].down_ms += now - I.down_since;
    timeline_.add(k, I.down_since, now, 4);
    I.status = Inst::up;
    std::vector<uint32_t> waiting;
    waiting.swap(gateway_);
    for (uint32_t r : waiting)
        if (serves(k, r))
            route(r, now);
        else
            gateway_.push_back(r);  // still waiting for an instance of its own stage
    kick(k, now);
}

void FleetSim::sample(double now) {
    LoadSample s;
    s.t_ms = now;
    s.in_flight.resize(inst_.size());
    uint64_t placed = 0;
    for (uint32_t k = 0; k < inst_.size(); ++k) {
        s.in_flight[k] = uint32_t(inst_[k].queue.size() + inst_[k].running.size());
        placed += s.in_flight[k];
    }
    // Arrived, not finished, on no instance: at the gateway or moving between instances.
    s.held = uint32_t(next_arrival_ - finished_ - placed);
    samples_.push_back(std::move(s));
    // Keep sampling while anything else can still happen.
    if (!q_.empty() || next_arrival_ < live_.size()) q_.push(now + sample_dt_, ev_sample);
}

void FleetSim::replicate(uint32_t k, uint32_t r, uint64_t len, double now) {
    Live& L = live_[r];
    if (!host_ || len <= L.replicated) return;
    Replication x;
    x.inst = k;
    x.req = r;
    x.epoch = inst_[k].epoch;
    x.len = len;
    for (const PlannedCheckpoint& p : L.adm.plan)
        if (p.pos > L.replicated && p.pos <= len && p.pos > L.resume)
            x.cps.push_back({p.pos,
                             {checkpoint_handle(L.tainted, {p.pos, L.audit_mismatched}), cost_.state_bytes()},
                             p.kind});
    const uint64_t bytes =
        (len - L.replicated) * cost_.kv_bytes_per_token() + x.cps.size() * cost_.state_bytes();
    L.replicated = len;
    Inst& I = inst_[k];
    I.link_free = std::max(now, I.link_free) + double(bytes) / c_.link.bytes_per_s * 1000.0;
    repl_.push_back(std::move(x));
    q_.push(I.link_free, ev_replicated, uint32_t(repl_.size() - 1));
}

bool FleetSim::falsify_now(FleetSimFalsify f) {
    if (c_.falsify != f || falsified_) return false;
    falsified_ = true;
    return true;
}

// ---- views ----

std::vector<TimelineSpan> FleetSim::timeline() const {
    TimelineRecorder copy = timeline_;
    return copy.finish(c_.max_timeline_spans);
}

std::string FleetSim::audit() const {
    if (freed_) return final_audit_;
    for (uint32_t k = 0; k < inst_.size(); ++k) {
        for (const auto& c : inst_[k].caches)
            if (std::string a = c->audit(); !a.empty())
                return "instance " + std::to_string(k) + " cache: " + a;
        if (inst_[k].host)
            if (std::string a = inst_[k].host->audit(); !a.empty())
                return "instance " + std::to_string(k) + " host tier: " + a;
        if (inst_[k].pool)
            if (std::string a = inst_[k].pool->audit(); !a.empty())
                return "instance " + std::to_string(k) + " pool: " + a;
    }
    if (host_)
        if (std::string a = host_->audit(); !a.empty()) return "host tier: " + a;
    return audit_cache_charge();
}

uint64_t FleetSim::leases_held() const {
    if (freed_) return final_leases_;
    uint64_t n = 0;
    for (const Inst& I : inst_)
        for (const auto& c : I.caches) n += c->stats().leases;
    return n;
}

uint64_t FleetSim::pool_owners() const {
    if (freed_) return final_owners_;
    uint64_t n = 0;
    for (const Inst& I : inst_)
        if (I.pool) n += request_owners(*I.pool);
    return n;
}

}  // namespace k3
