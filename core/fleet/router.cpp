#include "core/fleet/router.h"

#include <algorithm>
#include <cmath>

#include "core/base/fmath.h"

namespace k3 {

const char* route_reason_name(RouteReason r) {
    switch (r) {
        case RouteReason::only_choice: return "only choice";
        case RouteReason::rotation: return "rotation";
        case RouteReason::load: return "least loaded";
        case RouteReason::affinity: return "cache affinity";
        case RouteReason::balance: return "imbalance: least loaded";
        case RouteReason::below_threshold: return "match below threshold: least loaded";
        case RouteReason::hash: return "session hash";
    }
    return "?";
}

Router::Router(const RouterConfig& c, uint32_t instances, uint64_t seed)
    : c_(c), n_(instances), rng_(seed ^ 0x726f75746572ull) {
    if (c_.kind == RouterKind::session) {
        const uint32_t vn = std::max<uint32_t>(c_.virtual_nodes, 1);
        for (uint32_t i = 0; i < n_; ++i)
            for (uint32_t v = 0; v < vn; ++v)
                ring_.push_back({mix64(seed * 0x9e3779b97f4a7c15ull ^ (uint64_t(i) << 32 | v)), i});
        std::sort(ring_.begin(), ring_.end());
    }
    if (c_.kind == RouterKind::cache_aware)
        approx_ = std::make_unique<ApproxTrees>(n_, c_.max_tree_tokens, c_.eviction_interval_s * 1000.0);
    if (c_.kind == RouterKind::kv_events || c_.kind == RouterKind::kv_cost) {
        hashes_ = std::make_unique<BlockHashMemo>(c_.event_block_tokens);
        events_.assign(n_, KvEventView(*hashes_, c_.kv_event_delay_s * 1000.0));
    }
}

int Router::least_loaded(const RouterView& v) const {
    int best = -1;
    for (uint32_t i = 0; i < n_; ++i)
        if (v.eligible(i) && (best < 0 || v.load(i) < v.load(uint32_t(best)))) best = int(i);
    return best;
}

RouteDecision Router::choose(const Request& r, uint64_t len, const RouterView& v) {
    uint32_t eligible = 0;
    int only = -1;
    for (uint32_t i = 0; i < n_; ++i)
        if (v.eligible(i)) ++eligible, only = int(i);
    for (KvEventView& e : events_) e.advance(v.now_ms());
    if (eligible == 0) return {-1, RouteReason::only_choice};
    if (c_.kind == RouterKind::cache_aware) return approximate(r, len, v, eligible == 1);
    if (eligible == 1) return {only, RouteReason::only_choice};
    switch (c_.kind) {
        case RouterKind::round_robin:
            for (uint32_t k = 0; k < n_; ++k) {
                const uint32_t i = (next_ + k) % n_;
                if (v.eligible(i)) {
                    next_ = (i + 1) % n_;
                    return {int(i), RouteReason::rotation};
                }
            }
            return {-1, RouteReason::rotation};
        case RouterKind::least_loaded: return {least_loaded(v), RouteReason::load};
        case RouterKind::power_of_two: {
            std::vector<uint32_t> up;
            for (uint32_t i = 0; i < n_; ++i)
                if (v.eligible(i)) up.push_back(i);
            const size_t ia = size_t(rng_.below(up.size()));
            size_t ib = size_t(rng_.below(up.size() - 1));
            if (ib >= ia) ++ib;  // two distinct instances
            const uint32_t lo = std::min(up[ia], up[ib]), hi = std::max(up[ia], up[ib]);
            return {int(v.load(hi) < v.load(lo) ? hi : lo), RouteReason::load};
        }
        case RouterKind::prefix: return affinity(r, len, v, false);
        case RouterKind::state_aware: return affinity(r, len, v, true);
        case RouterKind::session: return hashed(r, v);
        case RouterKind::cache_aware: return approximate(r, len, v, false);
        case RouterKind::kv_events: return event_fed(r, len, v);
        case RouterKind::kv_cost: return cost(r, len, v);
    }
    return {least_loaded(v), RouteReason::load};
}

bool Router::imbalanced(const RouterView& v) const {
    double lo = 0, hi = 0;
    bool first = true;
    for (uint32_t i = 0; i < n_; ++i) {
        if (!v.eligible(i)) continue;
        const double l = v.load(i);
        lo = first ? l : std::min(lo, l);
        hi = first ? l : std::max(hi, l);
        first = false;
    }
    return hi - lo > c_.balance_abs && hi > c_.balance_rel * lo;
}

template <class M>
RouteDecision Router::best_match(uint64_t len, const RouterView& v, M match) const {
    int best = -1;
    uint64_t best_len = 0;
    for (uint32_t i = 0; i < n_; ++i) {
        if (!v.eligible(i)) continue;
        const uint64_t l = match(i);
        if (best < 0 || l > best_len || (l == best_len && v.load(i) < v.load(uint32_t(best)))) {
            best = int(i);
            best_len = l;
        }
    }
    if (len > 0 && double(best_len) > c_.cache_threshold * double(len)) return {best, RouteReason::affinity};
    return {least_loaded(v), RouteReason::below_threshold};
}

RouteDecision Router::affinity(const Request& r, uint64_t len, const RouterView& v, bool state) {
    if (imbalanced(v)) return {least_loaded(v), RouteReason::balance};
    return best_match(len, v, [&](uint32_t i) {
        const Match m = v.match(i, r, len);
        return state ? m.state_len : m.kv_len;
    });
}

// cache_aware.rs select_worker: the imbalanced path goes to the least loaded worker and still
// inserts the request into its tree (select_worker_min_load); the balanced path matches the trees
// and inserts into the chosen worker's. With one worker up the gateway still runs the policy.
RouteDecision Router::approximate(const Request& r, uint64_t len, const RouterView& v, bool only) {
    approx_->prune_due(v.now_ms());
    RouteDecision d;
    if (only)
        d = {least_loaded(v), RouteReason::only_choice};
    else if (imbalanced(v))
        d = {least_loaded(v), RouteReason::balance};
    else
        d = best_match(len, v, [&](uint32_t i) { return approx_->match(i, *r.tokens, len); });
    if (d.instance >= 0) approx_->insert(uint32_t(d.instance), r.tokens, len);
    return d;
}

// With no delay the event view must equal the true tree floored to whole blocks.
void Router::compare_zero_delay(const Request& r, uint64_t len, const RouterView& v,
                                std::span<const uint64_t> hashes) {
    if (c_.kv_event_delay_s > 0 || !v.one_namespace()) return;
    const uint64_t b = c_.event_block_tokens ? c_.event_block_tokens : 1;
    for (uint32_t i = 0; i < n_; ++i) {
        if (!v.eligible(i)) continue;
        ++zero_compared_;
        if (events_[i].match(hashes) != v.match(i, r, len).kv_len / b * b) ++zero_mismatches_;
    }
}

RouteDecision Router::event_fed(const Request& r, uint64_t len, const RouterView& v) {
    const std::span<const uint64_t> hashes = hashes_->of(*r.tokens, len);
    compare_zero_delay(r, len, v, hashes);
    if (imbalanced(v)) return {least_loaded(v), RouteReason::balance};
    return best_match(len, v, [&](uint32_t i) { return events_[i].match(hashes); });
}

RouteDecision Router::hashed(const Request& r, const RouterView& v) const {
    double total = 0;
    uint32_t up = 0;
    for (uint32_t i = 0; i < n_; ++i)
        if (v.eligible(i)) total += v.load(i), ++up;
    // Bounded loads: after placing this request no instance may hold more than ceil(c x mean).
    double bound = c_.load_factor * (total + 1) / double(up);
    bound = double(uint64_t(bound) + (double(uint64_t(bound)) < bound ? 1 : 0));
    const uint64_t h = mix64(uint64_t(r.session) * 0x9e3779b97f4a7c15ull + 0x5e55);
    const size_t start =
        size_t(std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(h, uint32_t(0))) - ring_.begin());
    bool home = true;  // the first eligible instance on the ring is the session's home
    for (size_t k = 0; k < ring_.size(); ++k) {
        const uint32_t i = ring_[(start + k) % ring_.size()].second;
        if (!v.eligible(i)) continue;
        if (v.load(i) + 1 <= bound) return {int(i), home ? RouteReason::hash : RouteReason::balance};
        home = false;
    }
    return {least_loaded(v), RouteReason::load};
}

namespace {

double dynamo_cost(double weight, uint64_t len, uint64_t overlap, double active, uint32_t block) {
    const double prefill = double(len - std::min(len, overlap)) / double(block);
    return weight * prefill + active + double(len / block);
}

}  // namespace

// Dynamo's worker selection: logit = overlap_score_weight x potential prefill blocks + potential decode
// blocks (the worker's active blocks + the request's new ones; Dynamo dedups blocks already active,
// this counts all of the request's blocks); temperature 0: the minimum, ties drawn at random
// (softmax_sample returns every tied key); else probabilities softmax(-(logit - min) / (max - min) / T).
RouteDecision Router::cost(const Request& r, uint64_t len, const RouterView& v) {
    const uint32_t b = events_[0].block();
    const std::span<const uint64_t> hashes = hashes_->of(*r.tokens, len);
    compare_zero_delay(r, len, v, hashes);
    CostDecision d;
    d.len = len;
    d.sampled = c_.temperature > 0;
    for (uint32_t i = 0; i < n_; ++i) {
        if (!v.eligible(i)) continue;
        d.instance.push_back(i);
        d.overlap.push_back(events_[i].match(hashes));
        d.active.push_back(v.active_blocks(i, b));
        d.cost.push_back(dynamo_cost(c_.overlap_weight, len, d.overlap.back(), d.active.back(), b));
    }
    const double lo = *std::min_element(d.cost.begin(), d.cost.end());
    const double hi = *std::max_element(d.cost.begin(), d.cost.end());
    std::vector<double> w(d.cost.size());
    double sum = 0;
    for (size_t k = 0; k < w.size(); ++k) {
        if (!d.sampled)
            w[k] = d.cost[k] == lo ? 1.0 : 0.0;
        else
            w[k] = hi > lo ? exp_f64(-(d.cost[k] - lo) / (hi - lo) / c_.temperature) : 1.0;
        sum += w[k];
    }
    double u = rng_.uniform() * sum;
    size_t pick = 0;
    while (pick + 1 < w.size() && (w[pick] == 0 || u >= w[pick])) u -= w[pick++];
    if (cost_not_minimum_ && hi > lo) {  // falsifier: once, a worker above the minimum
        cost_not_minimum_ = false;
        for (size_t k = 0; k < d.cost.size(); ++k)
            if (d.cost[k] > lo) pick = k;
    }
    d.chosen = int(d.instance[pick]);
    decisions_.push_back(std::move(d));
    return {decisions_.back().chosen, RouteReason::load};
}

std::string Router::recount_costs() const {
    const uint32_t b = c_.event_block_tokens ? c_.event_block_tokens : 1;
    for (size_t n = 0; n < decisions_.size(); ++n) {
        const CostDecision& d = decisions_[n];
        double lo = 1e300, chosen = -1;
        for (size_t k = 0; k < d.instance.size(); ++k) {
            const double c = dynamo_cost(c_.overlap_weight, d.len, d.overlap[k], d.active[k], b);
            if (c != d.cost[k])
                return "decision " + std::to_string(n) + ": instance " + std::to_string(d.instance[k]) +
                       " cost " + std::to_string(d.cost[k]) + ", recounted " + std::to_string(c);
            lo = std::min(lo, c);
            if (int(d.instance[k]) == d.chosen) chosen = c;
        }
        if (chosen < 0) return "decision " + std::to_string(n) + " chose an instance it did not cost";
        if (!d.sampled && chosen != lo)
            return "decision " + std::to_string(n) + " chose cost " + std::to_string(chosen) +
                   ", the minimum was " + std::to_string(lo);
    }
    return "";
}

void Router::kv_stored(uint32_t i, const TokenSeq& q, uint64_t upto, double now) {
    if (i < events_.size()) events_[i].stored(q, upto, now);
}

void Router::kv_removed(uint32_t i, const TokenSeq& q, uint64_t start, uint64_t end, double now) {
    if (i < events_.size()) events_[i].removed(q, start, end, now);
}

RouterAudit Router::audit() const {
    RouterAudit a;
    if (approx_) {
        for (uint32_t w = 0; w < n_; ++w) {
            a.approx_pruned += approx_->pruned_tokens(w);
            a.approx_tokens += approx_->tree_tokens(w);
        }
        a.approx_cycles = approx_->prune_cycles();
        a.approx = approx_->audit();
    }
    for (const KvEventView& e : events_) {
        a.events_applied += e.applied();
        a.events_pending += e.pending();
        a.min_event_slack_ms = std::min(a.min_event_slack_ms, e.min_slack_ms());
    }
    a.zero_delay_compared = zero_compared_;
    a.zero_delay_mismatches = zero_mismatches_;
    return a;
}

void Router::corrupt(Corrupt c) {
    if (c == Corrupt::approx_misinsert && approx_) approx_->misroute_next_insert();
    if (c == Corrupt::events_early)
        for (KvEventView& e : events_) e.ignore_delay();
    if (c == Corrupt::cost_not_minimum) cost_not_minimum_ = true;
    if (c == Corrupt::events_lose_first_block)
        for (KvEventView& e : events_) e.lose_first_block();
}

}  // namespace k3
