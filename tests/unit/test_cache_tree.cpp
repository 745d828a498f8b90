// The radix cache against a brute-force model, plus its LRU, lock, tombstone, copy-on-write and
// real-state hook behaviour.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/base/rng.h"
#include "core/cache/radix_cache.h"
#include "core/cache/request_flow.h"
#include "core/cache/tree_view.h"

using namespace k3;

namespace {

using Toks = std::vector<Token>;

// The brute-force model: the set of cached page-aligned prefixes and the set of prefixes with a
// state. The tree's observer keeps it in step with evictions.
struct Model : CacheObserver {
    uint32_t P = 1;
    std::set<Toks> kv, st;
    std::map<uint64_t, int> freed;  // state handle -> times freed
    uint64_t kv_removed_tokens = 0;

    void kv_removed(const TokenSeq& s, uint64_t start, uint64_t end, std::span<const uint32_t>) override {
        for (uint64_t l = start + P; l <= end; l += P) CHECK(kv.erase(s.to_vector(0, l)) == 1);
        kv_removed_tokens += end - start;
    }
    void state_removed(const TokenSeq& s, uint64_t pos) override {
        CHECK(st.erase(s.to_vector(0, pos)) == 1);
    }
    void state_freed(const CheckpointRef& r) override { ++freed[r.handle]; }

    void insert(const Toks& t, uint64_t len, const std::vector<uint64_t>& cps) {
        len = std::min<uint64_t>(len, t.size()) / P * P;
        for (uint64_t l = P; l <= len; l += P) kv.insert(Toks(t.begin(), t.begin() + ptrdiff_t(l)));
        for (uint64_t c : cps)
            if (c > 0 && c <= len && c % P == 0) st.insert(Toks(t.begin(), t.begin() + ptrdiff_t(c)));
    }
    Match match(const Toks& q) const {
        Match m;
        for (uint64_t l = P; l <= q.size(); l += P) {
            const Toks pre(q.begin(), q.begin() + ptrdiff_t(l));
            if (!kv.count(pre)) break;
            m.kv_len = l;
            if (st.count(pre)) m.state_len = l;
        }
        return m;
    }
};

Toks random_tokens(Rng& rng, size_t n, uint32_t vocab) {
    Toks t(n);
    for (auto& x : t) x = Token(rng.below(vocab));
    return t;
}

}  // namespace

TEST_CASE("radix cache: random insert / lookup / evict against a brute-force model") {
    uint64_t total_dropped = 0, total_tombstones = 0;
    for (uint32_t P : {1u, 2u, 4u}) {
        for (LruRefresh refresh : {LruRefresh::node, LruRefresh::path}) {
            CAPTURE(P);
            CAPTURE(int(refresh));
            Rng rng(1000 + P * 10 + uint32_t(refresh));
            Model model;
            model.P = P;
            uint64_t next_handle = 1;
            // Coverage of the interesting cases (so the comparison is not vacuous).
            uint64_t gaps = 0, deep_states = 0, max_tombstones = 0;
            CacheStats last;
            {
                RadixCache cache({P, 0, 0, refresh}, &model);
                std::vector<Toks> inserted;
                std::vector<std::pair<Lease, Toks>> leases;
                auto query = [&]() -> Toks {
                    // Mostly variations of what was inserted: prefixes, extensions, one changed token.
                    if (inserted.empty() || rng.bernoulli(0.2))
                        return random_tokens(rng, 1 + rng.below(12 + 12 * P), 3);
                    Toks q = inserted[rng.below(inserted.size())];
                    q.resize(std::min<size_t>(q.size(), 1 + rng.below(q.size() + 4)));
                    if (rng.bernoulli(0.4)) {
                        const Toks more = random_tokens(rng, rng.below(4 + 4 * P), 3);
                        q.insert(q.end(), more.begin(), more.end());
                    }
                    if (!q.empty() && rng.bernoulli(0.3)) q[rng.below(q.size())] = Token(rng.below(3));
                    return q;
                };
                for (int op = 0; op < 600; ++op) {
                    const uint64_t kind = rng.below(100);
                    if (kind < 40) {
                        const Toks t = query();
                        const uint64_t len = rng.below(t.size() + 1);
                        std::vector<NewCheckpoint> cps;
                        std::vector<uint64_t> pos;
                        for (int k = int(rng.below(4)); k > 0; --k) {
                            // Mostly page aligned, sometimes not (the tree must reject those).
                            const uint64_t p = rng.bernoulli(0.8) ? rng.below(t.size() / P + 2) * P
                                                                  : rng.below(t.size() + 2);
                            cps.push_back({p, CheckpointRef{next_handle++, 100}, CheckpointKind::interval});
                            pos.push_back(p);
                        }
                        // Remove duplicate positions from the model's view: the tree keeps the first.
                        cache.insert(TokenSeq::literal(t), len, cps);
                        model.insert(t, len, pos);
                        inserted.push_back(t);
                    } else if (kind < 60) {
                        const Toks q = query();
                        leases.push_back({cache.acquire(*TokenSeq::literal(q), q.size()), q});
                    } else if (kind < 72 && !leases.empty()) {
                        const size_t i = rng.below(leases.size());
                        cache.release(leases[i].first);
                        leases.erase(leases.begin() + ptrdiff_t(i));
                    } else if (kind < 80) {
                        cache.evict_states(1 + rng.below(3));
                    } else if (kind < 88) {
                        cache.evict_kv(1 + rng.below(16));
                    } else if (kind < 94) {
                        cache.set_capacity(rng.below(6), rng.below(64));
                        cache.enforce_capacity();
                        cache.set_capacity(0, 0);
                    } else if (!inserted.empty()) {
                        const Toks& t = inserted[rng.below(inserted.size())];
                        const auto ps = cache.path_states(*TokenSeq::literal(t), t.size());
                        if (!ps.empty()) {
                            const auto& s = ps[rng.below(ps.size())];
                            const bool dropped = cache.drop_state(s.node);
                            CHECK(dropped == !s.locked);
                        }
                    }
                    const std::string bad = cache.audit();
                    REQUIRE_MESSAGE(bad.empty(), "op " << op << ": " << bad);
                    CHECK(cache.stats().kv_tokens == model.kv.size() * P);
                    CHECK(cache.stats().states == model.st.size());
                    for (const Toks& s : model.st) CHECK(model.kv.count(s) == 1);  // a state needs its KV
                    for (int k = 0; k < 4; ++k) {
                        const Toks q = query();
                        const Match a = cache.match(*TokenSeq::literal(q), q.size());
                        const Match b = model.match(q);
                        CHECK(a.kv_len == b.kv_len);
                        CHECK(a.state_len == b.state_len);
                        CHECK(a.state_len <= a.kv_len);
                        gaps += a.kv_len > a.state_len && a.state_len > 0;
                        deep_states += a.state_len > P;
                    }
                    max_tombstones = std::max(max_tombstones, cache.stats().tombstones);
                    // What a lease holds is never evicted.
                    for (const auto& [l, q] : leases) {
                        CHECK((l.match.kv_len == 0 ||
                               model.kv.count(Toks(q.begin(), q.begin() + ptrdiff_t(l.match.kv_len)))));
                        CHECK((l.match.state_len == 0 ||
                               model.st.count(Toks(q.begin(), q.begin() + ptrdiff_t(l.match.state_len)))));
                    }
                }
                CHECK(cache.stats().leases == leases.size());
                last = cache.stats();
                for (auto& [l, q] : leases) cache.release(l);
                CHECK(cache.stats().leases == 0);
                cache.clear();
                CHECK(cache.audit() == "");
                // Everything released: counts and memory back to zero.
                CHECK(cache.stats().nodes == 0);
                CHECK(cache.stats().kv_tokens == 0);
                CHECK(cache.stats().states == 0);
                CHECK(cache.stats().state_bytes == 0);
                CHECK(cache.stats().live_checkpoints == 0);
                CHECK(cache.stats().live_state_bytes == 0);
                CHECK(cache.stats().tombstones == 0);
                CHECK(model.kv.empty());
                CHECK(model.st.empty());
            }
            CHECK(gaps > 20);
            CHECK(deep_states > 10);
            CHECK(last.splits > 20);
            CHECK(last.states_evicted > 20);
            CHECK(last.kv_tokens_evicted > 100);
            total_dropped += last.states_dropped;
            total_tombstones += max_tombstones;
            // Every checkpoint handed to the tree was freed exactly once.
            CHECK(model.freed.size() == next_handle - 1);
            for (const auto& [h, n] : model.freed) CHECK(n == 1);
        }
    }
    CHECK(total_dropped > 3);
    CHECK(total_tombstones > 10);
}

namespace {
TokenSeqPtr seq_of(std::initializer_list<std::pair<uint64_t, uint32_t>> runs) {
    TokenSeq::Builder b;
    for (auto [key, len] : runs) b.stream(key, 0, len);
    return b.build();
}
NewCheckpoint cp(uint64_t pos, uint64_t handle = 0) {
    return {pos, CheckpointRef{handle, 1000}, CheckpointKind::interval};
}
}  // namespace

TEST_CASE("radix cache: KV-visible vs state-usable, tombstones, splits never copy a state") {
    RadixCache c({1, 0, 0, LruRefresh::node});
    const auto a = seq_of({{1, 512}, {2, 512}, {3, 300}});
    c.insert(a, a->size(), {cp(512), cp(1024)});
    CHECK(c.stats().states == 2);
    const auto q = seq_of({{1, 512}, {2, 512}, {3, 100}, {9, 50}});
    Match m = c.match(*q, q->size());
    CHECK(m.kv_len == 1124);
    CHECK(m.state_len == 1024);
    // A sibling diverging inside block 2 splits the node that ends at 1024: its state stays put.
    const auto b = seq_of({{1, 512}, {2, 200}, {7, 400}});
    const auto before = c.stats();
    c.insert(b, b->size(), {});
    CHECK(c.stats().splits == before.splits + 1);
    CHECK(c.stats().states == 2);
    CHECK(c.stats().live_checkpoints == 2);
    m = c.match(*a, a->size());
    CHECK(m.kv_len == 1324);
    CHECK(m.state_len == 1024);
    // Evicting the LRU state: the one at 512 (older), an interior node -> a tombstone, KV stays.
    CHECK(c.evict_states(1) == 1);
    CHECK(c.stats().tombstones == 1);
    m = c.match(*b, b->size());
    CHECK(m.kv_len == 1112);
    CHECK(m.state_len == 0);
    CHECK(c.audit() == "");
}

TEST_CASE("radix cache: node-only refresh keeps the consumed state, whole-path refresh keeps the path") {
    // Two sessions share a 512-token prefix with a state; each has a deep state at 2048.
    for (LruRefresh r : {LruRefresh::node, LruRefresh::path}) {
        RadixCache c({1, 0, 0, r});
        const auto s1 = seq_of({{1, 512}, {10, 1536}});
        const auto s2 = seq_of({{1, 512}, {20, 1536}});
        c.insert(s1, s1->size(), {cp(512), cp(2048)});
        c.insert(s2, s2->size(), {cp(2048)});
        // Session 1 comes back and resumes from its deep state.
        Lease l = c.acquire(*s1, s1->size());
        CHECK(l.match.state_len == 2048);
        c.release(l);
        // One state must go. Node refresh touched only s1's deep state: the shared shallow state
        // (oldest) goes. Path refresh touched the shallow one too: s2's deep state goes.
        c.evict_states(1);
        const Match m1 = c.match(*s1, s1->size()), m2 = c.match(*s2, s2->size());
        if (r == LruRefresh::node) {
            CHECK(m1.state_len == 2048);
            CHECK(m2.state_len == 2048);
            CHECK(c.match(*seq_of({{1, 512}, {30, 10}}), 522).state_len == 0);
        } else {
            CHECK(m1.state_len == 2048);
            CHECK(m2.state_len == 512);  // s2's leaf went with its KV; the shared state remains
            CHECK(m2.kv_len == 512);
        }
        CHECK(c.audit() == "");
    }
}

TEST_CASE("radix cache: leases hold KV and state; capacity eviction skips them") {
    RadixCache c({1, 1, 0, LruRefresh::node});
    const auto a = seq_of({{1, 1000}});
    const auto b = seq_of({{2, 1000}});
    c.insert(a, 1000, {cp(1000)});
    Lease la = c.acquire(*a, 1000);
    CHECK(la.match.state_len == 1000);
    c.insert(b, 1000, {cp(1000)});
    c.enforce_capacity();  // two states, capacity one: a's is leased, so b's goes (with its leaf)
    CHECK(c.stats().states == 1);
    CHECK(c.match(*a, 1000).state_len == 1000);
    CHECK(c.match(*b, 1000).kv_len == 0);
    CHECK(c.evict_kv(UINT64_MAX) == 0);  // a's KV is leased
    c.release(la);
    CHECK(c.evict_kv(UINT64_MAX) == 1000);
    CHECK(c.stats().nodes == 0);
    CHECK(c.stats().live_checkpoints == 0);
}

namespace {
// A stand-in for the runnable model's stores: state buffers by handle, KV pages by id.
struct FakeStore : CacheObserver {
    std::map<uint64_t, std::vector<float>> states;
    std::set<uint32_t> pages_in_tree;
    int freed_twice = 0;
    uint64_t page_size = 1;
    void kv_removed(const TokenSeq&, uint64_t start, uint64_t end, std::span<const uint32_t> pages) override {
        CHECK(pages.size() * page_size == end - start);
        for (uint32_t p : pages) CHECK(pages_in_tree.erase(p) == 1);
    }
    void state_freed(const CheckpointRef& r) override {
        if (states.erase(r.handle) != 1) ++freed_twice;
    }
};
}  // namespace

TEST_CASE("radix cache: real-state hook (handles, pages, copy-on-write)") {
    FakeStore store;
    {
        RadixCache c({1, 0, 0, LruRefresh::node}, &store);
        const auto a = seq_of({{1, 64}});
        std::vector<uint32_t> pages(64);
        for (uint32_t i = 0; i < 64; ++i) pages[i] = 100 + i;
        store.states[7] = {1.0f, 2.0f};
        store.pages_in_tree.insert(pages.begin(), pages.end());
        auto r = c.insert(a, 64, {{64, CheckpointRef{7, 8}, CheckpointKind::end}}, pages);
        CHECK(r.new_tokens == 64);
        // A second request resumes from handle 7 and inserts a redundant state at 64: the tree
        // keeps its own (never mutated), the new one is freed at once.
        Lease l = c.acquire(*a, 64);
        CHECK(l.state.handle == 7);
        CHECK(c.kv_pages(l) == pages);
        store.states[8] = {1.0f, 2.0f};
        r = c.insert(a, 64, {{64, CheckpointRef{8, 8}, CheckpointKind::end}}, pages);
        CHECK(r.states_redundant == 1);
        CHECK(r.existing_len == 64);
        CHECK(store.states.count(8) == 0);
        CHECK(store.states.count(7) == 1);
        // Evicting the state while the lease borrows it: refused (locked); after release it goes.
        CHECK(c.evict_states(1) == 0);
        c.release(l);
        CHECK(c.evict_states(1) == 1);
        CHECK(store.states.empty());
        CHECK(store.pages_in_tree.empty());  // the leaf went with its state
        // Splits split the page lists.
        store.pages_in_tree.insert(pages.begin(), pages.end());
        c.insert(a, 64, {}, pages);
        const auto b = seq_of({{1, 32}, {5, 32}});
        c.insert(b, 32, {});
        Lease lb = c.acquire(*b, 64);
        CHECK(lb.match.kv_len == 32);
        CHECK(c.kv_pages(lb) == std::vector<uint32_t>(pages.begin(), pages.begin() + 32));
        c.release(lb);
    }
    CHECK(store.pages_in_tree.empty());  // the destructor handed every page back
    CHECK(store.freed_twice == 0);
}

TEST_CASE("token sequences: stream tokens compare by identity, literal tokens by value") {
    // Each position's identity as the test builds it: (stream, key, index) or (literal, 0, value).
    using Id = std::tuple<bool, uint64_t, uint64_t>;
    Rng rng(5);
    for (int it = 0; it < 200; ++it) {
        // Two sequences out of shared stream runs, literal copies of them (equal values, not the same
        // tokens), literal tokens both share, and other streams.
        TokenSeq::Builder ba, bb;
        std::vector<Id> ia, ib;
        auto stream = [](TokenSeq::Builder& b, std::vector<Id>& ids, uint64_t key, uint64_t off,
                         uint32_t len) {
            b.stream(key, off, len);
            for (uint32_t i = 0; i < len; ++i) ids.push_back({true, key, off + i});
        };
        auto literal = [](TokenSeq::Builder& b, std::vector<Id>& ids, const std::vector<Token>& t) {
            b.tokens(t);
            for (Token v : t) ids.push_back({false, 0, v});
        };
        for (int k = 0; k < 6; ++k) {
            const uint64_t key = rng.below(3);
            const uint64_t off = rng.below(4) * 8;
            const uint32_t len = 1 + uint32_t(rng.below(20));
            std::vector<Token> copy(len);
            for (uint32_t i = 0; i < len; ++i) copy[i] = pseudo_token(key, off + i);
            const uint64_t choice = rng.below(4);
            if (choice == 3) {
                literal(ba, ia, copy);
                literal(bb, ib, copy);
                continue;
            }
            stream(ba, ia, key, off, len);
            if (choice == 0)
                stream(bb, ib, key, off, len);
            else if (choice == 1)
                literal(bb, ib, copy);
            else
                stream(bb, ib, key + 1, off, len);
        }
        const auto a = ba.build(), b = bb.build();
        const uint64_t n = std::min(a->size(), b->size());
        uint64_t expect = 0;
        while (expect < n && ia[expect] == ib[expect]) ++expect;
        CHECK(common_prefix(*a, *b, 0, n) == expect);
        const uint64_t from = rng.below(n + 1);
        uint64_t e2 = from;
        while (e2 < n && ia[e2] == ib[e2]) ++e2;
        CHECK(common_prefix(*a, *b, from, n) == e2);
        for (uint64_t i = 0; i < n; ++i) CHECK((a->id_at(i) == b->id_at(i)) == (ia[i] == ib[i]));
        const auto va = a->to_vector();
        for (uint64_t i = 0; i < a->size(); i += 7) {
            CHECK(a->at(i) == va[i]);
            const auto [is_stream, key, index] = ia[i];
            CHECK(va[i] == (is_stream ? pseudo_token(key, index) : Token(index)));
        }
    }
    // A continued run is merged into one piece.
    const auto s = TokenSeq::Builder().stream(9, 0, 10).stream(9, 10, 5).build();
    CHECK(s->pieces().size() == 1);
    CHECK(s->size() == 15);
}

TEST_CASE("tree view: single-child chains merge, checkpoints become markers, heaviest subtrees first") {
    RadixCache c({1, 0, 0, LruRefresh::node});
    const auto a = seq_of({{1, 512}, {2, 512}, {3, 512}});
    const auto b = seq_of({{1, 512}, {4, 100}});
    const auto d = seq_of({{9, 50}});
    c.insert(a, a->size(), {cp(512), cp(1024), cp(1536)});
    c.insert(b, b->size(), {cp(612)});
    c.insert(d, d->size(), {});
    // Evict the shallow state: a tombstone inside a merged span.
    const auto ps = c.path_states(*a, a->size());
    REQUIRE(ps.size() == 3);
    CHECK(c.drop_state(ps[0].node));
    const CompressedTree t = compress_tree(c.nodes(), 100);
    // root, [0,512) (fork), [512,1536) chain of two nodes, [512,612), [0,50)
    REQUIRE(t.nodes.size() == 5);
    CHECK(t.total == 5);
    CHECK(t.nodes[0].parent == -1);
    CHECK(t.nodes[0].subtree_tokens == 1536 + 100 + 50);
    CHECK(t.nodes[1].start == 0);
    CHECK(t.nodes[1].end == 512);
    CHECK(t.nodes[1].tombstones == 1);
    CHECK(t.nodes[1].checkpoints.empty());
    CHECK(t.nodes[1].children == 2);
    CHECK(t.nodes[2].start == 512);
    CHECK(t.nodes[2].end == 1536);
    CHECK(t.nodes[2].merged == 2);
    CHECK(t.nodes[2].checkpoints == std::vector<uint64_t>{1024, 1536});
    CHECK(t.nodes[2].parent == 1);
    // A cut keeps parents before children and the heaviest subtrees.
    const CompressedTree cut = compress_tree(c.nodes(), 3);
    REQUIRE(cut.nodes.size() == 3);
    CHECK(cut.total == 5);
    CHECK(cut.nodes[1].end == 512);
    CHECK(cut.nodes[2].end == 1536);
}

TEST_CASE("request flow in real-state mode: the model's states and pages go into the tree") {
    FakeStore store;
    store.page_size = 16;
    {
        RadixCache c({16, 2, 0, LruRefresh::node}, &store);
        CheckpointPolicy p;
        p.kind = PolicyKind::interval_end;
        p.interval = 64;
        const auto q = seq_of({{3, 200}});
        Admission a = admit_request(c, p, *q, 200, 200);
        CHECK(a.cache_len == 192);    // whole pages only
        REQUIRE(a.plan.size() == 3);  // 64, 128, 192 (the end coincides with the last)
        std::vector<CheckpointRef> states;
        for (size_t i = 0; i < a.plan.size(); ++i) {
            store.states[100 + i] = {float(i)};
            states.push_back({100 + i, 4});
        }
        std::vector<uint32_t> pages(12);
        for (uint32_t i = 0; i < 12; ++i) pages[i] = 500 + i;
        store.pages_in_tree.insert(pages.begin(), pages.end());
        const Completion done = complete_request(c, p, a, q, states, pages);
        CHECK(done.insert.states_added == 3);
        // Capacity 2: the oldest state (at 64) was evicted and freed through the observer.
        CHECK(c.stats().states == 2);
        CHECK(store.states.count(100) == 0);
        CHECK(store.states.count(102) == 1);
        Lease l = c.acquire(*q, 200);
        CHECK(l.state.handle == 102);
        CHECK(c.kv_pages(l) == pages);
        c.release(l);
    }
    CHECK(store.states.empty());
    CHECK(store.pages_in_tree.empty());
    CHECK(store.freed_twice == 0);
}
