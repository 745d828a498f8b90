// Context parallelism of a whole KDA layer of the runnable model (core/cp/layer_cp.h): with the conv
// halo every core input has the single-rank bits and the outputs, S and the windows match; without it
// the first W-1 tokens of every later rank are wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/base/rng.h"
#include "core/base/stats.h"
#include "core/cp/layer_cp.h"
#include "test_model_util.h"

using namespace k3;
using namespace k3::cp;

namespace {

// Relative RMS difference of n floats.
double rel(const float* x, const float* ref, size_t n) { return rel_rms(x, ref, n); }
double rel(const FloatBuf& x, const FloatBuf& ref) { return rel(x.data(), ref.data(), ref.size()); }

FloatBuf layer_input(int T, int D, uint64_t seed) {
    FloatBuf x(size_t(T) * D);
    Rng r(seed);
    r.fill_normal(x.data(), x.size());
    return x;
}

}  // namespace

TEST_CASE("cp layer: with the halo, R in {1, 2, 3, 7} ranks equal one rank") {
    model::Model& m = model::test::tiny();
    const model::KdaDims& d = m.kda();
    const model::KdaWeights& w = m.kda_weights(0);
    const int T = 203, C = 16, D = d.d_model;
    const FloatBuf x = layer_input(T, D, 21);
    // A start state as after a prefix: random S and windows.
    FloatBuf start(d.layer_floats());
    Rng(22).fill_normal(start.data(), start.size(), 0.5f);
    const LayerRun one = layer_single_rank(w, d, x.data(), T, start.data(), C);
    const std::vector<Bounds> all = {{0, T},
                                     {0, 77, T},
                                     {0, 50, 52, T},
                                     {0, 21, 23, 60, 99, 130, 170, T},
                                     {0, 1, 2, 3, T}};  // the last: three ranks of one token each
    for (const Bounds& b : all)
        for (Combiner c : {Combiner::serial, Combiner::scan})
            for (Fixup f : {Fixup::rerun, Fixup::linear}) {
                CAPTURE(b.size() - 1);
                CAPTURE(combiner_id(c));
                CAPTURE(fixup_id(f));
                const LayerRun r = layer_context_parallel(w, d, x.data(), b, start.data(), {c, f, true, C});
                CHECK(bitwise_equal(r.q, one.q));
                CHECK(bitwise_equal(r.k, one.k));
                CHECK(bitwise_equal(r.v, one.v));
                CHECK(bitwise_equal(r.g, one.g));
                CHECK(bitwise_equal(r.beta, one.beta));
                CHECK(rel(r.out, one.out) < 1e-5);
                CHECK(rel(r.state.data(), one.state.data(), d.state_floats()) < 1e-5);
                // Windows: the last W-1 raw rows, bit for bit.
                CHECK(std::memcmp(r.state.data() + d.state_floats(), one.state.data() + d.state_floats(),
                                  d.window_floats() * 4) == 0);
                if (b.size() == 2 && f == Fixup::rerun) CHECK(bitwise_equal(r.out, one.out));
            }
    // A slice shorter than W-1 = 3 makes a halo reach back over more than one rank.
    const LayerRun r = layer_context_parallel(w, d, x.data(), {0, 1, 2, 3, T}, start.data(), {});
    CHECK(r.halo_max_ranks == 3);
    CHECK(r.halo_bytes == 6.0 * 4 * (2 * d.qk_channels() + d.v_channels()));  // rows 0; 0, 1; 0, 1, 2
}

TEST_CASE("cp layer: without the halo the first W-1 tokens of each later rank are wrong") {
    model::Model& m = model::test::tiny();
    const model::KdaDims& d = m.kda();
    const model::KdaWeights& w = m.kda_weights(0);
    const int T = 120, C = 16, D = d.d_model, W1 = d.window_rows();
    const FloatBuf x = layer_input(T, D, 23);
    const LayerRun one = layer_single_rank(w, d, x.data(), T, nullptr, C);
    const Bounds b = {0, 40, 90, T};
    const LayerRun no =
        layer_context_parallel(w, d, x.data(), b, nullptr, {Combiner::scan, Fixup::rerun, false, C});
    const size_t qk = d.s.qk_row();
    for (int t = 0; t < T; ++t) {
        const bool in_halo = (t >= 40 && t < 40 + W1) || (t >= 90 && t < 90 + W1);
        const bool same = bitwise_equal(no.k.data() + size_t(t) * qk, one.k.data() + size_t(t) * qk, qk);
        CAPTURE(t);
        CHECK(same != in_halo);
    }
    // Rank 0 is untouched; everything after the first boundary drifts through the state.
    CHECK(bitwise_equal(no.out.data(), one.out.data(), size_t(40) * D));
    CHECK(rel(no.out.data() + size_t(40) * D, one.out.data() + size_t(40) * D, size_t(T - 40) * D) > 1e-3);
    CHECK(rel(no.state.data(), one.state.data(), d.state_floats()) > 1e-4);
}
