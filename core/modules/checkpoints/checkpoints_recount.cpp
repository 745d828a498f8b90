// Module 5 `checkpoints`: every request's hits recounted from the workload's tokens, without the radix
// tree. In an unbounded cache without retention nothing cached is ever lost, so a prompt's KV-visible
// hit is its longest common prefix (page-floored) with what one earlier request cached, and its
// state-usable hit the deepest checkpoint that an earlier request left on that common prefix. Where a
// request leaves checkpoints is the policy's plan (plan_checkpoints), fed the recount's own hits; the
// tree's match, split, insert and checkpoint bookkeeping are not used.
#include <algorithm>
#include <unordered_map>

#include "core/modules/checkpoints/checkpoints.h"

namespace k3 {

namespace {

// Comparisons the recount may make (one common_prefix call per pair of requests that start with the
// same token): the default synthetic mix needs about a tenth of this.
constexpr uint64_t kMaxRecountPairs = 4000000;

// What one earlier request left in the cache: its cached tokens and the checkpoint positions it planned.
struct Cached {
    const TokenSeq* tokens = nullptr;
    uint64_t len = 0;                   // cached tokens (page-floored)
    std::vector<uint64_t> checkpoints;  // ascending
};

bool recountable(const ReplayConfig& c) {
    const PolicyKind k = c.policy.kind;
    const bool retention = k == PolicyKind::cap || k == PolicyKind::segmented || k == PolicyKind::spread;
    return c.cache.state_capacity == 0 && c.cache.kv_capacity_tokens == 0 && !retention;
}

// Pairs of requests the recount compares: requests whose first tokens have the same value (equal
// tokens do; distinct streams may share a value too, and common_prefix tells them apart).
uint64_t pairs_to_compare(const Workload& w) {
    std::unordered_map<Token, uint64_t> starts;
    uint64_t pairs = 0;
    for (const Request& r : w.requests)
        if (r.tokens->size() > 0) pairs += starts[r.tokens->at(0)]++;
    return pairs;
}

// Request r's hits against everything cached before it (the requests in `same_start`).
RequestHit hits_of(const TokenSeq& q, uint64_t prompt, uint64_t page, const std::vector<Cached>& cached,
                   const std::vector<size_t>& same_start) {
    RequestHit h;
    for (size_t j : same_start) {
        const Cached& c = cached[j];
        const uint64_t common = common_prefix(q, *c.tokens, 0, std::min(prompt, c.len)) / page * page;
        h.kv_hit = std::max(h.kv_hit, common);
        const auto deeper = std::upper_bound(c.checkpoints.begin(), c.checkpoints.end(), common);
        if (deeper != c.checkpoints.begin()) h.state_hit = std::max(h.state_hit, *std::prev(deeper));
    }
    return h;
}

}  // namespace

std::optional<CheckpointHitRecount> recount_hits(const Workload& w, const ReplayConfig& c) {
    if (!recountable(c) || pairs_to_compare(w) > kMaxRecountPairs) return std::nullopt;
    const uint64_t P = std::max<uint32_t>(c.cache.page_size, 1);
    CheckpointHitRecount out;
    std::vector<Cached> cached;
    std::unordered_map<Token, std::vector<size_t>> by_start;  // requests cached so far, by first token
    for (const Request& r : w.requests) {
        const TokenSeq& q = *r.tokens;
        const uint64_t prompt = std::min<uint64_t>(r.prompt_len, q.size());
        const uint64_t len = std::min(std::max(r.cache_len(), prompt), q.size()) / P * P;
        RequestHit h;
        if (q.size() > 0)
            if (auto it = by_start.find(q.at(0)); it != by_start.end())
                h = hits_of(q, prompt, P, cached, it->second);
        out.hits.push_back(h);
        out.prompt_tokens += prompt;
        out.kv_hit_tokens += h.kv_hit;
        out.state_hit_tokens += h.state_hit;
        out.recomputed_tokens += prompt - h.state_hit;
        Cached mine{&q, len, {}};
        for (const PlannedCheckpoint& pc :
             plan_checkpoints(c.policy, uint32_t(P), len, h.state_hit, h.kv_hit))
            mine.checkpoints.push_back(pc.pos);
        if (len == 0) continue;
        by_start[q.at(0)].push_back(cached.size());
        cached.push_back(std::move(mine));
    }
    return out;
}

}  // namespace k3
