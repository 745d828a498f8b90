// The record ring of speculative decoding (core/spec/ring.h, ring_stream.h): capacity below N
// refused; flush when a verification would not fit and on commit; wrap-around; replay from any ring
// position gives the directly computed state bitwise; the stream emits plain greedy decoding's tokens.
#include <doctest/doctest.h>

#include "core/spec/decoder.h"
#include "core/spec/ring_stream.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::spec;
using namespace k3::model;
using namespace k3::model::test;

TEST_CASE("ring: a capacity below the draft length is refused with a message naming both") {
    CHECK(RecordRing::check(4, 4).empty());
    CHECK(RecordRing::check(16, 4).empty());
    const std::string e = RecordRing::check(3, 4);
    CHECK(e.find("L = 3") != std::string::npos);
    CHECK(e.find("N = 4") != std::string::npos);
    CHECK(!RecordRing::check(4, 0).empty());
    // The stream refuses it too, before doing anything.
    Model& m = tiny();
    ChanceDrafter d({}, 0.5, 1, m.vocab());
    RingStreamOptions o;
    o.capacity = 2;
    o.draft_len = 3;
    RingStream s(m, d, o);
    CHECK(!s.start(random_tokens(5, 1, m.vocab()), nullptr).empty());
}

TEST_CASE("ring: plan_step flushes when a verification would not fit, or shortens it") {
    RingCursor c;
    c.capacity = 10;
    c.count = 6;
    CHECK(plan_step(c, 4, Overflow::fold).flush == false);
    CHECK(plan_step(c, 4, Overflow::fold).tokens == 4);
    c.count = 7;
    CHECK(plan_step(c, 4, Overflow::fold).flush);
    CHECK(plan_step(c, 4, Overflow::fold).tokens == 4);
    CHECK(!plan_step(c, 4, Overflow::shorten).flush);
    CHECK(plan_step(c, 4, Overflow::shorten).tokens == 3);
    c.count = 9;  // one slot: no draft would fit, so flush
    CHECK(plan_step(c, 4, Overflow::shorten).flush);
    CHECK(!plan_step(c, 1, Overflow::shorten).flush);  // N = 1 never drafts
    // Slots wrap around the capacity.
    c.tail = 8;
    c.count = 3;
    c.pending = 2;
    CHECK(c.slot(0) == 8);
    CHECK(c.slot(2) == 0);
    CHECK(c.head() == 3);
    CHECK(c.free() == 5);
}

TEST_CASE("ring: the bookkeeping simulation (flushes, replay work, occupancy never above L)") {
    RingSimOptions o;
    o.draft_len = 4;
    o.capacity = 16;
    o.tokens = 400;
    o.accept = 0.8;
    const RingSimResult a = simulate_ring(o);
    CHECK(a.tokens >= 400);
    CHECK(a.peak_occupancy <= 16);
    CHECK(a.flushes_full > 0);
    CHECK(a.flushes_commit == 1);  // the end of the request
    CHECK(a.mean_occupancy > 0);
    CHECK(a.mean_occupancy < 16);
    // Everything kept is folded exactly once.
    CHECK(a.flush_replayed == a.tokens);
    // A ring that holds the whole request never flushes before the end, and replays more per step.
    o.capacity = 1024;
    const RingSimResult big = simulate_ring(o);
    CHECK(big.flushes_full == 0);
    CHECK(big.rebuild_replayed > a.rebuild_replayed);
    // Commits every 32 tokens.
    o.capacity = 16;
    o.commit_every = 32;
    const RingSimResult c = simulate_ring(o);
    CHECK(c.flushes_commit >= 400 / 32);
    CHECK(c.flushes_commit <= 400 / 32 + 2);
    // Shortening never flushes while a draft still fits, and verifies fewer tokens than folding.
    o.commit_every = 0;
    o.overflow = Overflow::shorten;
    const RingSimResult s = simulate_ring(o);
    CHECK(s.shortened > 0);
    CHECK(s.peak_occupancy <= 16);
}

namespace {

struct Reference {
    std::vector<int32_t> tokens;
    std::vector<std::vector<std::byte>> states;
};

Reference reference(const std::vector<int32_t>& prompt, int count) {
    Reference r;
    Run run = new_run(tiny());
    REQUIRE(greedy_decode(tiny(), *run.seq, prompt, count, &r.tokens, &r.states).empty());
    return r;
}

RingStreamStats stream(const RingStreamOptions& o, Drafter& d, const std::vector<int32_t>& prompt,
                       const Reference& ref, std::vector<RingEvent>* events = nullptr) {
    RingStream s(tiny(), d, o);
    REQUIRE(s.start(prompt, &ref.states).empty());
    bool done = false;
    int guard = 0;
    while (!done && guard++ < 1000) {
        const std::string e = s.step(&done);
        REQUIRE_MESSAGE(e.empty(), e);
    }
    REQUIRE(done);
    const auto& t = s.tokens();
    REQUIRE(t.size() >= size_t(o.new_tokens));
    CHECK(std::vector<int32_t>(t.begin(), t.end()) ==
          std::vector<int32_t>(ref.tokens.begin(), ref.tokens.begin() + ptrdiff_t(t.size())));
    // After the final commit the checkpoint is the state after every committed token.
    CHECK(s.ring().cursor().count == 0);
    CHECK(s.ring().checkpoint() == ref.states[t.size()]);
    CHECK(s.ring().bytes() == tiny().pool_model().state_bytes() +
                                  uint64_t(o.capacity) *
                                      record_bytes_per_token_per_layer(tiny().config(), o.variant) *
                                      uint64_t(tiny().config().n_linear()));
    if (events) *events = s.events();
    return s.stats();
}

}  // namespace

TEST_CASE("ring: replay from every ring position is bitwise the directly computed state, with wrap-around") {
    Model& m = tiny();
    const auto prompt = random_tokens(23, 61, m.vocab());
    const int tokens = 40;
    const Reference ref = reference(prompt, tokens + 8);
    RingStreamOptions o;
    o.draft_len = 4;
    o.capacity = 7;
    o.new_tokens = tokens;
    ChanceDrafter d(ref.tokens, 0.7, 11, m.vocab());
    std::vector<RingEvent> ev;
    const RingStreamStats st = stream(o, d, prompt, ref, &ev);
    CHECK(st.first_mismatch == "");
    CHECK(st.rebuilds_checked == st.steps - st.flushes_full);
    CHECK(st.rebuilds_exact == st.rebuilds_checked);
    CHECK(st.positions_checked > 2 * st.flushes_full);
    CHECK(st.positions_exact == st.positions_checked);
    CHECK(st.flushes_full > 0);     // a ring of 7 fills up
    CHECK(st.flushes_commit == 1);  // the end of the request
    CHECK(st.peak_occupancy <= o.capacity);
    bool wrapped = false;
    for (const auto& e : ev) {
        CHECK(e.count <= o.capacity);
        wrapped |= e.tail + e.count > o.capacity;
    }
    CHECK(wrapped);
}

TEST_CASE("ring: shorten on overflow, commits, and other record variants stay exact") {
    Model& m = tiny();
    const auto prompt = random_tokens(18, 62, m.vocab());
    const int tokens = 30;
    const Reference ref = reference(prompt, tokens + 8);
    struct Case {
        Overflow ov;
        int commit_every;
        RecordVariant v;
        int capacity;
    };
    for (const Case& c : {Case{Overflow::shorten, 0, RecordVariant::minimal_exact, 9},
                          Case{Overflow::fold, 10, RecordVariant::delta_conv, 8},
                          Case{Overflow::fold, 0, RecordVariant::layer_input, 4},
                          Case{Overflow::fold, 0, RecordVariant::raw_gates, 12}}) {
        CAPTURE(std::string(overflow_name(c.ov)));
        CAPTURE(std::string(variant_info(c.v).id));
        RingStreamOptions o;
        o.capacity = c.capacity;
        o.overflow = c.ov;
        o.commit_every = c.commit_every;
        o.variant = c.v;
        o.new_tokens = tokens;
        ChanceDrafter d(ref.tokens, 0.9, 13, m.vocab());
        const RingStreamStats st = stream(o, d, prompt, ref);
        CHECK(st.first_mismatch == "");
        CHECK(st.positions_exact == st.positions_checked);
        CHECK(st.rebuilds_exact == st.rebuilds_checked);
        if (c.ov == Overflow::shorten) CHECK(st.shortened > 0);
        if (c.commit_every > 0) CHECK(st.flushes_commit >= tokens / c.commit_every);
        if (c.capacity == 4)
            CHECK(st.flushes_full >= tokens / 4 - 2);  // L = N: a flush before nearly every step
    }
}

TEST_CASE("ring: push, accept and flush refuse what the cursor cannot hold") {
    Model& m = tiny();
    Run r = new_run(m);
    REQUIRE(m.prefill(*r.seq, random_tokens(6, 63, m.vocab())).empty());
    RecordRing ring(m, RecordVariant::minimal_exact, 3);
    CHECK(!ring.materialise(*r.seq, 0).empty());  // no checkpoint yet
    REQUIRE(ring.reset(*r.seq).empty());
    Recorder rec(m, RecordVariant::minimal_exact);
    rec.begin({});
    const std::vector<int32_t> t = random_tokens(4, 64, m.vocab());
    REQUIRE(
        m.forward(*r.seq, t, ForwardOptions{CoreMode::recurrent, LogitRows::none, &rec}, nullptr).empty());
    const auto ids = [&](size_t n) { return std::span<const int32_t>(t).first(n); };
    CHECK(!ring.push(rec.records(), 0, 4, 6, ids(4)).empty());  // 4 records, 3 slots
    CHECK(!ring.push(rec.records(), 0, 3, 6, ids(2)).empty());  // a token id short
    REQUIRE(ring.push(rec.records(), 0, 3, 6, ids(3)).empty());
    CHECK(!ring.push(rec.records(), 0, 1, 9, ids(1)).empty());  // already pending
    CHECK(!ring.flush(*r.seq).empty());                         // pending
    CHECK(!ring.accept(4).empty());
    REQUIRE(ring.accept(2).empty());
    CHECK(ring.cursor().count == 2);
    CHECK(!ring.materialise(*r.seq, 3).empty());  // only 2 held
    Recorder other(m, RecordVariant::delta);
    other.begin(m.save_state(*r.seq));
    CHECK(!ring.push(other.records(), 0, 0, 8, {}).empty());  // another variant
}
