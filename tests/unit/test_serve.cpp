// The real-state prefix cache (core/cache/prefix_server.h): the runnable model behind the radix tree.
// Exactness of a resume from an aligned checkpoint, and the outcome's judgement of it; KV-only reuse
// detected as wrong, off-grid resumes within tolerance, page lending and copy-on-write, reference
// counts and pool bytes back to zero, and the checkpoint codecs on real states.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/cache/kv_pages.h"
#include "core/cache/prefix_server.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::serve;
using namespace k3::model;
using namespace k3::model::test;

namespace {

std::unique_ptr<PagePool> serve_pool(Model& m, uint64_t states, uint64_t pages, uint32_t page_tokens = 16) {
    StaticSplitConfig c;
    c.page_tokens = page_tokens;
    c.state_slots = states;
    c.budget_bytes =
        states * m.pool_model().state_bytes() + pages * page_tokens * m.pool_model().kv_bytes_per_token();
    PoolResult p = make_static_pool(m.pool_model(), c, PoolOptions{true});
    REQUIRE_MESSAGE(p.pool, p.error);
    return std::move(p.pool);
}

ServerConfig config(Reuse reuse, PolicyKind kind, uint32_t interval = 64, uint32_t page = 16) {
    ServerConfig c;
    c.reuse = reuse;
    c.cache.page_size = page;
    c.policy.kind = kind;
    c.policy.interval = interval;
    c.policy.chunk = 64;
    return c;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

// The cold run of a request: its own pool, no cache.
ServeOutcome cold(Model& m, const ServeRequest& r) {
    auto pool = serve_pool(m, 2, 64);
    PrefixServer s(m, *pool, config(Reuse::none, PolicyKind::interval));
    ServeOutcome o = s.serve(r);
    REQUIRE_MESSAGE(o.error.empty(), o.error);
    return o;
}

}  // namespace

TEST_CASE("serve: a continuation from a chunk-aligned checkpoint is bitwise the cold run") {
    Model& m = tiny();
    const auto sys = random_tokens(150, 11, m.vocab());
    ServeRequest a{concat(sys, random_tokens(30, 12, m.vocab())), {}, 4};
    ServeRequest b{concat(sys, random_tokens(41, 13, m.vocab())), {}, 5};
    const ServeOutcome ca = cold(m, a), cb = cold(m, b);
    a.outputs = ca.outputs;
    b.outputs = cb.outputs;

    auto pool = serve_pool(m, 16, 128);
    {
        PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::interval, 64));
        REQUIRE(PrefixServer::check_config(m, *pool, s.config()).empty());
        const ServeOutcome oa = s.serve(a);
        REQUIRE_MESSAGE(oa.error.empty(), oa.error);
        CHECK(oa.resumed_at == 0);
        CHECK(oa.checkpoints == std::vector<uint64_t>{64, 128});
        CHECK(bitwise_equal(oa.logits, ca.logits));  // splitting at 64 and 128 keeps the bits
        CHECK(oa.exactness == ResumeExactness::bitwise);
        const ServeOutcome ob = s.serve(b);
        REQUIRE_MESSAGE(ob.error.empty(), ob.error);
        CHECK(ob.kv_hit == 144);  // the shared 150 tokens, floored to whole pages
        CHECK(ob.state_hit == 128);
        CHECK(ob.resumed_at == 128);
        CHECK(ob.recomputed == b.prompt.size() - 128);
        CHECK(ob.pages_borrowed == 8);
        CHECK(bitwise_equal(ob.logits, cb.logits));
        CHECK(ob.exactness == ResumeExactness::bitwise);
        CHECK(ob.outputs == cb.outputs);
        CHECK(s.audit() == "");
        // The tree holds a's pages once; b added only its own part.
        CHECK(s.pages().live_pages() == s.cache().stats().kv_tokens / 16);
    }
    // Everything back: no page, no slot, no owner.
    CHECK(pool->stats().kv_pages == 0);
    CHECK(pool->stats().states == 0);
    CHECK(pool->owners().empty());
    CHECK(pool->audit() == "");
}

TEST_CASE("serve: KV-only reuse of a hybrid is detected as wrong") {
    Model& m = tiny();
    const auto sys = random_tokens(130, 21, m.vocab());
    ServeRequest a{concat(sys, random_tokens(20, 22, m.vocab())), {}, 3};
    ServeRequest b{concat(sys, random_tokens(25, 23, m.vocab())), {}, 6};
    a.outputs = cold(m, a).outputs;
    const ServeOutcome cb = cold(m, b);
    b.outputs = cb.outputs;
    for (KvOnlyStart start : {KvOnlyStart::zero, KvOnlyStart::stale}) {
        CAPTURE(int(start));
        auto pool = serve_pool(m, 4, 64);
        ServerConfig c = config(Reuse::kv_only, PolicyKind::interval);
        c.kv_only_start = start;
        PrefixServer s(m, *pool, c);
        REQUIRE(s.serve(a).error.empty());
        const ServeOutcome ob = s.serve(b);
        REQUIRE_MESSAGE(ob.error.empty(), ob.error);
        CHECK(ob.resumed_at == 128);  // the KV match, no state there
        CHECK(ob.state_hit == 0);
        CHECK_FALSE(ob.state_matches);
        CHECK(ob.exactness == ResumeExactness::state_of_other_position);
        const double d = max_abs_diff(ob.logits, cb.logits);
        MESSAGE("KV-only reuse: max |logit diff| " << d);
        CHECK(d > 1e-2);  // far beyond any rounding difference
        CHECK(s.audit() == "");
    }
}

TEST_CASE("serve: a resume off the chunk grid is exact only within tolerance") {
    Model& m = tiny();
    const auto sys = random_tokens(120, 31, m.vocab());
    ServeRequest a{concat(sys, random_tokens(10, 32, m.vocab())), {}, 3};
    ServeRequest b{concat(sys, random_tokens(12, 33, m.vocab())), {}, 3};
    a.outputs = cold(m, a).outputs;
    const ServeOutcome cb = cold(m, b);
    b.outputs = cb.outputs;
    auto pool = serve_pool(m, 8, 64);
    ServerConfig c = config(Reuse::state, PolicyKind::interval, 48);  // page multiple, not a chunk multiple
    PrefixServer s(m, *pool, c);
    const ServeOutcome oa = s.serve(a);
    REQUIRE(oa.error.empty());
    CHECK(oa.split_off_grid);  // its own prefill was split at 48
    CHECK(oa.exactness == ResumeExactness::split_off_grid);
    const ServeOutcome ob = s.serve(b);
    REQUIRE(ob.error.empty());
    CHECK(ob.resumed_at == 96);
    CHECK(ob.exactness == ResumeExactness::off_chunk_grid);
    const double d = max_abs_diff(ob.logits, cb.logits);
    double scale = 0;
    for (float x : cb.logits) scale = std::max(scale, std::fabs(double(x)));
    MESSAGE("off-grid resume at 96 (chunk 64): max |logit diff| " << d << " of logits up to " << scale);
    CHECK_FALSE(bitwise_equal(ob.logits, cb.logits));
    CHECK(d < 1e-4 * scale);
    CHECK(ob.outputs == cb.outputs);
}

TEST_CASE("serve: multi-turn resumes past the previous turn's end (decoded tokens, within tolerance)") {
    Model& m = tiny();
    ServeRequest t1{random_tokens(70, 41, m.vocab()), {}, 12};
    const ServeOutcome c1 = cold(m, t1);
    t1.outputs = c1.outputs;
    ServeRequest t2{concat(concat(t1.prompt, t1.outputs), random_tokens(20, 42, m.vocab())), {}, 4};
    const ServeOutcome c2 = cold(m, t2);
    t2.outputs = c2.outputs;
    auto pool = serve_pool(m, 8, 64);
    PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::end));
    const ServeOutcome o1 = s.serve(t1);
    REQUIRE(o1.error.empty());
    CHECK(o1.checkpoints == std::vector<uint64_t>{80});  // fed 81 tokens, cached 80: taken in decode
    CHECK(bitwise_equal(o1.logits, c1.logits));
    const ServeOutcome o2 = s.serve(t2);
    REQUIRE(o2.error.empty());
    CHECK(o2.resumed_at == 80);
    const double d = max_abs_diff(o2.logits, c2.logits);
    MESSAGE("resume past decoded tokens: max |logit diff| " << d);
    CHECK(d < 1e-3);
    CHECK(o2.outputs == c2.outputs);
    CHECK(s.audit() == "");
}

TEST_CASE("serve: a request-end state inside the prompt is taken on the chunk grid below it") {
    Model& m = tiny();
    const auto sys = random_tokens(140, 81, m.vocab());
    ServeRequest a{concat(sys, random_tokens(10, 82, m.vocab())), {}, 2};  // 150 + 1 fed, 144 cached
    ServeRequest b{concat(sys, random_tokens(9, 83, m.vocab())), {}, 2};
    const ServeOutcome ca = cold(m, a), cb = cold(m, b);
    a.outputs = ca.outputs;
    b.outputs = cb.outputs;
    auto pool = serve_pool(m, 8, 64);
    PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::end));
    const ServeOutcome oa = s.serve(a);
    REQUIRE(oa.error.empty());
    CHECK(oa.ends_aligned == 1);
    CHECK(oa.checkpoints ==
          std::vector<uint64_t>{128});  // not 144: that would split the prefill off the grid
    CHECK_FALSE(oa.split_off_grid);
    CHECK(bitwise_equal(oa.logits, ca.logits));
    const ServeOutcome ob = s.serve(b);
    REQUIRE(ob.error.empty());
    CHECK(ob.resumed_at == 128);
    CHECK(bitwise_equal(ob.logits, cb.logits));
    CHECK(s.audit() == "");
}

TEST_CASE("serve: the outcome says when a resume must be bitwise, and why not") {
    Model& m = tiny();
    const auto doc = random_tokens(70, 91, m.vocab());
    const ServeRequest a{concat(doc, random_tokens(10, 92, m.vocab())), {}, 2};
    const ServeRequest b{concat(doc, random_tokens(9, 93, m.vocab())), {}, 2};
    {  // A lossy codec: the checkpoint at 64 is on the grid but not fp32.
        auto pool = serve_pool(m, 4, 32);
        ServerConfig c = config(Reuse::state, PolicyKind::interval, 64);
        c.codec = StateCodec::bf16;
        PrefixServer s(m, *pool, c);
        const ServeOutcome oa = s.serve(a);
        REQUIRE(oa.error.empty());
        CHECK(oa.exactness == ResumeExactness::bitwise);  // nothing resumed
        const ServeOutcome ob = s.serve(b);
        REQUIRE(ob.error.empty());
        CHECK(ob.resumed_at == 64);
        CHECK(ob.exactness == ResumeExactness::lossy_checkpoint);
    }
    {  // Interval 32: a's prefill splits at 32, off the grid, so its checkpoint at 64 is not exact.
        auto pool = serve_pool(m, 4, 32);
        PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::interval, 32));
        const ServeOutcome oa = s.serve(a);
        REQUIRE(oa.error.empty());
        CHECK(oa.exactness == ResumeExactness::split_off_grid);
        const ServeOutcome ob = s.serve(b);
        REQUIRE(ob.error.empty());
        CHECK(ob.resumed_at == 64);
        CHECK(ob.exactness == ResumeExactness::inexact_checkpoint);
    }
    {  // An exact checkpoint over a page another request filled while decoding.
        auto pool = serve_pool(m, 4, 32);
        PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::interval, 64));
        const auto first = random_tokens(40, 94, m.vocab());
        const ServeOutcome t1 = s.serve(ServeRequest{first, {}, 12});
        REQUIRE(t1.error.empty());  // caches 48 tokens: the page [32, 48) holds decoded rows
        const auto turn = concat(concat(first, t1.outputs), random_tokens(28, 95, m.vocab()));
        const ServeOutcome t2 = s.serve(ServeRequest{turn, {}, 2});  // no state: computes all, saves 64
        REQUIRE(t2.error.empty());
        CHECK(t2.resumed_at == 0);
        CHECK(t2.exactness == ResumeExactness::bitwise);
        // The tree kept t1's page [32, 48), not t2's: a resume at 64 reads decoded rows.
        const ServeOutcome t3 = s.serve(
            ServeRequest{concat(std::vector<int32_t>(turn.begin(), turn.begin() + 70), {5, 6, 7}), {}, 2});
        REQUIRE(t3.error.empty());
        CHECK(t3.resumed_at == 64);
        CHECK(t3.exactness == ResumeExactness::inexact_pages);
        CHECK(s.audit() == "");
    }
}

TEST_CASE("serve: greedy generation caches its outputs; given outputs reproduce it") {
    Model& m = tiny();
    ServeRequest r{random_tokens(90, 51, m.vocab()), {}, 8};
    auto pool = serve_pool(m, 8, 64);
    PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::interval_end, 64));
    const ServeOutcome g = s.serve(r);
    REQUIRE(g.error.empty());
    CHECK(g.outputs.size() == 8);
    CHECK(g.cache_len == 96);  // 90 + 8 - 1 = 97 fed, floored to pages
    CHECK(g.checkpoints == std::vector<uint64_t>{64, 96});
    CHECK(s.cache().stats().kv_tokens == 96);
    // The same prompt again: resumes at 64 (the state at 96 lies past prompt - 1).
    ServeRequest again = r;
    again.outputs = g.outputs;
    const ServeOutcome h = s.serve(again);
    REQUIRE(h.error.empty());
    CHECK(h.resumed_at == 64);
    CHECK(bitwise_equal(h.logits, g.logits));
    CHECK(s.audit() == "");
}

TEST_CASE("serve: bad requests change nothing") {
    Model& m = tiny();
    auto pool = serve_pool(m, 16, 32);
    PrefixServer s(m, *pool, config(Reuse::state, PolicyKind::interval));
    CHECK_FALSE(s.serve(ServeRequest{{}, {}, 3}).error.empty());
    CHECK_FALSE(s.serve(ServeRequest{{1, 2, 3}, {}, 0}).error.empty());
    const ServeOutcome bad = s.serve(ServeRequest{{1, 2, m.vocab()}, {}, 2});
    CHECK(bad.error.find("token 2") != std::string::npos);
    // More than the pool holds: refused by the model after saving checkpoints at 64 ... 448; the
    // checkpoints and pages are released.
    const ServeOutcome big = s.serve(ServeRequest{random_tokens(600, 5, m.vocab()), {}, 2});
    CHECK_MESSAGE(big.error.find("prefill") != std::string::npos, big.error);
    CHECK(s.audit() == "");
    CHECK(pool->stats().kv_pages == 0);
    CHECK(pool->stats().states == 0);
    ServerConfig c = config(Reuse::state, PolicyKind::interval);
    c.cache.page_size = 32;
    CHECK(PrefixServer::check_config(m, *pool, c).find("page size") != std::string::npos);
}

TEST_CASE("serve: pages are lent, never owned twice; copy-on-write of a partly filled page") {
    Model& m = tiny();
    auto pool = serve_pool(m, 4, 32);
    KvPages pages(*pool);
    SequenceResult a = m.new_sequence(*pool, 1);
    REQUIRE(a.seq);
    std::vector<PageRef> ta;
    REQUIRE(pages.mount(1, ta).empty());
    const auto toks = random_tokens(40, 61, m.vocab());  // 2 full pages and 8 tokens
    REQUIRE(m.prefill(*a.seq, toks).empty());
    REQUIRE(pages.unmount(1, &ta).empty());
    REQUIRE(ta.size() == 3);
    CHECK(pool->kv_tokens(1) == 0);
    CHECK(pages.held_tokens(ta[2]) == 8);
    // A second sequence shares all three pages.
    std::vector<PageRef> tb = ta;
    pages.retain_all(tb);
    CHECK(pages.refs(ta[2]) == 2);
    SequenceResult b = m.new_sequence(*pool, 2);
    REQUIRE(b.seq);
    REQUIRE(pool->copy_state(a.seq->state(), b.seq->state()) == AllocStatus::ok);
    // Lent to one owner at a time.
    REQUIRE(pages.mount(2, tb).empty());
    CHECK(pages.mount(1, ta).find("lent") != std::string::npos);
    REQUIRE(m.adopt_kv(*b.seq).empty());
    CHECK(b.seq->position() == 40);
    REQUIRE(pages.unmount(2, &tb).empty());
    // b writes at 40: its shared partial page is copied first, the full ones stay shared.
    bool copied = false;
    REQUIRE(pages.make_writable(&tb, 40, &copied).empty());
    CHECK(copied);
    CHECK(tb[0] == ta[0]);
    CHECK(tb[2] != ta[2]);
    CHECK(pages.refs(ta[2]) == 1);
    CHECK(pages.copies().pages_copied == 1);
    CHECK(pages.copies().bytes_copied == 8 * m.pool_model().kv_bytes_per_token());
    // Both continue with the same token: the same bits, and a's page is untouched by b's write.
    const int32_t next = 7;
    std::vector<float> la, lb;
    REQUIRE(pages.mount(2, tb).empty());
    REQUIRE(m.decode(*b.seq, next, &lb).empty());
    REQUIRE(pages.unmount(2, &tb).empty());
    REQUIRE(pages.make_writable(&ta, 40, &copied).empty());
    CHECK_FALSE(copied);  // a's page is private again
    REQUIRE(pages.mount(1, ta).empty());
    REQUIRE(m.decode(*a.seq, next, &la).empty());
    REQUIRE(pages.unmount(1, &ta).empty());
    CHECK(bitwise_equal(la, lb));
    CHECK(pages.audit() == "");
    CHECK(pool->audit() == "");
    pages.release_all(ta);
    pages.release_all(tb);
    CHECK(pages.live_pages() == 0);
    a.seq.reset();
    b.seq.reset();
    CHECK(pool->stats().kv_pages == 0);
    CHECK(pool->stats().states == 0);
}

TEST_CASE("serve: checkpoint codecs on real states: fp32 bitwise, the others within their bounds") {
    Model& m = tiny();
    auto pool = serve_pool(m, 4, 32);
    SequenceResult a = m.new_sequence(*pool, 1), b = m.new_sequence(*pool, 2);
    REQUIRE(a.seq);
    REQUIRE(b.seq);
    REQUIRE(m.prefill(*a.seq, random_tokens(100, 71, m.vocab())).empty());
    const std::vector<std::byte> want = m.save_state(*a.seq);
    const KdaDims& d = m.kda();
    for (const std::string& id : state_codec_ids()) {
        CAPTURE(id);
        const StateCodec codec = *parse_state_codec(id);
        CheckpointStore st(m, *pool, codec);
        CheckpointRef ref;
        REQUIRE(st.save(*a.seq, &ref).empty());
        CHECK(ref.bytes == st.checkpoint_bytes());
        CHECK(st.stats().bytes == ref.bytes);
        REQUIRE(st.load(ref.handle, *b.seq).empty());
        const std::vector<std::byte> got = m.save_state(*b.seq);
        if (codec == StateCodec::fp32) {
            CHECK(got == want);
            CHECK(ref.bytes == m.pool_model().state_bytes());
        } else {
            CHECK(ref.bytes < m.pool_model().state_bytes());
            // Each layer: S within the codec's stated bound per element, the windows exact.
            const size_t layer = size_t(m.pool_model().state_bytes_per_layer) / 4;
            const size_t rows = size_t(d.state_floats()) / size_t(m.config().head_v),
                         cols = size_t(m.config().head_v);
            const auto w = as_floats(want), g = as_floats(got);
            double worst = 0;
            for (int l = 0; l < m.pool_model().linear_layers; ++l)
                for (size_t r = 0; r < rows; ++r) {
                    const float* x = w.data() + size_t(l) * layer + r * cols;
                    const float* y = g.data() + size_t(l) * layer + r * cols;
                    double row_max = 0;
                    for (size_t i = 0; i < cols; ++i) row_max = std::max(row_max, std::fabs(double(x[i])));
                    for (size_t i = 0; i < cols; ++i) {
                        const double bound = codec_error_bound(codec, x[i], row_max);
                        const double e = std::fabs(double(y[i]) - double(x[i]));
                        worst = std::max(worst, bound > 0 ? e / bound : (e > 0 ? 1e9 : 0));
                    }
                }
            CHECK(worst <= 1.0);
            CHECK(worst > 0.0);  // a lossy codec does lose something on a real state
            for (int l = 0; l < m.pool_model().linear_layers; ++l)
                CHECK(std::memcmp(w.data() + size_t(l) * layer + rows * cols,
                                  g.data() + size_t(l) * layer + rows * cols,
                                  (layer - rows * cols) * 4) == 0);
        }
        CHECK(st.free(ref.handle));
        CHECK_FALSE(st.free(ref.handle));
        CHECK(st.stats().live == 0);
    }
    CHECK(pool->stats().states == 2);
}

TEST_CASE("pool: append_kv is the inverse of transfer_kv, one owner per page throughout") {
    Model& m = tiny();
    auto pool = serve_pool(m, 1, 8);
    REQUIRE(pool->grow_kv(1, 40) == AllocStatus::ok);  // 3 pages, the last with 8 tokens
    const std::vector<PageRef> all(pool->kv_pages(1).begin(), pool->kv_pages(1).end());
    REQUIRE(pool->transfer_kv(1, 2, 16) == AllocStatus::ok);  // owner 2: page 0; owner 1: pages 1, 2
    // Appending after a partly filled page would break "page i holds tokens [16 i, 16 i + 16)".
    CHECK(pool->append_kv(2, 1) == AllocStatus::bad_request);
    CHECK(pool->append_kv(1, 1) == AllocStatus::bad_request);
    CHECK(pool->append_kv(0, 1) == AllocStatus::bad_request);
    CHECK(pool->append_kv(3, 2) == AllocStatus::ok);  // nothing to move
    REQUIRE(pool->append_kv(1, 2) == AllocStatus::ok);
    CHECK(pool->kv_tokens(2) == 40);
    CHECK(pool->kv_tokens(1) == 0);
    CHECK(std::vector<PageRef>(pool->kv_pages(2).begin(), pool->kv_pages(2).end()) == all);
    for (PageRef p : all) CHECK(pool->page_owner(p) == 2);
    CHECK(pool->owners() == std::vector<OwnerId>{2});
    CHECK(pool->audit() == "");
    pool->release(2);
    CHECK(pool->stats().kv_pages == 0);
}
