// The fp32 runnable model against its fp64 reference (reference/kda.md §7 invariant 23): one KDA layer
// from a non-zero state, with the chunked and the recurrent core, and the whole model's logits (which
// also checks the absorbed MLA form against the decompressed one), for Kimi Linear's design (tiny) and
// Kimi K3's (k3-tiny: bounded gate, full-rank output gate, MLA output gate, SiTU, attention residuals).
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "core/model/reference.h"
#include "core/model/sampler.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::model;
using namespace k3::model::test;

TEST_CASE_TEMPLATE("model reference: fp32 KDA layer against fp64, from a non-zero state", P,
                   K3_EXACTNESS_PRESETS) {
    Model& m = runnable(P::id);
    const KdaDims& d = m.kda();
    const KdaWeights& w = m.weights().blocks[1].kda;  // layer 1 is KDA
    REQUIRE(m.weights().blocks[1].kind == LayerKind::linear);
    const int T = 100;  // a full chunk and a partial one
    std::vector<float> x(size_t(T) * d.d_model);
    Rng(21).fill_normal(x.data(), x.size());
    // Start state: a state reached by a run (realistic magnitudes), windows of raw rows.
    std::vector<float> base(d.layer_floats());
    Rng(22).fill_normal(base.data(), base.size(), 0.3f);
    const std::vector<double> xd(x.begin(), x.end());
    for (CoreMode mode : {CoreMode::chunked, CoreMode::recurrent}) {
        CAPTURE(int(mode));
        std::vector<float> st = base, out(size_t(T) * d.d_model);
        ref::KdaStateF64 sd = ref::KdaStateF64::from(d, KdaState::at(d, st.data()));
        KdaActs acts;
        kda_forward(w, d, KdaState::at(d, st.data()), x.data(), T, acts, out.data(), mode, 64, Impl::simd);
        std::vector<double> outd(out.size());
        ref::kda_layer(w, d, sd, xd.data(), T, outd.data());
        const KdaState s32 = KdaState::at(d, st.data());
        const double e_out = rel_rms(out, outd);
        const double e_S = rel_rms(std::vector<float>(s32.S, s32.S + d.state_floats()), sd.S);
        const double e_w = rel_rms(std::vector<float>(s32.win_v, s32.win_v + sd.win_v.size()), sd.win_v);
        MESSAGE(std::string(mode == CoreMode::chunked ? "chunked" : "recurrent")
                << ": out " << e_out << ", S " << e_S << ", v window " << e_w);
        CHECK(e_out < 1e-5);
        CHECK(e_S < 1e-5);
        CHECK(e_w < 1e-6);  // raw projections: one fp32 dot product of d_model terms
    }
}

TEST_CASE_TEMPLATE("model reference: fp32 model logits against fp64 (prefill, then decode)", P,
                   K3_EXACTNESS_PRESETS) {
    Model& m = runnable(P::id);
    const auto toks = random_tokens(40, 23, m.vocab());
    Run r = new_run(m);
    std::vector<float> l32;
    REQUIRE(m.forward(*r.seq, std::span<const int32_t>(toks).first(34),
                      ForwardOptions{CoreMode::chunked, LogitRows::all, nullptr}, &l32)
                .empty());
    std::vector<float> l;
    for (size_t i = 34; i < toks.size(); ++i) {
        REQUIRE(m.decode(*r.seq, toks[i], &l).empty());
        l32.insert(l32.end(), l.begin(), l.end());
    }
    ref::ModelStateF64 st(m);
    std::vector<double> l64;
    ref::model_forward(m, st, toks, &l64);
    REQUIRE(l64.size() == l32.size());
    const double e = rel_rms(l32, l64);
    MESSAGE("model logits fp32 vs fp64: " << e);
    CHECK(e < 1e-5);
    CHECK(e > 0.0);  // computed independently: they differ by rounding, not by construction
    // Greedy picks agree up to near-ties: the fp32 pick is within 1e-4 of the fp64 maximum.
    for (size_t t = 0; t < toks.size(); ++t) {
        const auto row = l64.begin() + ptrdiff_t(t * size_t(m.vocab()));
        const double best = *std::max_element(row, row + m.vocab());
        CHECK(row[argmax(l32.data() + t * size_t(m.vocab()), m.vocab())] >= best - 1e-4);
    }
}

TEST_CASE("model reference: grouped value heads (HV = 2 H) against fp64") {
    ModelConfig c = *model_preset("tiny");
    c.lin_v_heads = 8;  // two value heads (state matrices) per q/k head
    c.head_v = 32;
    ModelResult r = Model::create(c, 3);
    REQUIRE_MESSAGE(r.model, r.error);
    const Model& m = *r.model;
    const KdaDims& d = m.kda();
    CHECK(m.pool_model().state_bytes_per_layer == (8u * 64 * 32 + 3u * (2 * 256 + 8 * 32)) * 4);
    const int T = 70;
    std::vector<float> x(size_t(T) * d.d_model), st(d.layer_floats(), 0.0f), out(size_t(T) * d.d_model);
    Rng(25).fill_normal(x.data(), x.size());
    const std::vector<double> xd(x.begin(), x.end());
    ref::KdaStateF64 sd(d);
    KdaActs acts;
    kda_forward(m.kda_weights(0), d, KdaState::at(d, st.data()), x.data(), T, acts, out.data(),
                CoreMode::chunked, 16, Impl::simd);
    std::vector<double> outd(out.size());
    ref::kda_layer(m.kda_weights(0), d, sd, xd.data(), T, outd.data());
    const double e_out = rel_rms(out, outd),
                 e_S =
                     rel_rms(std::vector<float>(st.begin(), st.begin() + ptrdiff_t(d.state_floats())), sd.S);
    MESSAGE("HV = 2H: out " << e_out << ", S " << e_S);
    CHECK(e_out < 1e-5);
    CHECK(e_S < 1e-5);
}
