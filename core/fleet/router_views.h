// What deployed routers know of each instance's cache, as opposed to the oracle that reads the
// instance's true tree (RouterKind::prefix, state_aware):
//   ApproxTrees   SGLang Model Gateway's cache_aware policy (sgl-project/sglang,
//                 sgl-model-gateway/src/policies/cache_aware.rs, CacheAwarePolicy::select_worker and
//                 select_worker_min_load, at sglang commit 053b63ff; defaults from the gateway's
//                 PolicyConfig): one approximate tree per worker holding the prompts the gateway sent there,
//                 inserted at selection time (on the imbalanced path too), never told of the engine's
//                 evictions, pruned to max_tree_size by LRU leaf eviction every eviction_interval_secs (the
//                 background thread of with_config, Tree::evict_tenant_by_size). The gateway counts text
//                 characters; here tokens.
//   KvEventView   a router fed by the engines' KV events (Dynamo's KvIndexer, llm-d): stored / removed
//                 events per block of `block` tokens, identified by the chained hash of the block and
//                 all before it, applied `delay` after the engine emitted them. delay 0 sees what the
//                 oracle sees, floored to whole blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/cache/radix_cache.h"
#include "core/cache/token_seq.h"

namespace k3 {

// block_hash_chain (core/cache/token_seq.h) of each sequence, computed once and extended on demand (the
// sequences outlive the run's routers: they are the workload's).
class BlockHashMemo {
  public:
    explicit BlockHashMemo(uint32_t block) : block_(block ? block : 1) {}
    uint32_t block() const { return block_; }
    // Hashes of the whole blocks of q[0, len).
    std::span<const uint64_t> of(const TokenSeq& q, uint64_t len);

  private:
    uint32_t block_;
    std::unordered_map<const TokenSeq*, std::vector<uint64_t>> memo_;
};

class KvEventView {
  public:
    // `memo` (shared by the instances' views) outlives the view.
    KvEventView(BlockHashMemo& memo, double delay_ms)
        : memo_(&memo), block_(memo.block()), delay_ms_(delay_ms) {}
    uint32_t block() const { return block_; }
    // The engine cached q[0, upto): every whole block of it is stored.
    void stored(const TokenSeq& q, uint64_t upto, double now);
    // The engine let go of q[start, end): every block that overlaps it is removed.
    void removed(const TokenSeq& q, uint64_t start, uint64_t end, double now);
    // Applies the events emitted at or before now - delay, in emission order.
    void advance(double now);
    // Tokens of the longest run of leading blocks the view holds (hashes from block_hash_chain).
    uint64_t match(std::span<const uint64_t> hashes) const;

    // ---- audit ----
    size_t blocks() const { return held_.size(); }
    size_t pending() const { return pending_.size(); }
    uint64_t applied() const { return applied_; }
    // Smallest (applied at - emitted at) over the applied events minus the delay: >= 0 unless an event
    // was applied early. +inf when none was applied.
    double min_slack_ms() const { return min_slack_ms_; }
    // Falsifier: apply events as soon as they are emitted, whatever the delay.
    void ignore_delay() { ignore_delay_ = true; }
    // Falsifier: every stored event loses its first block.
    void lose_first_block() { lose_first_ = true; }

  private:
    struct Event {
        double at = 0;
        bool store = true;
        std::vector<uint64_t> hashes;
    };
    BlockHashMemo* memo_;
    uint32_t block_;
    double delay_ms_;
    std::deque<Event> pending_;
    std::unordered_set<uint64_t> held_;
    uint64_t applied_ = 0;
    double min_slack_ms_ = 1e300;
    bool ignore_delay_ = false, lose_first_ = false;
};

class ApproxTrees {
  public:
    ApproxTrees(uint32_t workers, uint64_t max_tree_tokens, double eviction_interval_ms);
    uint32_t workers() const { return uint32_t(trees_.size()); }
    // The LRU pruning cycles due by `now` (the gateway's background thread).
    void prune_due(double now);
    uint64_t match(uint32_t w, const TokenSeq& q, uint64_t len) const;
    // The gateway sends the prompt to w: its tree learns it (tree.insert(text, url)).
    void insert(uint32_t w, const TokenSeqPtr& q, uint64_t len);

    // ---- audit ----
    uint64_t tree_tokens(uint32_t w) const { return trees_[w]->stats().kv_tokens; }
    uint64_t pruned_tokens(uint32_t w) const { return pruned_[w]; }
    uint64_t prune_cycles() const { return cycles_; }
    // "" when each tree holds exactly the prompts routed to its worker minus its pruning: a fresh tree of
    // the routed prompts holds F tokens; the approximate tree holds T with F - pruned <= T <= F, and
    // T == F with every routed prompt fully matched when nothing was pruned.
    std::string audit() const;
    // Falsifier: the next insert goes to the next worker instead.
    void misroute_next_insert() { misroute_ = true; }

  private:
    std::vector<std::unique_ptr<RadixCache>> trees_;
    std::vector<std::vector<std::pair<TokenSeqPtr, uint64_t>>> routed_;  // prompts inserted, in order
    std::vector<uint64_t> pruned_;
    uint64_t max_tokens_;
    double interval_ms_, next_prune_ms_;
    uint64_t cycles_ = 0;
    bool misroute_ = false;
};

}  // namespace k3
