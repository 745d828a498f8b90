// Pause, resume and migrate a request of the runnable model (core/lifecycle/migrate.h): for every
// strategy, a request paused, serialised, restored in a second Model instance (same config and seed,
// another pool) and continued gives the bits of the run that never stopped: tokens and logits, greedy
// and sampled. Also within one instance; and the resume-side faults (checkpoint position and model).
#include <doctest/doctest.h>

#include "core/base/bytes.h"
#include "core/lifecycle/migrate.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::lifecycle;
using model::Model;

namespace {

// A second instance of the tiny model: same config and seed, its own weights and scratch.
Model& tiny_b() {
    static std::unique_ptr<Model> m = [] {
        model::ModelResult r = Model::create(*model_preset("tiny"), 1);
        REQUIRE_MESSAGE(r.model, r.error);
        return std::move(r.model);
    }();
    return *m;
}

std::unique_ptr<PagePool> pool_for(const Model& m, int sequences = 3) {
    PoolResult p = model::make_model_pool(m, sequences, 512, 16);
    REQUIRE_MESSAGE(p.pool, p.error);
    return std::move(p.pool);
}

constexpr int kPrompt = 150, kBefore = 9, kAfter = 7;

// Start, generate kBefore tokens; the request is then paused (or goes on, for the reference). With
// ckpt64 the prompt is prefilled in two calls (the bits of one) with a checkpoint at 64 tokens; with
// ckpt_decode a checkpoint is taken 3 decode steps before the end.
Request started(Model& m, PagePool& pool, OwnerId owner, float temperature, StateCheckpoint* ckpt64,
                StateCheckpoint* ckpt_decode) {
    const std::vector<int32_t> prompt = model::test::random_tokens(kPrompt, 31, m.vocab());
    model::Sampler smp;
    smp.temperature = temperature;
    smp.rng = Rng(77);
    Request r;
    const uint64_t cut = 64;
    std::vector<StateCheckpoint> cps;
    const std::string e =
        start_request(m, pool, owner, prompt, smp, &r, nullptr,
                      ckpt64 ? std::span<const uint64_t>(&cut, 1) : std::span<const uint64_t>(), &cps);
    REQUIRE_MESSAGE(e.empty(), e);
    if (ckpt64) *ckpt64 = cps.at(0);
    for (int i = 0; i < kBefore; ++i) {
        if (ckpt_decode && i == kBefore - 3) *ckpt_decode = take_checkpoint(m, *r.seq);
        REQUIRE(step_request(m, r).empty());
    }
    return r;
}

// n more tokens of r (continue_for), requiring that they were produced.
Trace continued(Model& m, Request& r, int n) {
    Trace t;
    const std::string e = continue_for(m, r, n, &t);
    REQUIRE_MESSAGE(e.empty(), e);
    return t;
}

}  // namespace

TEST_CASE("lifecycle: a migrated continuation has the bits of the uninterrupted run") {
    Model& a = model::test::tiny();
    Model& b = tiny_b();
    REQUIRE(a.fingerprint() == b.fingerprint());
    for (float temperature : {0.0f, 0.9f}) {
        CAPTURE(temperature);
        auto pa = pool_for(a), pb = pool_for(b);
        // The uninterrupted run.
        Request ref = started(a, *pa, 1, temperature, nullptr, nullptr);
        const Trace want = continued(a, ref, kAfter);
        ref = Request{};
        // Checkpoints the destination is assumed to hold: in the prompt at 64 tokens, and 3 decode steps
        // back.
        StateCheckpoint c64, cdec;
        Request src = started(a, *pa, 2, temperature, &c64, &cdec);
        CHECK(c64.position == 64);
        CHECK(cdec.position == kPrompt + kBefore - 3);
        struct Case {
            MigrationStrategy s;
            const StateCheckpoint* ckpt;
            uint64_t recomputed;
        } cases[] = {{MigrationStrategy::move_all, nullptr, 0},
                     {MigrationStrategy::move_kv, &c64, kPrompt + kBefore - 64},
                     {MigrationStrategy::move_kv, &cdec, 3},
                     {MigrationStrategy::recompute, nullptr, kPrompt + kBefore}};
        OwnerId owner = 10;
        for (const Case& c : cases) {
            CAPTURE(strategy_id(c.s));
            CAPTURE(c.recomputed);
            const RequestState st = capture(a, src, c.s, c.ckpt ? c.ckpt->position : 0);
            std::vector<std::byte> blob;
            REQUIRE(write_blob(st, &blob).empty());
            const MigrationCosts cost = migration_costs_measured(
                a.config(), {double(src.consumed()), double(src.consumed() - st.position)}, 1e9, 1e3);
            CHECK(double(blob.size()) == cost[c.s].bytes);  // the cost model counts the writer's bytes
            RequestState in;
            const BlobStatus rs = read_blob(blob, expect_for(b, src.consumed()), &in);
            REQUIRE_MESSAGE(rs.ok(), rs.message);
            Request dst;
            ResumeInfo info;
            const BlobStatus s = resume(b, *pb, owner++, in, c.ckpt, &dst, &info);
            REQUIRE_MESSAGE(s.ok(), s.message);
            CHECK(info.recomputed_tokens == c.recomputed);
            CHECK(info.exact_path);
            CHECK(info.used_checkpoint == (c.ckpt != nullptr));
            CHECK(dst.consumed() == src.consumed());
            // The restored sequence is byte for byte the source's.
            CHECK(model::same_contents(b.save(*dst.seq), a.save(*src.seq)));
            CHECK(identical(continued(b, dst, kAfter), want));
        }
    }
}

TEST_CASE("lifecycle: pause and resume within one instance") {
    Model& m = model::test::tiny();
    auto pool = pool_for(m, 2);
    Request ref = started(m, *pool, 1, 0.0f, nullptr, nullptr);
    const Trace want = continued(m, ref, kAfter);
    ref = Request{};
    Request r = started(m, *pool, 2, 0.0f, nullptr, nullptr);
    const uint64_t at = r.consumed();
    std::vector<std::byte> blob;
    REQUIRE(write_blob(capture(m, r, MigrationStrategy::move_all), &blob).empty());
    r = Request{};  // the pause frees the slot and pages
    CHECK(pool->stats().states == 0);
    RequestState in;
    REQUIRE(read_blob(blob, expect_for(m, at), &in).ok());
    Request back;
    REQUIRE(resume(m, *pool, 3, in, nullptr, &back).ok());
    CHECK(identical(continued(m, back, kAfter), want));
}

TEST_CASE("lifecycle: resume refuses a checkpoint at the wrong position or from another model") {
    Model& m = model::test::tiny();
    auto pool = pool_for(m, 3);
    StateCheckpoint c64, cdec;
    Request r = started(m, *pool, 1, 0.0f, &c64, &cdec);
    const RequestState st = capture(m, r, MigrationStrategy::move_kv, 64);
    Request out;
    CHECK(resume(m, *pool, 5, st, &cdec, &out).code == BlobError::position_mismatch);
    CHECK(resume(m, *pool, 5, st, nullptr, &out).code == BlobError::position_mismatch);
    StateCheckpoint other = c64;
    other.model_hash ^= 1;
    CHECK(resume(m, *pool, 5, st, &other, &out).code == BlobError::model_mismatch);
    RequestState wrong = st;
    wrong.model_hash ^= 1;
    CHECK(resume(m, *pool, 5, wrong, &c64, &out).code == BlobError::model_mismatch);
    CHECK(pool->stats().states == 1);  // nothing was allocated by the refused resumes
    CHECK(resume(m, *pool, 5, st, &c64, &out).ok());
}

TEST_CASE("lifecycle: checkpoint cuts keep the bits of one prefill and are validated") {
    Model& m = model::test::tiny();
    auto pool = pool_for(m, 3);
    StateCheckpoint c64;
    Request plain = started(m, *pool, 1, 0.5f, nullptr, nullptr);
    Request cut = started(m, *pool, 2, 0.5f, &c64, nullptr);
    CHECK(model::same_contents(m.save(*plain.seq), m.save(*cut.seq)));
    CHECK(plain.tokens == cut.tokens);
    CHECK(c64.model_hash == m.fingerprint());
    CHECK(c64.state.size() == m.pool_model().state_bytes());
    const std::vector<int32_t> prompt = model::test::random_tokens(100, 3, m.vocab());
    std::vector<StateCheckpoint> cps;
    Request r;
    const uint64_t off_grid = 50, inside[] = {64}, beyond = 128;
    CHECK(
        start_request(m, *pool, 3, prompt, {}, &r, nullptr, std::span(&off_grid, 1), &cps).find("multiple") !=
        std::string::npos);
    CHECK(start_request(m, *pool, 3, prompt, {}, &r, nullptr, std::span(&beyond, 1), &cps).find("inside") !=
          std::string::npos);
    CHECK(start_request(m, *pool, 3, prompt, {}, &r, nullptr, inside, nullptr).find("somewhere") !=
          std::string::npos);
    CHECK(start_request(m, *pool, 3, {}, {}, &r).find("empty") != std::string::npos);
    CHECK(pool->stats().states == 2);  // the refused starts allocated nothing
    CHECK(step_request(m, r).find("no sequence") != std::string::npos);
}

TEST_CASE("lifecycle: the blob and the continuation have the same bits natively and in WebAssembly") {
    // Digests recorded from a native build; the WebAssembly build runs the same test.
    Model& m = model::test::tiny();
    auto pool = pool_for(m, 2);
    Request r = started(m, *pool, 1, 0.9f, nullptr, nullptr);
    std::vector<std::byte> blob;
    REQUIRE(write_blob(capture(m, r, MigrationStrategy::move_all), &blob).empty());
    const uint64_t crc = load_le(blob.data() + blob.size() - 4, 4);
    const Trace t = continued(m, r, kAfter);
    model::test::Digest d;
    d.add_all(t.tokens);
    for (const auto& lg : t.logits) d.add_all(lg);
    CHECK(blob.size() == 653092);
    CHECK(crc == 1595016887u);
    CHECK(d.h == 17194597183104985729ull);
}
