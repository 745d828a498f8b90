// The page pool (core/memory): random operation sequences against a reference model for all three
// designs, physical non-overlap of every owned byte range, content surviving compaction, vLLM's
// block-size derivation against observed figures, and the unified pool's two-resource failure.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/base/rng.h"
#include "core/memory/hybrid_blocks.h"
#include "core/memory/pool.h"
#include "core/model/pool_model.h"

using namespace k3;

namespace {

PoolModel tiny_model() { return pool_model(*model_preset("tiny")); }

// Qwen3.5-4B: 32 layers (24 GDN + 8 attention), GDN geometry of Qwen3-Next, 4 KV heads of 256
// (reference/serving.md §1.2 and §7).
PoolModel qwen35_4b_model() {
    ModelConfig c = *model_preset("qwen3-next-80b");
    c.layers = hybrid_pattern(32, 4, false);
    c.kv_heads = 4;
    return pool_model(c);
}

PoolResult make_design(PoolDesign d, const PoolModel& m, uint64_t budget, uint32_t page_tokens, bool backing,
                       bool auto_compact = true) {
    PoolOptions o;
    o.backing = backing;
    switch (d) {
        case PoolDesign::static_split: return make_static_pool(m, {budget, page_tokens, 0.9, 0}, o);
        case PoolDesign::hybrid_pages: return make_hybrid_pool(m, {budget, 16, 16}, o);
        case PoolDesign::unified: return make_unified_pool(m, {budget, page_tokens, 0, auto_compact}, o);
    }
    return {};
}

// The reference: what each owner holds, and how much room the pool has in its own terms.
struct RefOwner {
    uint64_t tokens = 0;
    std::set<StateRef> states;
    bool empty() const { return tokens == 0 && states.empty(); }
};

struct Reference {
    const PagePool& pool;
    std::map<OwnerId, RefOwner> owners;
    uint64_t n_blocks = 0;  // vllm only
    uint32_t A = 1, G = 1;

    uint64_t pages_of(uint64_t tokens) const {
        const uint64_t pt = pool.layout().page_tokens;
        return (tokens + pt - 1) / pt;
    }
    uint64_t total_pages() const {
        uint64_t n = 0;
        for (const auto& [o, r] : owners) n += pages_of(r.tokens);
        return n;
    }
    uint64_t total_states() const {
        uint64_t n = 0;
        for (const auto& [o, r] : owners) n += r.states.size();
        return n;
    }
    uint64_t free_bytes() const {
        const PoolLayout& l = pool.layout();
        return l.budget_bytes - l.unusable_bytes - total_pages() * l.kv_page_bytes -
               total_states() * l.state_slot_bytes;
    }
    // Would `pages` more pages / one more state fit? Exact for static, vllm and the auto-compacting
    // unified pool (after compaction its free bytes are one gap).
    bool pages_fit(uint64_t pages) const {
        const PoolLayout& l = pool.layout();
        switch (l.design) {
            case PoolDesign::static_split: return total_pages() + pages <= l.max_kv_pages;
            case PoolDesign::hybrid_pages:
                return A * (total_pages() + pages) + G * total_states() <= n_blocks;
            case PoolDesign::unified: return pages * l.kv_page_bytes <= free_bytes();
        }
        return false;
    }
    bool state_fits() const {
        const PoolLayout& l = pool.layout();
        switch (l.design) {
            case PoolDesign::static_split: return total_states() < l.max_states;
            case PoolDesign::hybrid_pages: return A * total_pages() + G * (total_states() + 1) <= n_blocks;
            case PoolDesign::unified:
                return total_states() < l.max_states && l.state_slot_bytes <= free_bytes();
        }
        return false;
    }
};

// Every owned page and state slot, layer by layer, occupies its own bytes of the backing storage.
void check_no_overlap(PagePool& pool, const Reference& ref) {
    const PoolModel& m = pool.model();
    const uint64_t page_layer = pool.layout().page_tokens * m.kv_bytes_per_token_per_layer;
    std::vector<std::pair<const std::byte*, uint64_t>> ranges;
    for (const auto& [o, r] : ref.owners) {
        for (PageRef p : pool.kv_pages(o))
            for (int l = 0; l < m.attention_layers; ++l) ranges.push_back({pool.kv_data(p, l), page_layer});
        for (StateRef s : r.states)
            for (int l = 0; l < m.linear_layers; ++l)
                ranges.push_back({pool.state_data(s, l), m.state_bytes_per_layer});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 0; i < ranges.size(); ++i) {
        REQUIRE(ranges[i].first != nullptr);
        if (i) REQUIRE(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first);
    }
}

// A stamp per (handle, layer) written into the first bytes of each slice: it must survive every
// later operation (compaction moves the bytes, never the handle).
uint64_t stamp(uint64_t handle, int layer, bool state, uint64_t salt) {
    return mix64(handle * 1000003u + uint64_t(layer) * 7919u + (state ? 0x5151u : 0u) + salt);
}

void check_equal_to_reference(PagePool& pool, const Reference& ref) {
    const PoolLayout& l = pool.layout();
    const PoolModel& m = pool.model();
    uint64_t pages = 0, tokens = 0, states = 0;
    std::set<PageRef> all_pages;
    std::set<StateRef> all_states;
    std::vector<OwnerId> expect_owners;
    for (const auto& [o, r] : ref.owners) {
        if (!r.empty()) expect_owners.push_back(o);
        REQUIRE(pool.kv_tokens(o) == r.tokens);
        REQUIRE(pool.kv_pages(o).size() == ref.pages_of(r.tokens));
        for (PageRef p : pool.kv_pages(o)) {
            REQUIRE(all_pages.insert(p).second);  // no page owned twice
            REQUIRE(pool.page_owner(p) == o);
        }
        const auto ss = pool.states(o);
        REQUIRE(std::set<StateRef>(ss.begin(), ss.end()) == r.states);
        for (StateRef s : r.states) {
            REQUIRE(all_states.insert(s).second);
            REQUIRE(pool.state_owner(s) == o);
        }
        pages += ref.pages_of(r.tokens);
        tokens += r.tokens;
        states += r.states.size();
    }
    REQUIRE(pool.owners() == expect_owners);
    const PoolStats s = pool.stats();
    REQUIRE(s.kv_pages == pages);
    REQUIRE(s.kv_tokens == tokens);
    REQUIRE(s.states == states);
    REQUIRE(s.kv_bytes == pages * l.kv_page_data_bytes);
    REQUIRE(s.kv_filled_bytes == tokens * m.kv_bytes_per_token());
    REQUIRE(s.state_bytes == states * m.state_bytes());
    REQUIRE(s.padding_bytes == pages * l.kv_page_padding() + states * l.state_padding());
    REQUIRE(s.free_bytes == ref.free_bytes());
    REQUIRE(s.kv_bytes + s.state_bytes + s.padding_bytes + s.free_bytes + s.unusable_bytes == l.budget_bytes);
    const std::string a = pool.audit();
    INFO(a);
    REQUIRE(a.empty());
}

void run_random_sequence(PoolDesign design, uint64_t seed, int steps, bool backing, bool auto_compact) {
    CAPTURE(pool_design_id(design));
    CAPTURE(seed);
    CAPTURE(auto_compact);
    const PoolModel m = tiny_model();
    Rng rng(seed);
    const uint64_t budget = 3000000 + rng.below(3000000);
    const uint32_t page_tokens = 16 << rng.below(3);
    PoolResult made = make_design(design, m, budget, page_tokens, backing, auto_compact);
    REQUIRE(made.pool);
    PagePool& pool = *made.pool;
    Reference ref{pool, {}};
    if (design == PoolDesign::hybrid_pages) {
        HybridBlockPlan plan;
        REQUIRE(plan_hybrid_blocks(m, 16, 16, &plan).empty());
        ref.n_blocks = budget / plan.block_bytes;
        ref.A = uint32_t(plan.attention_groups);
        ref.G = uint32_t(plan.linear_groups);
    }
    const uint64_t pt = pool.layout().page_tokens;
    std::map<std::pair<uint64_t, int>, uint64_t> page_stamps, state_stamps;  // (handle, layer) -> stamp
    auto write_page = [&](PageRef p) {
        for (int l = 0; l < m.attention_layers; ++l) {
            const uint64_t v = stamp(p, l, false, rng.next());
            std::memcpy(pool.kv_data(p, l), &v, 8);
            page_stamps[{p, l}] = v;
        }
    };
    auto write_state = [&](StateRef s) {
        for (int l = 0; l < m.linear_layers; ++l) {
            const uint64_t v = stamp(s, l, true, rng.next());
            std::memcpy(pool.state_data(s, l), &v, 8);
            state_stamps[{s, l}] = v;
        }
    };
    auto verify_stamps = [&]() {
        for (const auto& [o, r] : ref.owners) {
            for (PageRef p : pool.kv_pages(o))
                for (int l = 0; l < m.attention_layers; ++l) {
                    uint64_t v;
                    std::memcpy(&v, pool.kv_data(p, l), 8);
                    REQUIRE(v == page_stamps.at({p, l}));
                }
            for (StateRef s : r.states)
                for (int l = 0; l < m.linear_layers; ++l) {
                    uint64_t v;
                    std::memcpy(&v, pool.state_data(s, l), 8);
                    REQUIRE(v == state_stamps.at({s, l}));
                }
        }
    };
    auto new_pages = [&](OwnerId o, uint64_t before_pages) {
        const auto pages = pool.kv_pages(o);
        for (size_t i = before_pages; i < pages.size(); ++i) write_page(pages[i]);
    };

    int failures = 0, successes = 0;
    for (int step = 0; step < steps; ++step) {
        CAPTURE(step);
        const OwnerId o = 1 + rng.below(10);
        RefOwner& r = ref.owners[o];
        const int op = int(rng.below(100));
        if (op < 35) {  // grow by up to three pages' worth of tokens
            const uint64_t want = r.tokens + 1 + rng.below(3 * pt);
            const uint64_t extra = ref.pages_of(want) - ref.pages_of(r.tokens);
            const bool fits = ref.pages_fit(extra);
            const uint64_t before = pool.kv_pages(o).size();
            AllocStatus st = pool.grow_kv(o, want);
            if (st != AllocStatus::ok && fits && !auto_compact && design == PoolDesign::unified) {
                REQUIRE(pool.compact() > 0);  // the room exists: only holes stood in the way
                st = pool.grow_kv(o, want);
            }
            REQUIRE((st == AllocStatus::ok) == fits);
            if (st == AllocStatus::ok) {
                r.tokens = want;
                if (backing) new_pages(o, before);
                ++successes;
            } else {
                REQUIRE(st == AllocStatus::no_kv_page);
                ++failures;
            }
        } else if (op < 45) {  // truncate (speculative rollback)
            const uint64_t keep = r.tokens ? rng.below(r.tokens + 1) : 0;
            REQUIRE(pool.truncate_kv(o, keep) == AllocStatus::ok);
            r.tokens = keep;
        } else if (op < 50) {
            REQUIRE(pool.free_kv(o) == AllocStatus::ok);
            r.tokens = 0;
        } else if (op < 68) {  // allocate a state
            const bool fits = ref.state_fits();
            StateRef s = kNoRef;
            AllocStatus st = pool.alloc_state(o, &s);
            if (st != AllocStatus::ok && fits && !auto_compact && design == PoolDesign::unified) {
                REQUIRE(st == AllocStatus::no_state_space);
                REQUIRE(pool.compact() > 0);
                st = pool.alloc_state(o, &s);
            }
            REQUIRE((st == AllocStatus::ok) == fits);
            if (st == AllocStatus::ok) {
                REQUIRE(r.states.insert(s).second);
                if (backing) write_state(s);
                ++successes;
            } else {
                ++failures;
            }
        } else if (op < 80) {  // free a state
            if (!r.states.empty()) {
                const StateRef s = *std::next(r.states.begin(), std::ptrdiff_t(rng.below(r.states.size())));
                REQUIRE(pool.free_state(s) == AllocStatus::ok);
                r.states.erase(s);
                REQUIRE(pool.free_state(s) == AllocStatus::bad_request);  // double free refused
            }
        } else if (op < 85) {  // donate a state (request -> cache entry)
            if (!r.states.empty()) {
                const OwnerId to = 1 + rng.below(10);
                const StateRef s = *r.states.begin();
                REQUIRE(pool.transfer_state(s, to) == AllocStatus::ok);
                r.states.erase(s);
                ref.owners[to].states.insert(s);
            }
        } else if (op < 90) {  // hand a page-aligned prefix of the KV to an owner without KV
            const OwnerId to = 1 + rng.below(10);
            const uint64_t n = r.tokens ? rng.below(r.tokens / pt + 1) * pt : 0;
            const AllocStatus st = pool.transfer_kv(o, to, n);
            if (to != o && ref.owners[to].tokens == 0) {
                REQUIRE(st == AllocStatus::ok);
                ref.owners[to].tokens = n;
                ref.owners[o].tokens -= n;
            } else {
                REQUIRE(st == AllocStatus::bad_request);
            }
        } else if (op < 95) {
            pool.release(o);
            ref.owners[o] = RefOwner{};
        } else if (op < 97) {
            pool.compact();
        } else {  // misuse changes nothing
            StateRef s = kNoRef;
            CHECK(pool.grow_kv(kNoOwner, 10) == AllocStatus::bad_request);
            CHECK(pool.alloc_state(kNoOwner, &s) == AllocStatus::bad_request);
            CHECK(pool.truncate_kv(o, r.tokens + 1) == AllocStatus::bad_request);
            CHECK(pool.free_state(kNoRef) == AllocStatus::bad_request);
            if (r.tokens > 1 && (r.tokens - 1) % pt)
                CHECK(pool.transfer_kv(o, 99, r.tokens - 1) == AllocStatus::bad_request);
        }
        for (auto it = ref.owners.begin(); it != ref.owners.end();)
            it = it->second.empty() ? ref.owners.erase(it) : std::next(it);
        check_equal_to_reference(pool, ref);
        if (backing && step % 8 == 0) {
            check_no_overlap(pool, ref);
            verify_stamps();
        }
    }
    // The sequence must have exercised both outcomes, or the predictions were never tested.
    CHECK(successes > steps / 10);
    CHECK(failures > 0);
    if (backing) verify_stamps();

    // Everything freed returns every byte.
    for (const auto& [o, r] : ref.owners) pool.release(o);
    ref.owners.clear();
    check_equal_to_reference(pool, ref);
    const PoolStats s = pool.stats();
    CHECK(s.free_bytes + s.unusable_bytes == s.budget_bytes);
    CHECK(s.kv_pages == 0);
    CHECK(s.states == 0);
    CHECK(pool.owners().empty());
    const auto map = pool.map();
    CHECK(map.front().kind == UnitKind::free);
    if (design == PoolDesign::unified) CHECK(map.size() == 1);  // one gap: no holes left behind
}

}  // namespace

TEST_CASE("memory pool: random operation sequences match a reference model (metadata mode)") {
    for (PoolDesign d : {PoolDesign::static_split, PoolDesign::hybrid_pages, PoolDesign::unified})
        for (uint64_t seed : {1u, 2u, 3u, 4u}) run_random_sequence(d, seed, 3000, false, true);
}

TEST_CASE("memory pool: random sequences with backing storage keep every byte in place") {
    for (PoolDesign d : {PoolDesign::static_split, PoolDesign::hybrid_pages, PoolDesign::unified})
        for (uint64_t seed : {11u, 12u}) run_random_sequence(d, seed, 1500, true, true);
}

TEST_CASE("memory pool: unified pool without automatic compaction") {
    for (uint64_t seed : {21u, 22u, 23u}) run_random_sequence(PoolDesign::unified, seed, 3000, true, false);
}

TEST_CASE("vLLM block size: derivation reproduces the observed figures") {
    HybridBlockPlan p;
    // Qwen3.5-4B: 2,146,304 B GDN state per layer, 4,096 B KV per token per layer -> 524 -> 528.
    const PoolModel q4 = qwen35_4b_model();
    CHECK(q4.state_bytes_per_layer == 2146304);
    CHECK(q4.kv_bytes_per_token_per_layer == 4096);
    REQUIRE(plan_hybrid_blocks(q4, 16, 16, &p).empty());
    CHECK(p.raw_tokens == 524);
    CHECK(p.block_tokens == 528);
    CHECK(p.state_padding_per_layer == 16384);
    CHECK(p.state_padding_pct(q4.state_bytes_per_layer) == doctest::Approx(0.763).epsilon(0.001));
    CHECK(p.group_size == 8);  // 24 GDN + 8 attention: groups of 8, 3 GDN groups
    CHECK(p.linear_groups == 3);
    CHECK(p.attention_groups == 1);
    CHECK(p.linear_padding_layers == 0);

    // Qwen3-Next-80B-A3B at TP1: 1048 -> 1056 (reference/serving.md §7).
    const PoolModel qn = pool_model(*model_preset("qwen3-next-80b"));
    REQUIRE(plan_hybrid_blocks(qn, 16, 16, &p).empty());
    CHECK(p.raw_tokens == 1048);
    CHECK(p.block_tokens == 1056);
    CHECK(p.group_size == 12);
    CHECK(p.linear_groups == 3);

    // Kimi-Linear: 2,170,880 B KDA state per layer over 1,152 B of MLA per token per layer.
    const PoolModel kl = pool_model(*model_preset("kimi-linear-48b"));
    REQUIRE(plan_hybrid_blocks(kl, 16, 16, &p).empty());
    CHECK(p.block_tokens == 1888);
    CHECK(uint64_t(p.block_tokens) * 1152 >= 2170880);      // the state fits a page
    CHECK(uint64_t(p.block_tokens - 16) * 1152 < 2170880);  // and the next smaller multiple would not
    CHECK(p.group_size == 7);                               // 20 KDA + 7 MLA
    CHECK(p.linear_groups == 3);
    CHECK(p.linear_padding_layers == 1);  // 21 slots for 20 layers
    CHECK(p.block_bytes == 7ull * 1888 * 1152);

    // The user's block size wins when it is larger; a kernel multiple of 1 gives the raw figure.
    REQUIRE(plan_hybrid_blocks(q4, 16, 1024, &p).empty());
    CHECK(p.block_tokens == 1024);
    REQUIRE(plan_hybrid_blocks(q4, 1, 1, &p).empty());
    CHECK(p.block_tokens == 524);
    CHECK(p.state_padding_per_layer == 0);
    // Near-balanced layer counts use the larger count (vLLM's 1.25 rule): 9 linear, 8 attention.
    PoolModel bal = q4;
    bal.linear_layers = 9;
    REQUIRE(plan_hybrid_blocks(bal, 16, 16, &p).empty());
    CHECK(p.group_size == 9);
    CHECK(p.attention_padding_layers == 1);
    bal.attention_layers = 0;
    CHECK_FALSE(plan_hybrid_blocks(bal, 16, 16, &p).empty());
}

TEST_CASE("vLLM pool: padding and the partial last block are counted") {
    const PoolModel m = qwen35_4b_model();
    PoolResult made = make_hybrid_pool(m, {1ull << 30, 16, 16});
    REQUIRE(made.pool);
    PagePool& pool = *made.pool;
    const PoolLayout& l = pool.layout();
    CHECK(l.page_tokens == 528);
    CHECK(l.state_slot_bytes == 3ull * 8 * 528 * 4096);
    CHECK(l.state_padding() == l.state_slot_bytes - 24ull * 2146304);
    StateRef s;
    REQUIRE(pool.alloc_state(7, &s) == AllocStatus::ok);
    REQUIRE(pool.grow_kv(7, 1) == AllocStatus::ok);
    const PoolStats st = pool.stats();
    CHECK(st.padding_bytes == l.state_padding());  // 24 state pages padded by 16,384 B each
    CHECK(st.padding_bytes == 24ull * 16384);
    CHECK(st.kv_unfilled_bytes() == 527ull * 8 * 4096);  // one token in a 528-token block
    CHECK(pool.audit().empty());
}

TEST_CASE("static pool: the split follows mamba_full_memory_ratio and strands free memory") {
    const PoolModel m = tiny_model();
    const uint64_t S = m.state_bytes(), budget = 40 * S;
    PoolResult made = make_static_pool(m, {budget, 16, 0.9, 0});
    REQUIRE(made.pool);
    PagePool& pool = *made.pool;
    CHECK(pool.layout().max_states == uint64_t(double(budget) * 0.9 / 1.9) / S);  // 18: 47 % of the budget
    for (uint64_t i = 0; i < pool.layout().max_states; ++i) {
        StateRef s;
        REQUIRE(pool.alloc_state(100 + i, &s) == AllocStatus::ok);
    }
    StateRef s;
    CHECK(pool.alloc_state(1, &s) == AllocStatus::no_state_id);
    const PoolStats st = pool.stats();
    CHECK(st.free_bytes > 10 * S);        // over half the budget is free KV pages...
    CHECK(st.free_for_state_bytes == 0);  // ...that no state can use
    CHECK(st.fragmentation() == 1.0);
    CHECK(pool.audit().empty());
}

TEST_CASE("unified pool: two-resource failure, fixed by evicting KV and compacting") {
    const PoolModel m = tiny_model();
    const uint64_t pt = 16, E = pt * m.kv_bytes_per_token(), S = m.state_bytes();
    // Room for 2 states and 30 pages exactly.
    const uint64_t budget = 2 * S + 30 * E;
    PoolResult made = make_unified_pool(m, {budget, uint32_t(pt), 0, false}, {true});
    REQUIRE(made.pool);
    PagePool& pool = *made.pool;
    StateRef s0;
    REQUIRE(pool.alloc_state(1, &s0) == AllocStatus::ok);
    // KV takes every remaining byte: requests 2, 3, 4 in that order, bottom up; request 3 alone
    // holds more than a state's worth.
    const uint64_t rest_pages = (budget - S) / E, p2 = 10, p3 = S / E + 3, p4 = rest_pages - p2 - p3;
    REQUIRE(p4 > 0);
    REQUIRE(pool.grow_kv(2, p2 * pt) == AllocStatus::ok);
    REQUIRE(pool.grow_kv(3, p3 * pt) == AllocStatus::ok);
    REQUIRE(pool.grow_kv(4, p4 * pt) == AllocStatus::ok);
    std::memset(pool.kv_data(pool.kv_pages(4)[0], 0), 0x5a, 64);
    StateRef s;
    CHECK(pool.stats().free_bytes < S);
    CHECK(pool.alloc_state(5, &s) == AllocStatus::no_state_space);  // an id is free, the bytes are not

    // Evict request 3's KV: enough free bytes, but as a hole between 2 and 4, not next to the gap.
    pool.release(3);
    PoolStats st = pool.stats();
    CHECK(st.free_bytes >= S);
    CHECK(st.free_for_state_bytes == 0);
    CHECK(st.fragmentation() == 1.0);
    CHECK(pool.alloc_state(5, &s) == AllocStatus::no_state_space);  // "Can not alloc mamba cache"

    // Compaction moves request 4's pages into the hole; its handles stay, its bytes follow.
    const PageRef ref4 = pool.kv_pages(4)[0];
    const std::byte* before = pool.kv_data(ref4, 0);
    const uint64_t moved = pool.compact();
    CHECK(moved > 0);
    CHECK(moved == p4 * E);  // each of request 4's pages moved once
    CHECK(pool.kv_pages(4)[0] == ref4);
    CHECK(pool.kv_data(ref4, 0) != before);
    CHECK(uint8_t(pool.kv_data(ref4, 0)[63]) == 0x5a);
    st = pool.stats();
    CHECK(st.free_for_state_bytes >= S);
    REQUIRE(pool.alloc_state(5, &s) == AllocStatus::ok);
    CHECK(pool.audit().empty());
    CHECK(pool.compactions() == 1);

    // The same story with automatic compaction: one call succeeds once the KV is evicted.
    PoolResult auto_made = make_unified_pool(m, {budget, uint32_t(pt), 0, true});
    PagePool& q = *auto_made.pool;
    REQUIRE(q.alloc_state(1, &s0) == AllocStatus::ok);
    REQUIRE(q.grow_kv(2, p2 * pt) == AllocStatus::ok);
    REQUIRE(q.grow_kv(3, p3 * pt) == AllocStatus::ok);
    REQUIRE(q.grow_kv(4, p4 * pt) == AllocStatus::ok);
    CHECK(q.alloc_state(5, &s) == AllocStatus::no_state_space);  // compaction alone cannot help
    CHECK(q.compactions() == 0);
    q.release(3);
    CHECK(q.alloc_state(5, &s) == AllocStatus::ok);
    CHECK(q.compactions() == 1);
    CHECK(q.audit().empty());

    // The other resource: state ids run out while bytes are free.
    PoolResult ids = make_unified_pool(m, {budget, uint32_t(pt), 2, true});
    REQUIRE(ids.pool->alloc_state(1, &s) == AllocStatus::ok);
    REQUIRE(ids.pool->alloc_state(1, &s) == AllocStatus::ok);
    CHECK(ids.pool->alloc_state(1, &s) == AllocStatus::no_state_id);
    CHECK(ids.pool->stats().free_bytes == budget - 2 * S);
    CHECK(ids.pool->stats().free_for_state_bytes == 0);
}

TEST_CASE("memory pool: storage pointers, copy-on-write and refusals") {
    const PoolModel m = tiny_model();
    PoolResult made = make_unified_pool(m, {1u << 22, 16, 0, true}, {true});
    REQUIRE(made.pool);
    PagePool& pool = *made.pool;
    StateRef a, b;
    REQUIRE(pool.alloc_state(1, &a) == AllocStatus::ok);
    REQUIRE(pool.alloc_state(2, &b) == AllocStatus::ok);
    for (int l = 0; l < m.linear_layers; ++l)
        std::memset(pool.state_data(a, l), l + 1, size_t(m.state_bytes_per_layer));
    REQUIRE(pool.copy_state(a, b) == AllocStatus::ok);
    for (int l = 0; l < m.linear_layers; ++l)
        CHECK(std::memcmp(pool.state_data(a, l), pool.state_data(b, l), size_t(m.state_bytes_per_layer)) ==
              0);
    CHECK(pool.state_data(a, m.linear_layers) == nullptr);
    CHECK(pool.state_data(999, 0) == nullptr);
    // Token t of a sequence lives in page t / page_tokens, row t % page_tokens.
    REQUIRE(pool.grow_kv(1, 40) == AllocStatus::ok);
    CHECK(pool.kv_token_data(1, 37, 1) ==
          pool.kv_data(pool.kv_pages(1)[2], 1) + 5 * m.kv_bytes_per_token_per_layer);
    CHECK(pool.kv_token_data(1, 40, 0) == nullptr);

    // Metadata pools have no storage; oversized backing and empty budgets are refused with a reason.
    PoolResult meta = make_static_pool(m, {1u << 22, 16, 0.9, 0});
    REQUIRE(meta.pool);
    CHECK_FALSE(meta.pool->has_storage());
    StateRef c;
    REQUIRE(meta.pool->alloc_state(1, &c) == AllocStatus::ok);
    CHECK(meta.pool->state_data(c, 0) == nullptr);
    PoolResult big = make_unified_pool(m, {kMaxBackingBytes + 1, 16, 0, true}, {true});
    CHECK_FALSE(big.pool);
    CHECK(big.error.find("exceeds") != std::string::npos);
    CHECK_FALSE(make_static_pool(m, {0, 16, 0.9, 0}).pool);
    CHECK_FALSE(make_static_pool(m, {1000, 16, 0.9, 0}).pool);
}
