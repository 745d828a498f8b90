// Copy-on-write forks on the runnable model (core/cache/forks.h): each fork equals running it alone,
// the state is copied once per writing fork but the last, only partly filled pages are copied, and
// every reference and pool byte comes back.
#include <doctest/doctest.h>

#include "core/cache/forks.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::serve;
using namespace k3::model;
using namespace k3::model::test;

namespace {

std::unique_ptr<PagePool> fork_pool(Model& m, uint64_t forks, uint64_t tokens, uint32_t page = 16) {
    PoolResult p = make_model_pool(m, int(forks + 1), tokens + page, page);
    REQUIRE_MESSAGE(p.pool, p.error);
    return std::move(p.pool);
}

std::vector<ForkSpec> specs(int n, int gen, float temperature, int branch, int vocab) {
    std::vector<ForkSpec> v;
    for (int i = 0; i < n; ++i) {
        ForkSpec s;
        s.gen = gen;
        s.temperature = temperature;
        s.seed = 100 + uint64_t(i);
        if (branch > 0) s.branch = random_tokens(branch, 200 + uint64_t(i), vocab);
        v.push_back(s);
    }
    return v;
}

}  // namespace

TEST_CASE("cow: parallel sampling, eager and copy-on-write forks equal each fork alone") {
    Model& m = tiny();
    const auto prompt = random_tokens(40, 1, m.vocab());  // 2 full pages and 8 tokens
    const auto sp = specs(3, 4, 0.9f, 0, m.vocab());
    ForkRun run[2];
    for (int k = 0; k < 2; ++k) {
        auto pool = fork_pool(m, 3, 64);
        run[k] = run_forks(m, *pool, k == 0 ? ForkMode::eager : ForkMode::cow, prompt, sp);
        REQUIRE_MESSAGE(run[k].error.empty(), run[k].error);
        CHECK_MESSAGE(run[k].released, run[k].release_detail);
        CHECK(pool->stats().kv_pages == 0);
        CHECK(pool->stats().states == 0);
    }
    bool differ = false;
    for (size_t i = 0; i < sp.size(); ++i) {
        auto pool = fork_pool(m, 1, 64);
        std::string err;
        const ForkOutput alone = run_alone(m, *pool, prompt, sp[i], &err);
        REQUIRE(err.empty());
        CHECK(same_output(run[0].outputs[i], alone));
        CHECK(same_output(run[1].outputs[i], alone));
        differ = differ || alone.tokens != run[0].outputs[0].tokens;
    }
    CHECK(differ);  // the samplers' seeds do make the forks differ
    const ForkStats& e = run[0].stats;
    const ForkStats& c = run[1].stats;
    CHECK(e.state_copies == 2);  // the parent goes on as fork 0
    CHECK(e.kv_pages_copied == 2 * 3);
    CHECK(e.kv_bytes_copied == 2 * 40 * m.pool_model().kv_bytes_per_token());
    // Every fork writes: the first two copy the state and the partly filled page, the last takes the
    // parent's slot and writes the page in place.
    CHECK(c.state_copies == 2);
    CHECK(c.states_taken == 1);
    CHECK(c.kv_pages_copied == 2);
    CHECK(c.kv_bytes_copied == 2 * 8 * m.pool_model().kv_bytes_per_token());
    CHECK(c.peak_bytes < e.peak_bytes);
    CHECK(c.peak_states == e.peak_states);  // copy-on-write only defers the state copies
    CHECK(c.peak_kv_pages < e.peak_kv_pages);
}

TEST_CASE("cow: branching forks (each prefills its own suffix) equal each fork alone") {
    Model& m = tiny();
    const auto prompt = random_tokens(70, 2, m.vocab());
    const auto sp = specs(3, 3, 0.0f, 20, m.vocab());
    for (ForkMode mode : {ForkMode::eager, ForkMode::cow}) {
        CAPTURE(fork_mode_id(mode));
        auto pool = fork_pool(m, 3, 128);
        const ForkRun r = run_forks(m, *pool, mode, prompt, sp);
        REQUIRE_MESSAGE(r.error.empty(), r.error);
        CHECK_MESSAGE(r.released, r.release_detail);
        for (size_t i = 0; i < sp.size(); ++i) {
            auto p1 = fork_pool(m, 1, 128);
            std::string err;
            CHECK(same_output(r.outputs[i], run_alone(m, *p1, prompt, sp[i], &err)));
            CHECK(err.empty());
        }
    }
}

TEST_CASE("cow: forks that never write copy nothing; a page-aligned prompt needs no page copy") {
    Model& m = tiny();
    {
        const auto prompt = random_tokens(40, 3, m.vocab());
        auto pool = fork_pool(m, 4, 64);
        const ForkRun r = run_forks(m, *pool, ForkMode::cow, prompt, specs(4, 1, 0.7f, 0, m.vocab()));
        REQUIRE(r.error.empty());
        CHECK(r.stats.state_copies == 0);
        CHECK(r.stats.states_taken == 0);
        CHECK(r.stats.kv_pages_copied == 0);
        CHECK(r.stats.peak_states == 1);
        CHECK_MESSAGE(r.released, r.release_detail);
    }
    {
        const auto prompt = random_tokens(48, 4, m.vocab());
        auto pool = fork_pool(m, 3, 64);
        const ForkRun r = run_forks(m, *pool, ForkMode::cow, prompt, specs(3, 3, 0.7f, 0, m.vocab()));
        REQUIRE(r.error.empty());
        CHECK(r.stats.kv_pages_copied == 0);
        CHECK(r.stats.state_copies == 2);
        CHECK_MESSAGE(r.released, r.release_detail);
    }
}

TEST_CASE("cow: bad input is refused before anything is allocated") {
    Model& m = tiny();
    auto pool = fork_pool(m, 2, 32);
    CHECK_FALSE(run_forks(m, *pool, ForkMode::cow, {}, specs(2, 2, 0, 0, m.vocab())).error.empty());
    CHECK_FALSE(run_forks(m, *pool, ForkMode::cow, {1, 2}, {}).error.empty());
    CHECK_FALSE(run_forks(m, *pool, ForkMode::cow, {1, 2}, specs(2, 0, 0, 0, m.vocab())).error.empty());
    CHECK(pool->owners().empty());
    // Too small a pool: the error names the fork, and nothing is left behind.
    auto small = fork_pool(m, 0, 16);
    const ForkRun r =
        run_forks(m, *small, ForkMode::eager, random_tokens(10, 5, m.vocab()), specs(3, 2, 0, 0, m.vocab()));
    CHECK(r.error.find("fork") != std::string::npos);
    CHECK(small->stats().states == 0);
    CHECK(small->stats().kv_pages == 0);
}
