#include "core/cache/radix_cache.h"

#include <algorithm>
#include <functional>

namespace k3 {

const char* checkpoint_kind_name(CheckpointKind k) {
    switch (k) {
        case CheckpointKind::interval: return "interval";
        case CheckpointKind::end: return "end";
        case CheckpointKind::junction: return "junction";
        case CheckpointKind::external: return "external";
    }
    return "?";
}

RadixCache::RadixCache(CacheConfig cfg, CacheObserver* observer) : cfg_(cfg), observer_(observer) {
    if (cfg_.page_size == 0) cfg_.page_size = 1;
    nodes_.emplace_back();
    nodes_[kRoot].alive = true;
    nodes_[kRoot].seq = UINT32_MAX;
    pages_.emplace_back();
}

RadixCache::~RadixCache() {
    if (!observer_) return;
    for (NodeId n = 1; n < nodes_.size(); ++n) {
        const Node& x = nodes_[n];
        if (!x.alive) continue;
        if (x.checkpoint != UINT32_MAX) observer_->state_removed(seq_of(n), x.end);
        observer_->kv_removed(seq_of(n), x.start, x.end, pages_[n]);
    }
    for (const Checkpoint& c : cps_)
        if (c.refs > 0) observer_->state_freed(c.ref);
}

void RadixCache::set_capacity(uint64_t states, uint64_t kv_tokens) {
    cfg_.state_capacity = states;
    cfg_.kv_capacity_tokens = kv_tokens;
}

// ---- child index -----------------------------------------------------------------------------

uint64_t RadixCache::child_key(NodeId parent, uint64_t fp) const {
    return mix64(fp ^ (uint64_t(parent) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
}

// Children are looked up through the index only below forks (two or more children); a single child
// is compared directly. The long single-child chains that checkpoints cut a path into then cost no
// hashing at all.
void RadixCache::index_add(NodeId c) {
    Node& x = nodes_[c];
    x.fingerprint = page_fingerprint(seq_of(c), x.start, cfg_.page_size);
    auto [head, fresh] = children_.try_emplace(child_key(x.parent, x.fingerprint), c);
    x.next_same_key = fresh ? kNoNode : *head;
    if (!fresh) *head = c;
}

void RadixCache::index_remove(NodeId c) {
    Node& x = nodes_[c];
    uint32_t* head = children_.find(child_key(x.parent, x.fingerprint));
    if (*head == c) {
        if (x.next_same_key == kNoNode)
            children_.erase(head);
        else
            *head = x.next_same_key;
    } else {
        NodeId k = *head;
        while (nodes_[k].next_same_key != c) k = nodes_[k].next_same_key;
        nodes_[k].next_same_key = x.next_same_key;
    }
    x.next_same_key = kNoNode;
}

NodeId RadixCache::find_child(NodeId parent, const TokenSeq& q, uint64_t pos, uint64_t end,
                              uint64_t& d) const {
    const uint64_t P = cfg_.page_size;
    const Node& p = nodes_[parent];
    if (p.n_children == 0) return kNoNode;
    // The child's first page must equal q's: compare as far as both go.
    auto agrees = [&](NodeId c) {
        d = common_prefix(seq_of(c), q, pos, std::min<uint64_t>(nodes_[c].end, end));
        return d >= pos + P;
    };
    if (p.n_children == 1) return agrees(p.first_child) ? p.first_child : kNoNode;
    const uint64_t fp = page_fingerprint(q, pos, P);
    const uint32_t* head = children_.find(child_key(parent, fp));
    if (!head) return kNoNode;
    // A fingerprint match is only a candidate: the page is compared token by token.
    for (NodeId c = *head; c != kNoNode; c = nodes_[c].next_same_key)
        if (nodes_[c].parent == parent && nodes_[c].fingerprint == fp && agrees(c)) return c;
    return kNoNode;
}

void RadixCache::link_child(NodeId parent, NodeId c) {
    Node& x = nodes_[c];
    Node& p = nodes_[parent];
    x.parent = parent;
    x.prev_sibling = kNoNode;
    x.next_sibling = p.first_child;
    x.next_same_key = kNoNode;
    const NodeId other = p.first_child;
    if (other != kNoNode) nodes_[other].prev_sibling = c;
    p.first_child = c;
    ++p.n_children;  // p's KV heap entry, if any, is dead while p has children
    if (p.n_children == 2) index_add(other);
    if (p.n_children >= 2) index_add(c);
}

void RadixCache::unlink_child(NodeId c) {
    Node& x = nodes_[c];
    const NodeId parent = x.parent;
    Node& p = nodes_[parent];
    if (p.n_children >= 2) index_remove(c);
    if (x.prev_sibling != kNoNode)
        nodes_[x.prev_sibling].next_sibling = x.next_sibling;
    else
        p.first_child = x.next_sibling;
    if (x.next_sibling != kNoNode) nodes_[x.next_sibling].prev_sibling = x.prev_sibling;
    x.prev_sibling = x.next_sibling = kNoNode;
    x.parent = kNoNode;
    --p.n_children;
    if (p.n_children == 1) index_remove(p.first_child);         // no longer below a fork
    if (p.n_children == 0 && parent != kRoot) kv_push(parent);  // a leaf again
}

// ---- nodes, sequences, checkpoints ---------------------------------------------------------------

// A slot of `v` for a new element: the last one freed (listed in `free`), else a new one at the end.
template <class T>
static uint32_t take_slot(std::vector<T>& v, std::vector<uint32_t>& free) {
    if (free.empty()) {
        v.emplace_back();
        return uint32_t(v.size() - 1);
    }
    const uint32_t slot = free.back();
    free.pop_back();
    return slot;
}

uint32_t RadixCache::ref_seq(const TokenSeqPtr& s) {
    const uint32_t slot = take_slot(seqs_, free_seqs_);
    seqs_[slot] = {s, 0};
    return slot;
}

void RadixCache::unref_seq(uint32_t slot) {
    if (--seqs_[slot].nodes == 0) {
        seqs_[slot].seq.reset();
        free_seqs_.push_back(slot);
    }
}

NodeId RadixCache::new_node() {
    NodeId n;
    if (!free_nodes_.empty()) {
        n = free_nodes_.back();
        free_nodes_.pop_back();
        nodes_[n] = Node{};
    } else {
        n = NodeId(nodes_.size());
        nodes_.emplace_back();
        pages_.emplace_back();
    }
    nodes_[n].alive = true;
    ++stats_.nodes;
    return n;
}

// Splits c at `at` (c.start < at < c.end): a new upper node takes [start, at) and c's place under
// its parent; c keeps [at, end), its children and its state (the state is at c's end, which did not
// move; nothing is copied).
NodeId RadixCache::split(NodeId c, uint64_t at) {
    const NodeId u = new_node();
    Node& U = nodes_[u];
    Node& C = nodes_[c];
    const NodeId parent = C.parent;
    U.start = C.start;
    U.end = uint32_t(at);
    U.seq = C.seq;
    ++seqs_[C.seq].nodes;
    U.tick_kv = C.tick_kv;
    U.kv_lock = C.kv_lock;  // every lease through c passes through u
    U.parent = parent;
    // u takes c's place in its parent's sibling list and, below a fork, in its child-key chain (same
    // parent, same first page, so the same key).
    U.prev_sibling = C.prev_sibling;
    U.next_sibling = C.next_sibling;
    if (C.prev_sibling != kNoNode)
        nodes_[C.prev_sibling].next_sibling = u;
    else
        nodes_[parent].first_child = u;
    if (C.next_sibling != kNoNode) nodes_[C.next_sibling].prev_sibling = u;
    if (nodes_[parent].n_children >= 2) {
        U.fingerprint = C.fingerprint;
        U.next_same_key = C.next_same_key;
        uint32_t* head = children_.find(child_key(parent, C.fingerprint));
        if (*head == c) {
            *head = u;
        } else {
            NodeId k = *head;
            while (nodes_[k].next_same_key != c) k = nodes_[k].next_same_key;
            nodes_[k].next_same_key = u;
        }
    }
    C.prev_sibling = C.next_sibling = C.next_same_key = kNoNode;
    C.start = uint32_t(at);
    link_child(u, c);
    if (!pages_[c].empty()) {
        const size_t k = size_t((at - U.start) / cfg_.page_size);
        pages_[u].assign(pages_[c].begin(), pages_[c].begin() + ptrdiff_t(k));
        pages_[c].erase(pages_[c].begin(), pages_[c].begin() + ptrdiff_t(k));
    }
    ++stats_.splits;
    return u;
}

void RadixCache::touch_kv(NodeId n) {
    if (n == kRoot) return;
    nodes_[n].tick_kv = ++clock_;
    if (nodes_[n].n_children == 0) kv_push(n);
}

void RadixCache::touch_state(NodeId n) {
    Node& x = nodes_[n];
    if (x.checkpoint == UINT32_MAX) return;
    x.tick_state = ++clock_;
    state_unlink(n);
    state_append(n);
}

bool RadixCache::kv_entry_live(const std::pair<uint64_t, NodeId>& e) const {
    const Node& x = nodes_[e.second];
    return e.second != kRoot && x.alive && x.n_children == 0 && x.tick_kv == e.first;
}

void RadixCache::kv_push(NodeId n) {
    // Dead entries pile up as leaves are touched; rebuild once they outnumber the nodes.
    if (kv_heap_.size() > 2 * stats_.nodes + 64) {
        kv_heap_.clear();
        for (NodeId k = 1; k < nodes_.size(); ++k)
            if (nodes_[k].alive && nodes_[k].n_children == 0 && k != n)
                kv_heap_.push_back({nodes_[k].tick_kv, k});
        std::make_heap(kv_heap_.begin(), kv_heap_.end(), std::greater<>());
    }
    kv_heap_.push_back({nodes_[n].tick_kv, n});
    std::push_heap(kv_heap_.begin(), kv_heap_.end(), std::greater<>());
}

void RadixCache::state_unlink(NodeId n) {
    Node& x = nodes_[n];
    if (x.s_prev != kNoNode)
        nodes_[x.s_prev].s_next = x.s_next;
    else
        state_head_ = x.s_next;
    if (x.s_next != kNoNode)
        nodes_[x.s_next].s_prev = x.s_prev;
    else
        state_tail_ = x.s_prev;
    x.s_prev = x.s_next = kNoNode;
}

void RadixCache::state_append(NodeId n) {
    Node& x = nodes_[n];
    x.s_prev = state_tail_;
    x.s_next = kNoNode;
    if (state_tail_ != kNoNode)
        nodes_[state_tail_].s_next = n;
    else
        state_head_ = n;
    state_tail_ = n;
}

void RadixCache::attach_state(NodeId n, const NewCheckpoint& cp) {
    const uint32_t c = take_slot(cps_, free_cps_);
    Node& x = nodes_[n];
    cps_[c] = {cp.state, 1, 0, n, x.end, cp.kind};
    x.checkpoint = c;
    if (x.had_state) --stats_.tombstones;  // revived
    x.had_state = true;
    ++stats_.states;
    stats_.state_bytes += cp.state.bytes;
    ++stats_.live_checkpoints;
    stats_.live_state_bytes += cp.state.bytes;
    x.tick_state = ++clock_;
    state_append(n);
    note_peaks();
}

void RadixCache::detach_state(NodeId n) {
    Node& x = nodes_[n];
    const uint32_t c = x.checkpoint;
    if (observer_) observer_->state_removed(seq_of(n), x.end);
    state_unlink(n);
    x.checkpoint = UINT32_MAX;
    --stats_.states;
    stats_.state_bytes -= cps_[c].ref.bytes;
    ++stats_.tombstones;
    cps_[c].node = kNoNode;
    unref_checkpoint(c);
}

void RadixCache::unref_checkpoint(uint32_t c) {
    if (--cps_[c].refs > 0) return;
    if (observer_) observer_->state_freed(cps_[c].ref);
    --stats_.live_checkpoints;
    stats_.live_state_bytes -= cps_[c].ref.bytes;
    cps_[c] = Checkpoint{};
    free_cps_.push_back(c);
}

CheckpointRef RadixCache::borrow(uint32_t c) {
    ++cps_[c].refs;
    return cps_[c].ref;
}

void RadixCache::give_back(uint32_t c) { unref_checkpoint(c); }

void RadixCache::remove_leaf(NodeId n) {
    Node& x = nodes_[n];
    if (x.checkpoint != UINT32_MAX) detach_state(n);
    if (observer_) observer_->kv_removed(seq_of(n), x.start, x.end, pages_[n]);
    const uint64_t len = x.end - x.start;
    stats_.kv_tokens -= len;
    stats_.kv_tokens_evicted += len;
    if (x.had_state) --stats_.tombstones;
    unlink_child(n);
    unref_seq(x.seq);
    pages_[n].clear();
    x = Node{};
    free_nodes_.push_back(n);
    --stats_.nodes;
    ++stats_.nodes_removed;
}

void RadixCache::remove_with_ancestors(NodeId n) {
    NodeId p = nodes_[n].parent;
    remove_leaf(n);
    // KV below the deepest surviving state cannot be resumed from: drop stateless leaf ancestors.
    while (p != kRoot && nodes_[p].n_children == 0 && nodes_[p].checkpoint == UINT32_MAX &&
           nodes_[p].kv_lock == 0) {
        const NodeId up = nodes_[p].parent;
        remove_leaf(p);
        p = up;
    }
}

void RadixCache::note_peaks() {
    stats_.peak_states = std::max(stats_.peak_states, stats_.states);
    stats_.peak_kv_tokens = std::max(stats_.peak_kv_tokens, stats_.kv_tokens);
    stats_.peak_state_bytes = std::max(stats_.peak_state_bytes, stats_.state_bytes);
}

// ---- lookup and leases ---------------------------------------------------------------------------

Match RadixCache::match(const TokenSeq& q, uint64_t len) const {
    const uint64_t P = cfg_.page_size;
    len = std::min({len, q.size(), TokenSeq::kMaxLength}) / P * P;
    Match m;
    NodeId node = kRoot;
    uint64_t pos = 0;
    while (pos < len) {
        uint64_t d = 0;
        const NodeId c = find_child(node, q, pos, len, d);
        if (c == kNoNode) break;
        const Node& x = nodes_[c];
        d = d / P * P;
        m.kv_node = c;
        if (d < x.end) {  // the match ends inside this node's span
            pos = d;
            break;
        }
        pos = x.end;
        node = c;
        if (x.checkpoint != UINT32_MAX) {
            m.state_len = pos;
            m.state_node = c;
        }
    }
    m.kv_len = pos;
    return m;
}

CheckpointRef RadixCache::state_at(const Match& m) const {
    if (m.state_node == kRoot || nodes_[m.state_node].checkpoint == UINT32_MAX) return {};
    return cps_[nodes_[m.state_node].checkpoint].ref;
}

Lease RadixCache::acquire(const TokenSeq& q, uint64_t len, bool resume) {
    Lease l;
    l.match = match(q, len);
    l.active = true;
    ++stats_.leases;
    std::vector<NodeId> path;
    for (NodeId n = l.match.kv_node; n != kRoot; n = nodes_[n].parent) {
        if (nodes_[n].kv_lock++ == 0) stats_.locked_kv_tokens += nodes_[n].end - nodes_[n].start;
        path.push_back(n);
    }
    if (l.match.state_node != kRoot) {
        Node& s = nodes_[l.match.state_node];
        ++s.state_lock;
        l.checkpoint = s.checkpoint;
        l.state = borrow(s.checkpoint);
        if (resume && cps_[s.checkpoint].uses++ == 0) ++stats_.checkpoints_used;
    }
    if (cfg_.refresh == LruRefresh::path) {
        // Root to leaf, so deeper nodes end up more recent than their ancestors.
        for (auto it = path.rbegin(); it != path.rend(); ++it) {
            touch_kv(*it);
            touch_state(*it);
        }
    } else {
        touch_kv(l.match.kv_node);
        if (l.match.state_node != kRoot) touch_state(l.match.state_node);
    }
    return l;
}

void RadixCache::release(Lease& l) {
    if (!l.active) return;
    for (NodeId n = l.match.kv_node; n != kRoot; n = nodes_[n].parent)
        if (--nodes_[n].kv_lock == 0) stats_.locked_kv_tokens -= nodes_[n].end - nodes_[n].start;
    if (l.match.state_node != kRoot) {
        --nodes_[l.match.state_node].state_lock;
        give_back(l.checkpoint);
    }
    l.active = false;
    --stats_.leases;
}

std::vector<uint32_t> RadixCache::kv_pages(const Lease& l) const {
    std::vector<NodeId> path;
    for (NodeId n = l.match.kv_node; n != kRoot; n = nodes_[n].parent) path.push_back(n);
    std::vector<uint32_t> out;
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
        const Node& x = nodes_[*it];
        const auto& pg = pages_[*it];
        const uint64_t end = std::min<uint64_t>(x.end, l.match.kv_len);
        if (end <= x.start) break;
        const size_t k = std::min(pg.size(), size_t((end - x.start) / cfg_.page_size));
        out.insert(out.end(), pg.begin(), pg.begin() + ptrdiff_t(k));
    }
    return out;
}

// ---- insert -----------------------------------------------------------------------------------------

InsertResult RadixCache::insert(const TokenSeqPtr& qp, uint64_t len, std::vector<NewCheckpoint> cps,
                                std::span<const uint32_t> pages) {
    const TokenSeq& q = *qp;
    const uint64_t P = cfg_.page_size;
    InsertResult r;
    len = std::min({len, q.size(), TokenSeq::kMaxLength}) / P * P;
    r.len = len;
    if (pages.size() != len / P) pages = {};

    const uint32_t slot = ref_seq(qp);
    ++seqs_[slot].nodes;  // held for the duration of the insert
    std::vector<NodeId> path = insert_path(q, len, slot, pages, r);
    place_checkpoints(cps, len, path, r);
    if (cfg_.refresh == LruRefresh::path) {
        for (NodeId n : path) {
            touch_kv(n);
            touch_state(n);
        }
    }
    unref_seq(slot);
    return r;
}

std::vector<NodeId> RadixCache::insert_path(const TokenSeq& q, uint64_t len, uint32_t slot,
                                            std::span<const uint32_t> pages, InsertResult& r) {
    const uint64_t P = cfg_.page_size;
    std::vector<NodeId> path;
    NodeId node = kRoot;
    uint64_t pos = 0;
    while (pos < len) {
        uint64_t d = 0;
        const NodeId c = find_child(node, q, pos, len, d);
        if (c == kNoNode) {  // the rest is not cached: one new leaf holds it
            path.push_back(add_leaf(node, pos, len, slot, pages));
            r.new_tokens = len - pos;
            ++r.new_nodes;
            note_peaks();
            break;
        }
        // Node boundaries are page aligned: q leaves the child at the page where they differ.
        d = d / P * P;
        if (d < nodes_[c].end) {
            const NodeId u = split(c, d);
            ++r.new_nodes;
            path.push_back(u);
            node = u;
            pos = d;
        } else {
            path.push_back(c);
            node = c;
            pos = nodes_[c].end;
        }
        r.existing_len = pos;
    }
    return path;
}

NodeId RadixCache::add_leaf(NodeId parent, uint64_t start, uint64_t end, uint32_t slot,
                            std::span<const uint32_t> pages) {
    const uint64_t P = cfg_.page_size;
    const NodeId n = new_node();
    Node& x = nodes_[n];
    x.start = uint32_t(start);
    x.end = uint32_t(end);
    x.seq = slot;
    ++seqs_[slot].nodes;
    x.tick_kv = ++clock_;
    link_child(parent, n);
    kv_push(n);
    if (!pages.empty())
        pages_[n].assign(pages.begin() + ptrdiff_t(start / P), pages.begin() + ptrdiff_t(end / P));
    stats_.kv_tokens += end - start;
    return n;
}

// Checkpoints: each needs a node ending exactly at its position.
void RadixCache::place_checkpoints(std::vector<NewCheckpoint>& cps, uint64_t len, std::vector<NodeId>& path,
                                   InsertResult& r) {
    const uint64_t P = cfg_.page_size;
    std::stable_sort(cps.begin(), cps.end(),
                     [](const NewCheckpoint& a, const NewCheckpoint& b) { return a.pos < b.pos; });
    size_t j = 0;
    uint64_t last = 0;
    for (const NewCheckpoint& cp : cps) {
        const bool bad = cp.pos == 0 || cp.pos > len || cp.pos % P != 0 || cp.pos == last;
        if (bad) {
            ++r.states_rejected;
            if (observer_) observer_->state_freed(cp.state);
            continue;
        }
        last = cp.pos;
        // Positions ascend, so the node ending at this one is at j or deeper on the path.
        while (nodes_[path[j]].end < cp.pos) ++j;
        NodeId x = path[j];
        if (cp.pos < nodes_[x].end) {
            x = split(x, cp.pos);
            ++r.new_nodes;
            path.insert(path.begin() + ptrdiff_t(j), x);
        }
        if (nodes_[x].checkpoint != UINT32_MAX) {
            ++r.states_redundant;  // the tree's state there is never replaced (copy-on-write)
            if (observer_) observer_->state_freed(cp.state);
            continue;
        }
        attach_state(x, cp);
        ++r.states_added;
    }
}

// ---- eviction -------------------------------------------------------------------------------------

uint64_t RadixCache::evict_states(uint64_t n) {
    uint64_t done = 0;
    NodeId it = state_head_;
    while (done < n && it != kNoNode) {
        const NodeId x = it;
        it = nodes_[x].s_next;  // x leaves the list below; removals never touch other state holders
        if (nodes_[x].state_lock > 0) continue;
        if (nodes_[x].n_children == 0 && nodes_[x].kv_lock == 0)
            remove_with_ancestors(x);  // a leaf: its KV goes with its state
        else
            detach_state(x);  // tombstone: the KV stays
        ++stats_.states_evicted;
        ++done;
    }
    return done;
}

uint64_t RadixCache::evict_kv(uint64_t tokens) {
    const uint64_t before = stats_.kv_tokens;
    std::vector<std::pair<uint64_t, NodeId>> held;  // live entries of leased leaves: back in afterwards
    while (before - stats_.kv_tokens < tokens && !kv_heap_.empty()) {
        std::pop_heap(kv_heap_.begin(), kv_heap_.end(), std::greater<>());
        const auto e = kv_heap_.back();
        kv_heap_.pop_back();
        if (!kv_entry_live(e)) continue;
        if (nodes_[e.second].kv_lock > 0) {
            held.push_back(e);
            continue;
        }
        if (nodes_[e.second].checkpoint != UINT32_MAX) ++stats_.states_evicted;
        remove_with_ancestors(e.second);
    }
    for (const auto& e : held) {
        kv_heap_.push_back(e);
        std::push_heap(kv_heap_.begin(), kv_heap_.end(), std::greater<>());
    }
    return before - stats_.kv_tokens;
}

void RadixCache::enforce_capacity() {
    if (cfg_.state_capacity > 0 && stats_.states > cfg_.state_capacity)
        evict_states(stats_.states - cfg_.state_capacity);
    if (cfg_.kv_capacity_tokens > 0 && stats_.kv_tokens > cfg_.kv_capacity_tokens)
        evict_kv(stats_.kv_tokens - cfg_.kv_capacity_tokens);
}

void RadixCache::clear() {
    evict_states(UINT64_MAX);
    evict_kv(UINT64_MAX);
}

// ---- retention support ------------------------------------------------------------------------------

std::vector<RadixCache::PathState> RadixCache::path_states(const TokenSeq& q, uint64_t len) const {
    const uint64_t P = cfg_.page_size;
    len = std::min({len, q.size(), TokenSeq::kMaxLength}) / P * P;
    std::vector<PathState> out;
    NodeId node = kRoot;
    uint64_t pos = 0;
    while (pos < len) {
        uint64_t d = 0;
        const NodeId c = find_child(node, q, pos, len, d);
        if (c == kNoNode) break;
        const Node& x = nodes_[c];
        if (d < x.end) break;
        if (x.checkpoint != UINT32_MAX)
            out.push_back(
                {c, x.end, cps_[x.checkpoint].kind, x.n_children >= 2, x.n_children == 0, x.state_lock > 0});
        node = c;
        pos = x.end;
    }
    return out;
}

bool RadixCache::drop_state(NodeId n) {
    if (n == kRoot || n >= nodes_.size() || !nodes_[n].alive) return false;
    if (nodes_[n].checkpoint == UINT32_MAX || nodes_[n].state_lock > 0) return false;
    detach_state(n);
    ++stats_.states_dropped;
    return true;
}

// ---- introspection ----------------------------------------------------------------------------------

std::vector<NodeView> RadixCache::nodes() const {
    std::vector<NodeView> out;
    std::vector<std::pair<NodeId, uint32_t>> stack{{kRoot, 0}};
    while (!stack.empty()) {
        const auto [n, depth] = stack.back();
        stack.pop_back();
        const Node& x = nodes_[n];
        NodeView v;
        v.id = n;
        v.parent = x.parent;
        v.start = x.start;
        v.end = x.end;
        v.children = x.n_children;
        v.depth = depth;
        v.has_state = x.checkpoint != UINT32_MAX;
        v.tombstone = x.had_state && !v.has_state;
        if (v.has_state) {
            v.kind = cps_[x.checkpoint].kind;
            v.state_bytes = cps_[x.checkpoint].ref.bytes;
        }
        v.kv_lock = x.kv_lock;
        v.state_lock = x.state_lock;
        out.push_back(v);
        // Push in reverse so children come out in sibling-list order.
        std::vector<NodeId> kids;
        for (NodeId c = x.first_child; c != kNoNode; c = nodes_[c].next_sibling) kids.push_back(c);
        for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, depth + 1});
    }
    return out;
}

std::string RadixCache::audit() const {
    AuditTotals t;
    for (NodeId n = 1; n < nodes_.size(); ++n)
        if (nodes_[n].alive)
            if (std::string e = audit_node(n, t); !e.empty()) return "node " + std::to_string(n) + ": " + e;
    if (std::string e = audit_fork_pages(); !e.empty()) return e;
    // The root is skipped above: only its child count can be wrong.
    if (nodes_[kRoot].n_children > 0) {
        uint32_t kids = 0;
        for (NodeId c = nodes_[kRoot].first_child; c != kNoNode; c = nodes_[c].next_sibling) ++kids;
        if (kids != nodes_[kRoot].n_children) return "root child count";
    }
    if (std::string e = audit_totals(t); !e.empty()) return e;
    if (std::string e = audit_kv_heap(); !e.empty()) return e;
    if (std::string e = audit_state_list(t.states); !e.empty()) return e;
    if (std::string e = audit_checkpoints(); !e.empty()) return e;
    return audit_sequences();
}

std::string RadixCache::audit_node(NodeId n, AuditTotals& t) const {
    const uint64_t P = cfg_.page_size;
    const Node& x = nodes_[n];
    ++t.nodes;
    t.kv += x.end - x.start;
    if (x.kv_lock > 0) t.locked_kv += x.end - x.start;
    if (std::string e = audit_span(n); !e.empty()) return e;
    if (std::string e = audit_index_entry(n); !e.empty()) return e;
    if (std::string e = audit_children(n); !e.empty()) return e;
    const bool has = x.checkpoint != UINT32_MAX;
    if (has) {
        const Checkpoint& c = cps_[x.checkpoint];
        if (c.node != n || c.refs == 0 || c.pos != x.end) return "checkpoint record";
        ++t.states;
        t.bytes += c.ref.bytes;
    }
    if (x.had_state && !has) ++t.tombstones;
    if (!pages_[n].empty() && pages_[n].size() != (x.end - x.start) / P) return "page count";
    return {};
}

std::string RadixCache::audit_span(NodeId n) const {
    const uint64_t P = cfg_.page_size;
    const Node& x = nodes_[n];
    if (x.parent == kNoNode || !nodes_[x.parent].alive) return "dead parent";
    const Node& p = nodes_[x.parent];
    if (x.start != p.end || x.start >= x.end) return "span does not continue its parent";
    if (x.start % P || x.end % P) return "span not page aligned";
    if (x.end > seq_of(n).size()) return "span beyond its sequence";
    if (x.parent != kRoot && common_prefix(seq_of(n), seq_of(x.parent), p.start, p.end) != p.end)
        return "its sequence disagrees with its parent's span";
    return {};
}

std::string RadixCache::audit_index_entry(NodeId n) const {
    const Node& x = nodes_[n];
    if (nodes_[x.parent].n_children >= 2) {  // below a fork: indexed under its first page
        if (x.fingerprint != page_fingerprint(seq_of(n), x.start, cfg_.page_size)) return "stale fingerprint";
        bool found = false;
        if (const uint32_t* head = children_.find(child_key(x.parent, x.fingerprint)))
            for (NodeId c = *head; c != kNoNode; c = nodes_[c].next_same_key) found |= c == n;
        if (!found) return "missing from the child index";
    } else if (x.next_same_key != kNoNode) {
        return "an only child chained in the child index";
    }
    return {};
}

std::string RadixCache::audit_children(NodeId n) const {
    const Node& x = nodes_[n];
    uint32_t kids = 0;
    uint64_t child_locks = 0;
    for (NodeId c = x.first_child; c != kNoNode; c = nodes_[c].next_sibling) {
        ++kids;
        child_locks += nodes_[c].kv_lock;
        if (nodes_[c].parent != n) return "child with another parent";
    }
    if (kids != x.n_children) return "child count";
    // A lease locks the whole path above what it holds.
    if (child_locks > x.kv_lock) return "children hold more locks than the node";
    if (x.state_lock > x.kv_lock) return "state locked without its KV path";
    return {};
}

// Children must differ in their first page (equal pages have equal fingerprints).
std::string RadixCache::audit_fork_pages() const {
    const uint64_t P = cfg_.page_size;
    for (NodeId n = 0; n < nodes_.size(); ++n) {
        if (!nodes_[n].alive || nodes_[n].n_children < 2) continue;
        std::vector<std::pair<uint64_t, NodeId>> fps;
        for (NodeId c = nodes_[n].first_child; c != kNoNode; c = nodes_[c].next_sibling)
            fps.push_back({nodes_[c].fingerprint, c});
        std::sort(fps.begin(), fps.end());
        for (size_t i = 0; i < fps.size(); ++i)
            for (size_t k = i + 1; k < fps.size() && fps[k].first == fps[i].first; ++k) {
                const uint64_t s0 = nodes_[n].end;
                if (common_prefix(seq_of(fps[i].second), seq_of(fps[k].second), s0, s0 + P) == s0 + P)
                    return "node " + std::to_string(n) + ": two children share a first page";
            }
    }
    return {};
}

std::string RadixCache::audit_totals(const AuditTotals& t) const {
    if (t.nodes != stats_.nodes)
        return "node count " + std::to_string(stats_.nodes) + " vs " + std::to_string(t.nodes);
    if (t.kv != stats_.kv_tokens) return "KV token count";
    if (t.locked_kv != stats_.locked_kv_tokens) return "locked KV token count";
    if (t.states != stats_.states || t.bytes != stats_.state_bytes) return "state count or bytes";
    if (t.tombstones != stats_.tombstones) return "tombstone count";
    return {};
}

// Every leaf has a live entry in the KV heap, and the heap is a heap.
std::string RadixCache::audit_kv_heap() const {
    if (!std::is_heap(kv_heap_.begin(), kv_heap_.end(), std::greater<>())) return "KV heap order";
    std::vector<NodeId> live_entries;
    for (const auto& e : kv_heap_)
        if (kv_entry_live(e)) live_entries.push_back(e.second);
    std::sort(live_entries.begin(), live_entries.end());
    for (NodeId n = 1; n < nodes_.size(); ++n)
        if (nodes_[n].alive && nodes_[n].n_children == 0 &&
            !std::binary_search(live_entries.begin(), live_entries.end(), n))
            return "node " + std::to_string(n) + ": a leaf without a KV heap entry";
    return {};
}

// The state list holds exactly the nodes with a state (`states` of them), in tick order.
std::string RadixCache::audit_state_list(uint64_t states) const {
    uint64_t listed = 0, last_tick = 0;
    for (NodeId n = state_head_, prev = kNoNode; n != kNoNode; prev = n, n = nodes_[n].s_next) {
        if (!nodes_[n].alive || nodes_[n].checkpoint == UINT32_MAX)
            return "state list holds a node without a state";
        if (nodes_[n].s_prev != prev) return "state list links";
        if (listed > 0 && nodes_[n].tick_state <= last_tick) return "state list out of tick order";
        last_tick = nodes_[n].tick_state;
        if (++listed > states) return "state list longer than the states";  // also ends a cycle
    }
    if (listed != states) return "state list size";
    return {};
}

// Live checkpoints (held by the tree or borrowed by a lease) against the running totals.
std::string RadixCache::audit_checkpoints() const {
    uint64_t live = 0, live_bytes = 0;
    for (size_t c = 0; c < cps_.size(); ++c) {
        if (cps_[c].refs == 0) continue;
        ++live;
        live_bytes += cps_[c].ref.bytes;
        if (cps_[c].node != kNoNode && nodes_[cps_[c].node].checkpoint != c)
            return "checkpoint points to a node that lost it";
    }
    if (live != stats_.live_checkpoints || live_bytes != stats_.live_state_bytes)
        return "live checkpoint count";
    return {};
}

// Each sequence slot is counted by exactly the nodes that run along it and is held while they do.
std::string RadixCache::audit_sequences() const {
    std::vector<uint32_t> users(seqs_.size(), 0);
    for (NodeId n = 1; n < nodes_.size(); ++n)
        if (nodes_[n].alive) ++users[nodes_[n].seq];
    for (size_t s = 0; s < seqs_.size(); ++s) {
        if (users[s] != seqs_[s].nodes) return "sequence slot " + std::to_string(s) + " reference count";
        if ((users[s] > 0) != bool(seqs_[s].seq)) return "sequence slot " + std::to_string(s) + " ownership";
    }
    return "";
}

}  // namespace k3
