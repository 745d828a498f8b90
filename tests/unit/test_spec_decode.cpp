// Greedy speculative decoding on the runnable model (core/spec/decoder.h, drafter.h): exactly the
// tokens of plain greedy decoding, whatever the drafter, draft length and rollback method, and the
// state after it is bitwise the plain run's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "core/spec/decoder.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::spec;
using namespace k3::model;
using namespace k3::model::test;

namespace {

struct Plain {
    std::vector<int32_t> tokens;
    std::vector<std::vector<std::byte>> states;
};

const Plain& plain(const std::vector<int32_t>& prompt, int count) {
    static std::map<std::pair<std::vector<int32_t>, int>, Plain> cache;
    Plain& p = cache[{prompt, count}];
    if (p.tokens.empty()) {
        Run r = new_run(tiny());
        REQUIRE(greedy_decode(tiny(), *r.seq, prompt, count, &p.tokens, &p.states).empty());
    }
    return p;
}

// Runs speculative decoding until `count` tokens are committed; returns them (exactly `count`).
std::vector<int32_t> speculate(Drafter& d, const std::vector<int32_t>& prompt, int count, SpecOptions o,
                               SpecStats* stats, std::vector<std::byte>* state, uint64_t* position) {
    Model& m = tiny();
    Run r = new_run(m);
    SpecDecoder dec(m, d, o);
    REQUIRE(dec.start(*r.seq, prompt).empty());
    std::vector<int32_t> out;
    while (int(out.size()) < count) REQUIRE(dec.step(*r.seq, &out).empty());
    *stats = dec.stats();
    *state = m.save_state(*r.seq);
    *position = r.seq->position();
    out.resize(size_t(count));
    return out;
}

}  // namespace

TEST_CASE("spec decode: greedy speculative decoding emits exactly plain greedy decoding's tokens") {
    Model& m = tiny();
    const auto prompt = random_tokens(21, 41, m.vocab());
    const int count = 26;
    const Plain& ref = plain(prompt, count + 8);
    const std::vector<int32_t> want(ref.tokens.begin(), ref.tokens.begin() + count);
    for (double p : {0.0, 0.6, 1.0})
        for (int N : {1, 4})
            for (Rollback how : {Rollback::replay, Rollback::snapshot}) {
                CAPTURE(p);
                CAPTURE(N);
                CAPTURE(std::string(rollback_name(how)));
                ChanceDrafter d(ref.tokens, p, 5, m.vocab());
                SpecStats st;
                std::vector<std::byte> state;
                uint64_t pos = 0;
                CHECK(speculate(d, prompt, count, {N, how, RecordVariant::minimal_exact}, &st, &state,
                                &pos) == want);
                // The state after the committed tokens is plain decoding's at that position, bitwise.
                REQUIRE(pos - prompt.size() < ref.states.size());
                CHECK(state == ref.states[size_t(pos - prompt.size())]);
                CHECK(st.accepted + uint64_t(st.steps) == st.committed);
                if (p == 1.0) CHECK(st.rollbacks == 0);
                if (p == 0.0) CHECK(st.accepted == 0);
                if (N == 1) CHECK(st.drafted == 0);
                const uint64_t state_bytes = m.pool_model().state_bytes();
                if (how == Rollback::snapshot) CHECK(st.peak_bytes_held == uint64_t(N + 1) * state_bytes);
            }
}

TEST_CASE("spec decode: every exact record variant decodes exactly; acceptance follows the set probability") {
    Model& m = tiny();
    const auto prompt = random_tokens(17, 43, m.vocab());
    const int count = 30;
    const Plain& ref = plain(prompt, count + 8);
    const std::vector<int32_t> want(ref.tokens.begin(), ref.tokens.begin() + count);
    for (const auto& v : record_variants()) {
        if (!v.exact) continue;
        CAPTURE(std::string(v.id));
        ChanceDrafter d(ref.tokens, 0.7, 9, m.vocab());
        SpecStats st;
        std::vector<std::byte> state;
        uint64_t pos = 0;
        CHECK(speculate(d, prompt, count, {4, Rollback::replay, v.variant}, &st, &state, &pos) == want);
        CHECK(state == ref.states[size_t(pos - prompt.size())]);
    }
    // The drafter alone: P(draft i kept | all before kept) = p.
    std::vector<int32_t> cont(5000);
    for (size_t i = 0; i < cont.size(); ++i) cont[i] = int32_t(i % 97);
    ChanceDrafter d(cont, 0.75, 3, 97);
    REQUIRE(d.start({}).empty());
    int first_hits = 0, tries = 0;
    std::vector<int32_t> out;
    for (size_t pos = 0; pos + 4 < cont.size(); pos += 4, ++tries) {
        REQUIRE(d.draft(cont[pos], 3, &out).empty());
        first_hits += out[0] == cont[pos + 1];
        for (int32_t t : out) CHECK((t >= 0 && t < 97));
        REQUIRE(d.commit(std::span<const int32_t>(cont).subspan(pos, 4)).empty());
    }
    const double rate = double(first_hits) / tries, sd = std::sqrt(0.75 * 0.25 / tries);
    CHECK(std::fabs(rate - 0.75) < 5 * sd);
}

TEST_CASE("spec decode: the model drafting for itself with quantised weights") {
    Model& m = tiny();
    const auto prompt = random_tokens(19, 47, m.vocab());
    const int count = 24;
    const Plain& ref = plain(prompt, count + 8);
    const std::vector<int32_t> want(ref.tokens.begin(), ref.tokens.begin() + count);
    double rate16 = 0, rate3 = 0;
    for (int bits : {16, 3}) {
        CAPTURE(bits);
        ModelResult q = make_quantised_model(m.config(), m.seed(), bits);
        REQUIRE_MESSAGE(q.model, q.error);
        std::string err;
        auto d = SelfDrafter::create(*q.model, 256, &err);
        REQUIRE_MESSAGE(d, err);
        SpecStats st;
        std::vector<std::byte> state;
        uint64_t pos = 0;
        CHECK(speculate(*d, prompt, count, {4, Rollback::replay, RecordVariant::minimal_exact}, &st, &state,
                        &pos) == want);
        CHECK(state == ref.states[size_t(pos - prompt.size())]);
        (bits == 16 ? rate16 : rate3) = double(st.accepted) / double(st.drafted);
    }
    CHECK(rate16 == 1.0);  // unquantised, the drafter is the target: every draft is right
    CHECK(rate3 < 1.0);    // 3-bit weights change some greedy picks
}

TEST_CASE("spec decode: quantised weights take at most 2^(b-1) - 1 levels per output channel") {
    ModelConfig c = *model_preset("tiny");
    ModelWeights w = make_weights(c, 3);
    const Matrix before = w.blocks[0].kda.q;
    quantise_weights(w, 4);
    const Matrix& after = w.blocks[0].kda.q;
    double err = 0, ref = 0;
    for (int o = 0; o < after.out; o += 37) {
        std::vector<float> mags;
        for (int i = 0; i < after.in; ++i) {
            const float a = std::fabs(after.at(i, o));
            if (std::find(mags.begin(), mags.end(), a) == mags.end()) mags.push_back(a);
            err += std::pow(double(after.at(i, o)) - before.at(i, o), 2),
                ref += std::pow(double(before.at(i, o)), 2);
        }
        CHECK(mags.size() <= 8);  // 0 and up to 7 magnitudes
    }
    CHECK(std::sqrt(err / ref) > 0.01);
    CHECK(std::sqrt(err / ref) < 0.3);
    const auto q4 = after.pairs;
    quantise_weights(w, 16);  // 16 bits: unchanged
    CHECK(w.blocks[0].kda.q.pairs == q4);
    CHECK(q4 != before.pairs);
    CHECK(!make_quantised_model(c, 3, 1).model);
    CHECK(!make_quantised_model(c, 3, 9).model);
}
