#include "core/fleet/router_views.h"

#include <algorithm>

#include "core/base/rng.h"

namespace k3 {

std::span<const uint64_t> BlockHashMemo::of(const TokenSeq& q, uint64_t len) {
    const uint64_t n = std::min<uint64_t>(len, q.size()) / block_;
    std::vector<uint64_t>& h = memo_[&q];
    if (h.size() < n) extend_block_hash_chain(q, len, block_, h);
    return {h.data(), size_t(n)};
}

void KvEventView::stored(const TokenSeq& q, uint64_t upto, double now) {
    const std::span<const uint64_t> h = memo_->of(q, upto);
    Event e{now, true, {h.begin(), h.end()}};
    if (lose_first_ && !e.hashes.empty()) e.hashes.erase(e.hashes.begin());
    if (!e.hashes.empty()) pending_.push_back(std::move(e));
    if (ignore_delay_) advance(now);
}

void KvEventView::removed(const TokenSeq& q, uint64_t start, uint64_t end, double now) {
    if (end <= start) return;
    // Blocks [start / block, ceil(end / block)): a block missing one token is gone.
    const uint64_t last = std::min<uint64_t>((end + block_ - 1) / block_, q.size() / block_);
    const std::span<const uint64_t> h = memo_->of(q, last * block_);
    Event e{now, false, {h.begin() + ptrdiff_t(std::min<uint64_t>(start / block_, h.size())), h.end()}};
    if (!e.hashes.empty()) pending_.push_back(std::move(e));
    if (ignore_delay_) advance(now);
}

void KvEventView::advance(double now) {
    while (!pending_.empty() && (ignore_delay_ || pending_.front().at + delay_ms_ <= now)) {
        const Event& e = pending_.front();
        for (uint64_t h : e.hashes)
            if (e.store)
                held_.insert(h);
            else
                held_.erase(h);
        min_slack_ms_ = std::min(min_slack_ms_, now - e.at - delay_ms_);
        ++applied_;
        pending_.pop_front();
    }
}

uint64_t KvEventView::match(std::span<const uint64_t> hashes) const {
    uint64_t b = 0;
    while (b < hashes.size() && held_.count(hashes[size_t(b)])) ++b;
    return b * block_;
}

ApproxTrees::ApproxTrees(uint32_t workers, uint64_t max_tree_tokens, double eviction_interval_ms)
    : routed_(workers),
      pruned_(workers, 0),
      max_tokens_(max_tree_tokens),
      interval_ms_(eviction_interval_ms),
      next_prune_ms_(eviction_interval_ms) {
    CacheConfig c;  // page 1, KV only, unbounded: pruning is the gateway's own cycle
    c.refresh = LruRefresh::path;
    for (uint32_t w = 0; w < workers; ++w) trees_.push_back(std::make_unique<RadixCache>(c));
}

void ApproxTrees::prune_due(double now) {
    if (interval_ms_ <= 0) return;  // eviction_interval_secs 0: no eviction thread
    while (now >= next_prune_ms_) {
        for (uint32_t w = 0; w < trees_.size(); ++w) {
            const uint64_t t = trees_[w]->stats().kv_tokens;
            if (t > max_tokens_) pruned_[w] += trees_[w]->evict_kv(t - max_tokens_);
        }
        ++cycles_;
        next_prune_ms_ += interval_ms_;
    }
}

uint64_t ApproxTrees::match(uint32_t w, const TokenSeq& q, uint64_t len) const {
    return trees_[w]->match(q, len).kv_len;
}

void ApproxTrees::insert(uint32_t w, const TokenSeqPtr& q, uint64_t len) {
    routed_[w].push_back({q, len});
    if (misroute_) {
        misroute_ = false;
        w = (w + 1) % uint32_t(trees_.size());
    }
    trees_[w]->insert(q, len, {});
    Lease l = trees_[w]->acquire(*q, len, false);  // Tree::insert refreshes the path's timestamps
    trees_[w]->release(l);
}

std::string ApproxTrees::audit() const {
    for (uint32_t w = 0; w < trees_.size(); ++w) {
        RadixCache fresh{CacheConfig{}};
        for (const auto& [q, len] : routed_[w]) fresh.insert(q, len, {});
        const uint64_t f = fresh.stats().kv_tokens, t = trees_[w]->stats().kv_tokens;
        const std::string who = "approximate tree of worker " + std::to_string(w) + ": ";
        if (t > f || t + pruned_[w] < f)
            return who + std::to_string(t) + " tokens, the prompts routed there hold " + std::to_string(f) +
                   " and pruning removed " + std::to_string(pruned_[w]);
        if (pruned_[w] == 0) {
            if (t != f) return who + std::to_string(t) + " tokens, routed prompts " + std::to_string(f);
            for (const auto& [q, len] : routed_[w])
                if (trees_[w]->match(*q, len).kv_len != len)
                    return who + "a routed prompt of " + std::to_string(len) + " tokens is not fully held";
        }
    }
    return "";
}

}  // namespace k3
