// A radix tree over token ids with page-granular KV and recurrent-state checkpoints on nodes: the
// dual-granularity prefix cache of a hybrid model (reference/serving.md §2.1, SGLang's
// MambaRadixCache; §2.2 vLLM's align mode).
//
// - Every node covers a span [start, end) of page-aligned positions; its KV is cached for that span.
//   A node may hold one state checkpoint: the recurrent state after position `end`. A node whose
//   state was evicted while its KV stayed is a tombstone.
// - Lookup returns two lengths: the KV-visible match (pages whose KV is cached) and the state-usable
//   match (the deepest checkpoint at or above the KV match, or 0). Only the second can be resumed
//   from: a hybrid needs KV *and* the state at the same position (vLLM #43090).
// - Checkpoints are reference counted and never mutated (copy-on-write: a request that resumes
//   borrows the checkpoint and copies it into its own working state). Splitting a node never copies
//   a state: the new upper node gets none.
// - States and KV are evicted separately, each in LRU order: evicting an interior node's state leaves
//   a tombstone, evicting a leaf frees its KV and state and then removes stateless leaf ancestors,
//   whose KV no longer ends at a usable state. A hit refreshes either the matched nodes only or the
//   whole path (SGLang #31643).
// - Running requests hold leases: the matched path's KV and the used checkpoint cannot be evicted
//   while a lease is held.
//
// One implementation for two scales. In metadata mode (workload replay, the fleet) a checkpoint is
// only a byte count and nodes hold no page ids. In real-state mode the owner of the state bytes (the
// runnable model) passes handles (CheckpointRef::handle) and KV page ids into insert(), and a
// CacheObserver is told when the tree lets go of them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/cache/child_index.h"
#include "core/cache/token_seq.h"

namespace k3 {

enum class LruRefresh : uint8_t { node, path };
// Why a checkpoint was taken (for statistics and for retention rules that keep junctions).
enum class CheckpointKind : uint8_t { interval, end, junction, external };
const char* checkpoint_kind_name(CheckpointKind k);

// A state checkpoint's payload: in metadata mode only `bytes`; in real-state mode `handle` names the
// state bytes in the owner's store.
struct CheckpointRef {
    uint64_t handle = 0;
    uint64_t bytes = 0;
};

struct NewCheckpoint {
    uint64_t pos = 0;  // state after token pos - 1 (pos > 0, a multiple of the page size)
    CheckpointRef state;
    CheckpointKind kind = CheckpointKind::interval;
};

// Told when the tree lets go of KV or states. All methods optional.
class CacheObserver {
  public:
    virtual ~CacheObserver() = default;
    // The tree no longer caches KV for positions [start, end) of the path `seq` runs along;
    // `pages` are the page ids it held there (empty in metadata mode).
    virtual void kv_removed(const TokenSeq& seq, uint64_t start, uint64_t end,
                            std::span<const uint32_t> pages) {}
    // The tree no longer holds a checkpoint at position pos of the path `seq` runs along.
    virtual void state_removed(const TokenSeq& seq, uint64_t pos) {}
    // The last reference to a checkpoint is gone: its bytes may be freed.
    virtual void state_freed(const CheckpointRef& ref) {}
};

struct CacheConfig {
    uint32_t page_size = 1;           // tokens per KV page; node boundaries and checkpoints are page aligned
    uint64_t state_capacity = 0;      // checkpoints held by the tree; 0 = unbounded
    uint64_t kv_capacity_tokens = 0;  // KV tokens held by the tree; 0 = unbounded
    LruRefresh refresh = LruRefresh::node;
};

using NodeId = uint32_t;
constexpr NodeId kNoNode = UINT32_MAX;
constexpr NodeId kRoot = 0;

struct Match {
    uint64_t kv_len = 0;        // KV-visible match (page multiple)
    uint64_t state_len = 0;     // state-usable match: deepest checkpoint <= kv_len, or 0
    NodeId kv_node = kRoot;     // deepest node whose KV the match uses (possibly partly)
    NodeId state_node = kRoot;  // node holding the state at state_len (root: resume from zero state)
};

// A running request's hold on its match. Move-only by convention: release it exactly once.
struct Lease {
    Match match;
    uint32_t checkpoint = UINT32_MAX;  // borrowed checkpoint (UINT32_MAX: none)
    CheckpointRef state;               // its payload, to copy into the request's working state
    bool active = false;
};

struct InsertResult {
    uint64_t len = 0;           // tokens inserted (page-floored)
    uint64_t existing_len = 0;  // prefix already cached before the insert (its pages were not adopted)
    uint64_t new_tokens = 0;    // KV tokens added
    uint32_t new_nodes = 0;
    uint32_t states_added = 0;
    uint32_t states_redundant = 0;  // a checkpoint already existed there: the new one was released
    uint32_t states_rejected = 0;   // bad position (not page aligned, 0, beyond len): released
};

struct CacheStats {
    uint64_t nodes = 0;             // excluding the root
    uint64_t kv_tokens = 0;         // held by the tree
    uint64_t states = 0;            // checkpoints held by the tree
    uint64_t state_bytes = 0;       // their bytes
    uint64_t tombstones = 0;        // nodes whose state was evicted or dropped while their KV stayed
    uint64_t live_checkpoints = 0;  // held by the tree or borrowed by a lease
    uint64_t live_state_bytes = 0;
    uint64_t leases = 0;            // active leases
    uint64_t locked_kv_tokens = 0;  // KV of nodes a lease holds (what eviction cannot touch)
    // Cumulative counters.
    uint64_t states_evicted = 0;     // by capacity / evict_states
    uint64_t states_dropped = 0;     // by retention (drop_state)
    uint64_t kv_tokens_evicted = 0;  // by capacity / evict_kv / state eviction of leaves
    uint64_t nodes_removed = 0;
    uint64_t splits = 0;
    uint64_t checkpoints_used = 0;  // checkpoints that at least one lease resumed from
    uint64_t peak_states = 0, peak_kv_tokens = 0, peak_state_bytes = 0;
};

// One node as the tree view and the tests see it.
struct NodeView {
    NodeId id = kRoot, parent = kNoNode;
    uint64_t start = 0, end = 0;
    uint32_t children = 0, depth = 0;  // depth in nodes (root = 0)
    bool has_state = false, tombstone = false;
    CheckpointKind kind = CheckpointKind::interval;
    uint64_t state_bytes = 0;
    uint32_t kv_lock = 0, state_lock = 0;
};

class RadixCache {
  public:
    explicit RadixCache(CacheConfig cfg, CacheObserver* observer = nullptr);
    ~RadixCache();  // lets go of everything (through the observer)
    RadixCache(const RadixCache&) = delete;
    RadixCache& operator=(const RadixCache&) = delete;

    const CacheConfig& config() const { return cfg_; }
    void set_capacity(uint64_t states, uint64_t kv_tokens);

    // Longest cached prefix of q[0, len): no side effects (routers probe with this).
    Match match(const TokenSeq& q, uint64_t len) const;
    // match() + lock the KV path and the state + LRU refresh + borrow the checkpoint. `resume` false: a
    // lock on what the request itself just cached (SGLang re-locks after each chunk), not a resume, so
    // the checkpoint does not count as used.
    Lease acquire(const TokenSeq& q, uint64_t len, bool resume = true);
    void release(Lease& lease);
    // The payload of the checkpoint a match resumes from (empty for the zero state), without a lease.
    CheckpointRef state_at(const Match& m) const;

    // Caches q[0, len) (floored to whole pages) with the given checkpoints. The tree takes
    // ownership of every checkpoint passed (redundant or rejected ones are released at once).
    // `pages` (real-state mode): one page id per page of [0, len); only those of the new part are
    // adopted (see InsertResult::existing_len). Does not evict: call enforce_capacity().
    InsertResult insert(const TokenSeqPtr& q, uint64_t len, std::vector<NewCheckpoint> checkpoints,
                        std::span<const uint32_t> pages = {});

    // Eviction in LRU order, skipping what leases hold. Return what was freed.
    uint64_t evict_states(uint64_t n);
    uint64_t evict_kv(uint64_t tokens);
    // Evict until within the configured capacities (as far as leases allow).
    void enforce_capacity();
    // Evict everything not held by a lease.
    void clear();

    // Retention support: the checkpoints on the cached path of q[0, len), shallowest first.
    struct PathState {
        NodeId node;
        uint64_t pos;
        CheckpointKind kind;
        bool fork, leaf, locked;
    };
    std::vector<PathState> path_states(const TokenSeq& q, uint64_t len) const;
    // Drops a node's checkpoint (leaving a tombstone); false if a lease holds it or there is none.
    bool drop_state(NodeId n);

    // Extra references on a checkpoint (copy-on-write forks share one state).
    CheckpointRef borrow(uint32_t checkpoint);
    void give_back(uint32_t checkpoint);

    const CacheStats& stats() const { return stats_; }
    // Page ids of the lease's KV-visible prefix (real-state mode).
    std::vector<uint32_t> kv_pages(const Lease& lease) const;
    // All nodes in depth-first order (children in insertion order), root first.
    std::vector<NodeView> nodes() const;
    // Verifies every internal invariant; returns "" or what is wrong (tests, module checks).
    std::string audit() const;
    // Falsifier hook (k3cli audit-checks): counts one KV token more than the nodes hold, the kind of
    // bookkeeping slip audit() exists to catch. Nothing else changes.
    void miscount_kv_token() { ++stats_.kv_tokens; }

  private:
    struct Node {
        NodeId parent = kNoNode, first_child = kNoNode, next_sibling = kNoNode, prev_sibling = kNoNode;
        NodeId next_same_key = kNoNode;             // chain of children sharing a child-map key
        NodeId s_prev = kNoNode, s_next = kNoNode;  // state LRU list
        uint32_t n_children = 0;
        uint32_t seq = 0;  // index in seqs_: a sequence that runs along this node
        uint32_t checkpoint = UINT32_MAX;
        uint32_t start = 0, end = 0;
        uint32_t kv_lock = 0, state_lock = 0;
        uint64_t fingerprint = 0;  // of the first page (kept while the parent is a fork)
        uint64_t tick_kv = 0, tick_state = 0;
        bool alive = false, had_state = false;
    };
    struct Checkpoint {
        CheckpointRef ref;
        uint32_t refs = 0;
        uint32_t uses = 0;  // leases that resumed from it
        NodeId node = kNoNode;
        uint32_t pos = 0;
        CheckpointKind kind = CheckpointKind::interval;
    };
    struct SeqSlot {
        TokenSeqPtr seq;
        uint32_t nodes = 0;
    };

    const TokenSeq& seq_of(NodeId n) const { return *seqs_[nodes_[n].seq].seq; }
    uint64_t child_key(NodeId parent, uint64_t fp) const;
    // The child of `parent` whose first page equals q's page at pos; d = first position in
    // [pos, min(child end, end)) where they differ. Needs pos + page_size <= end.
    NodeId find_child(NodeId parent, const TokenSeq& q, uint64_t pos, uint64_t end, uint64_t& d) const;
    void index_add(NodeId c);
    void index_remove(NodeId c);
    void link_child(NodeId parent, NodeId c);
    void unlink_child(NodeId c);
    uint32_t ref_seq(const TokenSeqPtr& s);
    void unref_seq(uint32_t slot);
    NodeId new_node();
    NodeId split(NodeId c, uint64_t at);
    void remove_leaf(NodeId n);
    void remove_with_ancestors(NodeId n);  // remove a leaf, then stateless unlocked leaf ancestors
    void attach_state(NodeId n, const NewCheckpoint& cp);
    void detach_state(NodeId n);
    void unref_checkpoint(uint32_t c);
    void touch_kv(NodeId n);
    void touch_state(NodeId n);
    void kv_push(NodeId n);
    bool kv_entry_live(const std::pair<uint64_t, NodeId>& e) const;
    void state_unlink(NodeId n);
    void state_append(NodeId n);
    void note_peaks();

    // insert(), in its two passes. Walks q[0, len) down the tree, splitting a node where q leaves it
    // and ending in a new leaf for the part not cached yet; returns the nodes passed, shallowest first.
    std::vector<NodeId> insert_path(const TokenSeq& q, uint64_t len, uint32_t slot,
                                    std::span<const uint32_t> pages, InsertResult& r);
    // A leaf for [start, end) of sequence slot `slot` under `parent`, adopting its pages (if any).
    NodeId add_leaf(NodeId parent, uint64_t start, uint64_t end, uint32_t slot,
                    std::span<const uint32_t> pages);
    // Attaches each checkpoint to the node of `path` ending at its position (splitting one if needed),
    // releasing the rejected and redundant ones; `path` gains the split nodes.
    void place_checkpoints(std::vector<NewCheckpoint>& cps, uint64_t len, std::vector<NodeId>& path,
                           InsertResult& r);

    // audit(), one invariant at a time; each returns "" or what is wrong. What the node pass counts
    // is compared with stats_ afterwards.
    struct AuditTotals {
        uint64_t nodes = 0, kv = 0, states = 0, bytes = 0, tombstones = 0, locked_kv = 0;
    };
    std::string audit_node(NodeId n, AuditTotals& t) const;  // one live node (not the root)
    std::string audit_span(NodeId n) const;                  // its span continues its parent's
    std::string audit_index_entry(NodeId n) const;           // the child index finds it
    std::string audit_children(NodeId n) const;              // its child list and its locks
    std::string audit_fork_pages() const;
    std::string audit_totals(const AuditTotals& t) const;
    std::string audit_kv_heap() const;
    std::string audit_state_list(uint64_t states) const;
    std::string audit_checkpoints() const;
    std::string audit_sequences() const;

    CacheConfig cfg_;
    CacheObserver* observer_;
    std::vector<Node> nodes_;
    std::vector<NodeId> free_nodes_;
    std::vector<Checkpoint> cps_;
    std::vector<uint32_t> free_cps_;
    std::vector<SeqSlot> seqs_;
    std::vector<uint32_t> free_seqs_;
    std::vector<std::vector<uint32_t>> pages_;  // per node, real-state mode only
    ChildIndex children_;                       // child key -> first node of its chain
    // KV eviction candidates (leaves): a min-heap of (KV tick, node) with lazy deletion. An entry is
    // live while its node is alive, a leaf, and still has that tick.
    std::vector<std::pair<uint64_t, NodeId>> kv_heap_;
    // Nodes holding a state, least recently used first: ticks only grow, so a touch moves a node to
    // the tail and the list stays in tick order.
    NodeId state_head_ = kNoNode, state_tail_ = kNoNode;
    uint64_t clock_ = 0;
    CacheStats stats_;
};

}  // namespace k3
