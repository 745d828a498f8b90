#include "core/cache/checkpoint_policy.h"

#include <algorithm>
#include <numeric>

namespace k3 {

const std::vector<std::string>& policy_ids() {
    static const std::vector<std::string> ids = {"interval", "end",       "interval_end", "branch",
                                                 "cap",      "segmented", "spread"};
    return ids;
}

const std::vector<std::string>& policy_labels() {
    static const std::vector<std::string> labels = {"fixed interval (chunk-aligned)",
                                                    "request end only",
                                                    "interval + request end",
                                                    "branch points + end (Marconi)",
                                                    "interval + cap per path (SGLang)",
                                                    "segmented retention (vLLM)",
                                                    "spread retention"};
    return labels;
}

const char* policy_id(PolicyKind k) { return policy_ids()[size_t(k)].c_str(); }

std::optional<PolicyKind> parse_policy(std::string_view s) {
    const auto& ids = policy_ids();
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == s) return PolicyKind(i);
    return std::nullopt;
}

bool CheckpointPolicy::places_interval() const {
    return kind != PolicyKind::end && kind != PolicyKind::branch;
}
bool CheckpointPolicy::places_end() const { return kind != PolicyKind::interval; }
bool CheckpointPolicy::places_junction() const {
    return kind == PolicyKind::branch || kind == PolicyKind::cap || kind == PolicyKind::segmented ||
           kind == PolicyKind::spread;
}

std::vector<PlannedCheckpoint> plan_checkpoints(const CheckpointPolicy& p, uint32_t page_size,
                                                uint64_t cache_len, uint64_t state_hit, uint64_t kv_hit) {
    const uint64_t P = std::max<uint32_t>(page_size, 1);
    cache_len = cache_len / P * P;
    std::vector<PlannedCheckpoint> out;
    if (cache_len <= state_hit) return out;
    // A request recomputes from state_hit, so it can only produce states after it.
    if (p.places_interval() && p.interval > 0 && p.interval % P == 0)
        for (uint64_t x = (state_hit / p.interval + 1) * p.interval; x <= cache_len; x += p.interval)
            out.push_back({x, CheckpointKind::interval});
    if (p.places_end()) out.push_back({cache_len, CheckpointKind::end});
    if (p.places_junction() && kv_hit > state_hit) {
        const uint64_t g = std::lcm<uint64_t>(std::max<uint32_t>(p.chunk, 1), P);
        const uint64_t j = std::min(kv_hit, cache_len) / g * g;
        if (j > state_hit) out.push_back({j, CheckpointKind::junction});
    }
    // One per position; a junction outranks an end, an end outranks an interval point.
    std::stable_sort(out.begin(), out.end(), [](const PlannedCheckpoint& a, const PlannedCheckpoint& b) {
        return a.pos != b.pos ? a.pos < b.pos : int(a.kind) > int(b.kind);
    });
    out.erase(
        std::unique(out.begin(), out.end(),
                    [](const PlannedCheckpoint& a, const PlannedCheckpoint& b) { return a.pos == b.pos; }),
        out.end());
    return out;
}

std::vector<bool> retention_keep(const CheckpointPolicy& p, const std::vector<RadixCache::PathState>& st) {
    const size_t n = st.size();
    std::vector<bool> keep(n, true);
    if (n == 0) return keep;
    // What no retention rule drops: the tail (the path's deepest state), states at forks (shared by
    // several paths), leaves and states a running request holds.
    std::vector<bool> fixed(n);
    for (size_t i = 0; i < n; ++i)
        fixed[i] = i + 1 == n || st[i].fork || st[i].leaf || st[i].locked ||
                   (p.kind == PolicyKind::segmented && st[i].kind == CheckpointKind::junction);
    switch (p.kind) {
        case PolicyKind::cap: {
            size_t count = n;
            for (size_t i = 0; i < n && count > p.max_states_per_path; ++i)
                if (!fixed[i]) {
                    keep[i] = false;
                    --count;
                }
            break;
        }
        case PolicyKind::segmented: {
            const uint64_t N = std::max<uint32_t>(p.retention_interval, 1);
            // The deepest state of each segment (sN, (s+1)N] stays.
            for (size_t i = 0; i < n; ++i) {
                const bool deepest_in_segment = i + 1 == n || (st[i + 1].pos - 1) / N != (st[i].pos - 1) / N;
                if (!deepest_in_segment && !fixed[i]) keep[i] = false;
            }
            break;
        }
        case PolicyKind::spread: {
            const size_t K = std::max<uint32_t>(p.max_states_per_path, 1);
            if (n <= K) break;
            std::vector<bool> chosen = fixed;
            size_t count = size_t(std::count(fixed.begin(), fixed.end(), true));
            // Targets j * tail / K for j = 1..K-1; each takes the nearest free state (ties: shallower).
            const uint64_t tail = st[n - 1].pos;
            for (size_t j = 1; j < K && count < K; ++j) {
                const uint64_t t = tail * j / K;
                size_t best = n;
                uint64_t best_d = UINT64_MAX;
                for (size_t i = 0; i < n; ++i) {
                    if (chosen[i]) continue;
                    const uint64_t d = st[i].pos > t ? st[i].pos - t : t - st[i].pos;
                    if (d < best_d) best = i, best_d = d;
                }
                if (best == n) break;
                chosen[best] = true;
                ++count;
            }
            keep = chosen;
            break;
        }
        default: break;
    }
    return keep;
}

uint32_t apply_retention(const CheckpointPolicy& p, RadixCache& cache, const TokenSeq& q, uint64_t len) {
    if (p.kind != PolicyKind::cap && p.kind != PolicyKind::segmented && p.kind != PolicyKind::spread)
        return 0;
    const auto st = cache.path_states(q, len);
    const auto keep = retention_keep(p, st);
    uint32_t dropped = 0;
    for (size_t i = 0; i < st.size(); ++i)
        if (!keep[i] && cache.drop_state(st[i].node)) ++dropped;
    return dropped;
}

}  // namespace k3
