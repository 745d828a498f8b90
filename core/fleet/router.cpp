#include "core/fleet/router.h"

#include <algorithm>

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
    if (eligible == 0) return {-1, RouteReason::only_choice};
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
    }
    return {least_loaded(v), RouteReason::load};
}

RouteDecision Router::affinity(const Request& r, uint64_t len, const RouterView& v, bool state) {
    double lo = 0, hi = 0;
    bool first = true;
    for (uint32_t i = 0; i < n_; ++i) {
        if (!v.eligible(i)) continue;
        const double l = v.load(i);
        lo = first ? l : std::min(lo, l);
        hi = first ? l : std::max(hi, l);
        first = false;
    }
    if (hi - lo > c_.balance_abs && hi > c_.balance_rel * lo) return {least_loaded(v), RouteReason::balance};
    int best = -1;
    uint64_t best_len = 0;
    for (uint32_t i = 0; i < n_; ++i) {
        if (!v.eligible(i)) continue;
        const Match m = v.match(i, r, len);
        const uint64_t l = state ? m.state_len : m.kv_len;
        if (best < 0 || l > best_len || (l == best_len && v.load(i) < v.load(uint32_t(best)))) {
            best = int(i);
            best_len = l;
        }
    }
    if (len > 0 && double(best_len) > c_.cache_threshold * double(len)) return {best, RouteReason::affinity};
    return {least_loaded(v), RouteReason::below_threshold};
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

}  // namespace k3
