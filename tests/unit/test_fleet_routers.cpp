// The deployed routers (core/fleet/router_views.h, router.h): SGLang cache_aware's approximate trees,
// the KV-event-fed view with its delay, Dynamo's cost router, on small hand-made cases.
#include <doctest/doctest.h>

#include <vector>

#include "core/fleet/router.h"
#include "core/fleet/router_views.h"

using namespace k3;

namespace {

TokenSeqPtr seq(uint32_t first, uint32_t n, uint32_t shared_with = 0, uint32_t shared = 0) {
    std::vector<Token> t;
    for (uint32_t i = 0; i < shared; ++i) t.push_back(Token(shared_with + i));
    for (uint32_t i = shared; i < n; ++i) t.push_back(Token(first + i));
    return TokenSeq::literal(t);
}

Request request(TokenSeqPtr t) {
    Request r;
    r.prompt_len = uint32_t(t->size());
    r.tokens = std::move(t);
    return r;
}

struct View : RouterView {
    std::vector<double> loads, active;
    std::vector<Match> truth;
    double now = 0;
    uint32_t instances() const override { return uint32_t(loads.size()); }
    bool eligible(uint32_t) const override { return true; }
    double load(uint32_t i) const override { return loads[i]; }
    Match match(uint32_t i, const Request&, uint64_t) const override { return truth[i]; }
    double now_ms() const override { return now; }
    double active_blocks(uint32_t i, uint32_t) const override { return active[i]; }
};

}  // namespace

TEST_CASE("cache_aware: approximate trees learn prompts when routed, never the engine's evictions") {
    RouterConfig c;
    c.kind = RouterKind::cache_aware;
    Router router(c, 2, 1);
    View v;
    v.loads = {0, 0};
    v.truth.resize(2);  // the engines hold nothing: the oracle would see no match anywhere
    const Request a = request(seq(1000, 100));
    CHECK(router.choose(a, 100, v).instance == 0);  // no match: least loaded, ties to the lower index
    v.loads = {1, 0};
    // 80 of 100 tokens shared with a: the tree of worker 0 has them although its engine caches nothing.
    const Request b = request(seq(5000, 100, 1000, 80));
    const RouteDecision d = router.choose(b, 100, v);
    CHECK(d.instance == 0);
    CHECK(d.reason == RouteReason::affinity);
    // Imbalanced: least loaded, and that worker's tree learns the prompt too.
    v.loads = {200, 0};
    CHECK(router.choose(request(seq(9000, 100, 1000, 100)), 100, v).reason == RouteReason::balance);
    v.loads = {0, 0};
    CHECK(router.choose(request(seq(7000, 100, 1000, 90)), 100, v).instance == 0);  // 90 on both: load tie
    CHECK(router.audit().approx.empty());
    CHECK(router.audit().approx_tokens == 100 + 20 + 100 + 10);
}

TEST_CASE("cache_aware: LRU pruning to max_tree_tokens every interval, and its audit") {
    ApproxTrees t(1, 150, 1000);
    t.insert(0, seq(0, 100), 100);
    t.insert(0, seq(500, 100), 100);
    t.prune_due(999);
    CHECK(t.tree_tokens(0) == 200);
    t.prune_due(1000);
    CHECK(t.prune_cycles() == 1);
    CHECK(t.tree_tokens(0) <= 150);
    CHECK(t.pruned_tokens(0) == 200 - t.tree_tokens(0));
    CHECK(t.match(0, *seq(500, 100), 100) == 100);  // the older prompt went first
    CHECK(t.audit().empty());
    ApproxTrees bad(2, 1000, 0);
    bad.misroute_next_insert();
    bad.insert(0, seq(0, 64), 64);
    CHECK_FALSE(bad.audit().empty());
}

TEST_CASE("KV-event view: applied exactly the delay late, blocks removed when one token goes") {
    BlockHashMemo memo(16);
    KvEventView e(memo, 1000);
    const TokenSeqPtr q = seq(0, 70);
    const std::vector<uint64_t> h = block_hash_chain(*q, 70, 16);
    CHECK(h.size() == 4);
    const auto m = memo.of(*q, 70);
    CHECK(std::vector<uint64_t>(m.begin(), m.end()) == h);  // the memo gives the same chain
    e.stored(*q, 64, 0);
    e.advance(999);
    CHECK(e.match(h) == 0);  // not yet: younger than the delay
    e.advance(1000);
    CHECK(e.match(h) == 64);
    e.removed(*q, 40, 64, 2000);  // blocks [32, 48) and [48, 64) lose tokens
    e.advance(2500);
    CHECK(e.match(h) == 64);
    e.advance(3000);
    CHECK(e.match(h) == 32);
    CHECK(e.min_slack_ms() >= 0);
    // A different prefix shares no chained hash even where its own tokens agree.
    const TokenSeqPtr other = seq(0, 70, 99, 16);
    CHECK(e.match(block_hash_chain(*other, 70, 16)) == 0);
    KvEventView early(memo, 1000);
    early.ignore_delay();
    early.stored(*q, 64, 0);
    CHECK(early.match(h) == 64);
    CHECK(early.min_slack_ms() < 0);
}

TEST_CASE("kv_cost: Dynamo's cost, overlap weight against decode blocks, recounted") {
    RouterConfig c;
    c.kind = RouterKind::kv_cost;
    View v;
    v.loads = {0, 0};
    v.truth.resize(2);
    v.active = {10, 0};
    const Request r = request(seq(0, 100));
    Router router(c, 2, 3);
    router.kv_stored(0, *r.tokens, 64, 0);  // instance 0 caches 4 blocks of the prompt
    // cost0 = 1 x (100 - 64) / 16 + 10 + 6 = 18.25, cost1 = 100 / 16 + 0 + 6 = 12.25
    CHECK(router.choose(r, 100, v).instance == 1);
    CHECK(router.cost_decisions()[0].cost == std::vector<double>{18.25, 12.25});
    c.overlap_weight = 5;  // cost0 = 11.25 + 16 = 27.25, cost1 = 31.25 + 6 = 37.25
    Router heavy(c, 2, 3);
    heavy.kv_stored(0, *r.tokens, 64, 0);
    CHECK(heavy.choose(r, 100, v).instance == 0);
    CHECK(heavy.recount_costs().empty());
    heavy.corrupt(Router::Corrupt::cost_not_minimum);
    heavy.choose(r, 100, v);
    CHECK_FALSE(heavy.recount_costs().empty());
    // Temperature > 0 samples: both instances get requests, seeded.
    c.overlap_weight = 1;
    c.temperature = 1;
    Router soft(c, 2, 3);
    int n1 = 0;
    for (int i = 0; i < 200; ++i) n1 += soft.choose(r, 100, v).instance == 1;
    CHECK(n1 > 100);
    CHECK(n1 < 200);
    CHECK(soft.recount_costs().empty());
}
