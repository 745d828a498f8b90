// Rollback after verification (core/spec/verify.h, records.h, delta.h), reference/kda.md §7 invariant
// 21: for every accepted count n in 0..N, restoring by snapshot copy or by replaying n records onto the
// confirmed state gives the bits of running the n tokens directly, for every record variant that
// claims exactness (RecoverSSM's token-order fold among them); the variants that do not claim it restore
// S exactly and leave the conv windows stale; n = 0 leaves the confirmed bytes untouched. RecoverSSM's
// closed-form commit agrees with the token-order fold to rounding.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/kda/gates.h"
#include "core/kda/recurrent.h"
#include "core/spec/delta.h"
#include "core/spec/verify.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::spec;
using namespace k3::model;
using namespace k3::model::test;

namespace {

// Bytes of one linear layer's S and its windows inside a Model::save_state buffer.
struct LayerBytes {
    std::vector<std::byte> S, windows;
};
LayerBytes layer_bytes(const Model& m, const std::vector<std::byte>& state, int li) {
    const size_t per = size_t(m.pool_model().state_bytes_per_layer), s = m.kda().state_floats() * 4;
    const auto* p = state.data() + size_t(li) * per;
    return {{p, p + s}, {p + s, p + per}};
}

// The sequence after `prompt` and then `n` of `tokens` decoded one at a time.
SequenceSnapshot direct(Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                        int n) {
    Run r = new_run(m);
    REQUIRE(m.prefill(*r.seq, prompt).empty());
    for (int i = 0; i < n; ++i) REQUIRE(m.decode(*r.seq, tokens[size_t(i)]).empty());
    return m.save(*r.seq);
}

}  // namespace

TEST_CASE(
    "spec replay: every variant and snapshots, every accepted count n in 0..N, against direct decoding") {
    Model& m = tiny();
    const auto prompt = random_tokens(29, 31, m.vocab());
    const auto tokens = random_tokens(6, 32, m.vocab());
    const int N = int(tokens.size());
    std::vector<SequenceSnapshot> want;
    for (int n = 0; n <= N; ++n) want.push_back(direct(m, prompt, tokens, n));

    struct Way {
        Rollback how;
        RecordVariant v;
    };
    std::vector<Way> ways = {{Rollback::snapshot, RecordVariant::minimal_exact}};
    for (const auto& v : record_variants()) ways.push_back({Rollback::replay, v.variant});
    for (const Way& w : ways) {
        CAPTURE(std::string(rollback_name(w.how)));
        CAPTURE(std::string(variant_info(w.v).id));
        const bool exact = w.how == Rollback::snapshot || variant_info(w.v).exact;
        Run r = new_run(m);
        REQUIRE(m.prefill(*r.seq, prompt).empty());
        Verifier ver(m, w.how, w.v);
        REQUIRE(ver.begin(*r.seq).empty());
        // Two forwards (2 + 4 tokens): a recording may span several.
        std::vector<float> logits;
        REQUIRE(ver.extend(*r.seq, std::span<const int32_t>(tokens).first(2), &logits).empty());
        REQUIRE(ver.extend(*r.seq, std::span<const int32_t>(tokens).subspan(2), &logits).empty());
        REQUIRE(ver.verified() == N);
        CHECK(logits.size() == size_t(N) * size_t(m.vocab()));
        if (w.how == Rollback::replay) CHECK(ver.records().tokens() == N);
        const SequenceSnapshot verified = m.save(*r.seq);
        CHECK(same_contents(verified, want[size_t(N)]));  // verification has the bits of decoding
        for (int n = 0; n <= N; ++n) {
            CAPTURE(n);
            REQUIRE(m.restore(*r.seq, verified).empty());
            REQUIRE(ver.keep(*r.seq, n, /*force*/ true).empty());
            const SequenceSnapshot got = m.save(*r.seq);
            CHECK(got.position == want[size_t(n)].position);
            CHECK(got.kv == want[size_t(n)].kv);
            if (n == 0) CHECK(got.state == ver.confirmed());  // untouched confirmed bytes
            if (exact) {
                CHECK(got.state == want[size_t(n)].state);
                // and the sequence continues exactly like the direct one
                Run d = new_run(m);
                REQUIRE(m.restore(*d.seq, want[size_t(n)]).empty());
                std::vector<float> l1, l2;
                REQUIRE(m.decode(*r.seq, 5, &l1).empty());
                REQUIRE(m.decode(*d.seq, 5, &l2).empty());
                CHECK(bitwise_equal(l1, l2));
            } else {
                // S is exact in every layer; the windows are the confirmed ones, stale once n >= 1.
                bool windows_stale = false;
                for (int li = 0; li < m.config().n_linear(); ++li) {
                    const LayerBytes a = layer_bytes(m, got.state, li),
                                     b = layer_bytes(m, want[size_t(n)].state, li),
                                     c = layer_bytes(m, ver.confirmed(), li);
                    CHECK(a.S == b.S);
                    CHECK(a.windows == c.windows);
                    windows_stale |= a.windows != b.windows;
                }
                CHECK(windows_stale == (n > 0));
            }
        }
    }
}

TEST_CASE("spec replay: the confirmed copy is never written and keep() refuses what it cannot do") {
    Model& m = tiny();
    Run r = new_run(m);
    REQUIRE(m.prefill(*r.seq, random_tokens(10, 3, m.vocab())).empty());
    Verifier ver(m, Rollback::replay);
    CHECK(!ver.keep(*r.seq, 0).empty());  // nothing verified yet
    REQUIRE(ver.begin(*r.seq).empty());
    const std::vector<std::byte> confirmed = ver.confirmed();
    REQUIRE(ver.extend(*r.seq, random_tokens(3, 4, m.vocab()), nullptr).empty());
    CHECK(!ver.keep(*r.seq, 4).empty());
    CHECK(!ver.keep(*r.seq, -1).empty());
    REQUIRE(ver.keep(*r.seq, 1).empty());
    CHECK(ver.confirmed() == confirmed);
    CHECK(r.seq->position() == 11);
    // The sequence moved: further tokens need a new begin().
    CHECK(!ver.extend(*r.seq, random_tokens(1, 5, m.vocab()), nullptr).empty());
    // keep(verified) without force does nothing at all.
    REQUIRE(ver.begin(*r.seq).empty());
    REQUIRE(ver.extend(*r.seq, random_tokens(2, 6, m.vocab()), nullptr).empty());
    const auto before = m.save(*r.seq);
    REQUIRE(ver.keep(*r.seq, 2).empty());
    CHECK(same_contents(m.save(*r.seq), before));
    CHECK(ver.tokens_replayed() == 1);  // only the keep(1) above replayed
}

TEST_CASE("spec replay: rollback storage held is the confirmed state plus N records or N snapshots") {
    Model& m = tiny();
    const uint64_t state = m.pool_model().state_bytes();
    const int N = 4, layers = m.config().n_linear();
    for (const auto& v : record_variants()) {
        CAPTURE(std::string(v.id));
        Run r = new_run(m);
        REQUIRE(m.prefill(*r.seq, random_tokens(8, 9, m.vocab())).empty());
        Verifier ver(m, Rollback::replay, v.variant);
        REQUIRE(ver.begin(*r.seq).empty());
        REQUIRE(ver.extend(*r.seq, random_tokens(N, 10, m.vocab()), nullptr).empty());
        // The record and, for recoverssm, the token's conv window column held beside it.
        const uint64_t rec = held_bytes_per_token_per_layer(m.config(), v.variant);
        CHECK(ver.bytes_held() == state + uint64_t(N) * rec * uint64_t(layers));
    }
    Run r = new_run(m);
    REQUIRE(m.prefill(*r.seq, random_tokens(8, 9, m.vocab())).empty());
    Verifier snap(m, Rollback::snapshot);
    REQUIRE(snap.begin(*r.seq).empty());
    REQUIRE(snap.extend(*r.seq, random_tokens(N, 10, m.vocab()), nullptr).empty());
    CHECK(snap.bytes_held() == uint64_t(N + 1) * state);
}

TEST_CASE("spec delta: delta_record leaves the recurrent kernel's bits and delta_replay reproduces them") {
    const kda::Shape s{2, 4, 16, 24};  // grouped value heads, K != V
    const int T = 9;
    Rng r(77);
    std::vector<float> q(size_t(T) * s.qk_row()), k(q.size()), v(size_t(T) * s.v_row()),
        g(size_t(T) * s.g_row()), beta(size_t(T) * s.HV), S0(s.state_floats());
    r.fill_normal(q.data(), q.size());
    r.fill_normal(k.data(), k.size(), 0.25f);
    r.fill_normal(v.data(), v.size());
    r.fill_uniform(g.data(), g.size(), -3.0f, 0.0f);
    r.fill_uniform(beta.data(), beta.size(), 0.05f, 0.95f);
    r.fill_normal(S0.data(), S0.size());
    const kda::Tokens x{q.data(), k.data(), v.data(), g.data(), beta.data(), T};
    for (kda::Impl impl : {kda::Impl::scalar, kda::Impl::simd}) {
        std::vector<float> Sk = S0, Sd = S0, Sr = S0, delta(size_t(T) * s.v_row());
        kda::recurrent(s, Sk.data(), x, 0.25f, nullptr, impl);
        delta_record(s, Sd.data(), k.data(), v.data(), g.data(), beta.data(), T, delta.data());
        CHECK(bitwise_equal(Sk, Sd));
        // Replay reads interleaved records; here each field is its own array with its own stride,
        // so replay token by token.
        for (int t = 0; t < T; ++t)
            delta_replay(s, Sr.data(), k.data() + size_t(t) * s.qk_row(),
                         delta.data() + size_t(t) * s.v_row(), g.data() + size_t(t) * s.g_row(), 1, 0);
        CHECK(bitwise_equal(Sk, Sr));
    }
}

TEST_CASE("spec recoverssm: the closed-form commit = the token-order fold to rounding; n <= 1 bitwise") {
    const kda::Shape s{2, 4, 16, 24};  // grouped value heads, K != V
    const int T = 12;
    Rng r(91);
    std::vector<float> k(size_t(T) * s.qk_row()), c(size_t(T) * s.v_row()), g(size_t(T) * s.g_row()),
        S0(s.state_floats());
    r.fill_normal(k.data(), k.size());
    kda::l2norm_rows(k.data(), T * s.H, s.K);
    r.fill_normal(c.data(), c.size(), 0.5f);
    r.fill_uniform(g.data(), g.size(), -5.0f, 0.0f);  // K3's bounded gate range
    r.fill_normal(S0.data(), S0.size());
    auto rel = [](const auto& a, const auto& b) {
        double d = 0, m = 0;
        for (size_t i = 0; i < a.size(); ++i)
            d = std::max(d, std::fabs(double(a[i]) - double(b[i]))), m = std::max(m, std::fabs(double(b[i])));
        return d / m;
    };
    std::vector<float> folded = S0;  // token order, one record at a time
    for (int n = 0; n <= T; ++n) {
        CAPTURE(n);
        if (n > 0)
            delta_replay(s, folded.data(), k.data() + size_t(n - 1) * s.qk_row(),
                         c.data() + size_t(n - 1) * s.v_row(), g.data() + size_t(n - 1) * s.g_row(), 1, 0);
        std::vector<float> closed = S0;
        std::vector<double> wide(S0.begin(), S0.end());
        closed_form_fold(s, closed.data(), k.data(), c.data(), g.data(), n);
        closed_form_fold(s, wide.data(), k.data(), c.data(), g.data(), n);
        if (n <= 1) CHECK(bitwise_equal(closed, folded));  // one step: the same operations
        CHECK(rel(closed, folded) <= 1e-5);
        CHECK(rel(closed, wide) <= 1e-5);
        CHECK(rel(folded, wide) <= 1e-5);
        if (n >= 1) {  // the falsifier hook: one decay factor left out is far outside rounding
            std::vector<float> skipped = S0;
            closed_form_fold(s, skipped.data(), k.data(), c.data(), g.data(), n, n - 1);
            CHECK(rel(skipped, folded) > 1e-3);
        }
    }
}
