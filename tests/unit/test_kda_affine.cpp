// Invariants 10-13 of reference/kda.md §7: affine segment maps, composition, context parallelism
// (with the short-conv halo), and the non-additivity of states.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/base/bytes.h"
#include "core/base/rng.h"
#include "core/kda/affine.h"
#include "core/kda/chunked.h"
#include "core/kda/conv.h"
#include "core/kda/gates.h"
#include "core/kda/recurrent.h"
#include "core/kda/reference.h"
#include "tests/unit/test_kda_util.h"

using namespace k3;
using namespace k3::kda;
using k3::kda::test::rel_err;
using k3::kda::test::to_double;

static const Impl kImpls[] = {Impl::scalar, Impl::simd};

TEST_CASE(
    "kda invariant 10: run(S_in) = M S_in + B; M = product of A_t; B = run(0); outputs affine in S_in") {
    const Shape s{2, 4, 24, 20};
    const int T = 45, C = 16;
    const TokenData x = random_tokens(s, T, 101);
    const float sc = default_scale(s.K);
    std::vector<double> Mx(size_t(s.HV) * s.K * s.K), Bx(s.state_floats());
    ref::segment_map_explicit(s, x.view(), Mx.data(), Bx.data());
    for (Impl impl : kImpls) {
        const size_t no = size_t(T) * s.v_row();
        AffineMap m{s, FloatBuf(Mx.size()), FloatBuf(s.state_floats())};
        FloatBuf o0(no), eo(size_t(T) * s.g_row());
        segment_map(s, x.view(), sc, C, m.M.data(), m.B.data(), o0.data(), eo.data(), impl);
        CHECK(rel_err(m.M, Mx) < 1e-5);
        CHECK(compare(m.M.data(), Mx.data(), m.M.size()).within());
        CHECK(rel_err(m.B, Bx) < 1e-5);
        // B and o0 are the bits of the chunked prefill from a zero state with the same chunk size
        FloatBuf Z(s.state_floats(), 0.0f), oz(no);
        chunked(s, Z.data(), x.view(), sc, C, oz.data(), impl);
        CHECK(bitwise_equal(Z, m.B));
        CHECK(bitwise_equal(oz, o0));
        // any start state: the chunked run equals the map, and the outputs equal o0 + eo S_in
        for (uint64_t seed : {1, 2, 3}) {
            const FloatBuf S_in = random_state(s, seed);
            FloatBuf S = S_in, o(no), Sm(s.state_floats()), om(no);
            chunked(s, S.data(), x.view(), sc, C, o.data(), impl);
            affine_apply(s, m.M.data(), m.B.data(), S_in.data(), Sm.data(), impl);
            affine_outputs(s, T, o0.data(), eo.data(), S_in.data(), om.data(), impl);
            CHECK(compare(Sm.data(), S.data(), S.size()).within());
            CHECK(compare(om.data(), o.data(), o.size()).within());
            CHECK(compare(Sm.data(), S.data(), S.size()).rel_rms() < 1e-5);
        }
    }
    // Outputs are affine in S_in: O(S1 + S2) - O(0) = (O(S1) - O(0)) + (O(S2) - O(0)), in fp64 exactly
    // up to rounding, in fp32 within tolerance.
    const std::vector<double> S1 = to_double(random_state(s, 5)), S2 = to_double(random_state(s, 6));
    std::vector<double> S12(S1.size());
    for (size_t e = 0; e < S1.size(); ++e) S12[e] = S1[e] + S2[e];
    auto outs = [&](std::vector<double> S) {
        std::vector<double> o(size_t(T) * s.v_row());
        ref::recurrent(s, S.data(), x.view(), sc, o.data());
        return o;
    };
    const auto o0 = outs(std::vector<double>(S1.size(), 0.0)), o1 = outs(S1), o2 = outs(S2), o12 = outs(S12);
    double worst = 0;
    for (size_t e = 0; e < o0.size(); ++e)
        worst = std::fmax(worst, std::fabs((o12[e] - o0[e]) - (o1[e] - o0[e]) - (o2[e] - o0[e])));
    CHECK(worst < 1e-12);
}

TEST_CASE(
    "kda invariant 11: composition is associative; map(a ++ b) = map(b) o map(a); (I, 0) is the identity") {
    const Shape s{1, 2, 16, 12};
    const int T = 60;
    const TokenData x = random_tokens(s, T, 111);
    const float sc = default_scale(s.K);
    for (Impl impl : kImpls) {
        const AffineMap a = segment_map(s, x.view().slice(s, 0, 17), sc, 8, impl);
        const AffineMap b = segment_map(s, x.view().slice(s, 17, 25), sc, 8, impl);
        const AffineMap c = segment_map(s, x.view().slice(s, 42, 18), sc, 8, impl);
        const AffineMap left = compose(c, compose(b, a, impl), impl),
                        right = compose(compose(c, b, impl), a, impl);
        CHECK(compare(left.M.data(), right.M.data(), left.M.size()).within());
        CHECK(compare(left.B.data(), right.B.data(), left.B.size()).within());
        const AffineMap whole = segment_map(s, x.view(), sc, 8, impl);
        CHECK(compare(left.M.data(), whole.M.data(), whole.M.size()).within());
        CHECK(compare(left.B.data(), whole.B.data(), whole.B.size()).within());
        CHECK(rel_err(left.B, to_double(whole.B)) < 1e-5);
        const AffineMap id = affine_identity(s);
        const AffineMap ia = compose(id, a, impl), ai = compose(a, id, impl);
        for (size_t e = 0; e < a.M.size(); ++e) CHECK((ia.M[e] == a.M[e] && ai.M[e] == a.M[e]));
        for (size_t e = 0; e < a.B.size(); ++e) CHECK((ia.B[e] == a.B[e] && ai.B[e] == a.B[e]));
        // not commutative
        const AffineMap ba = compose(b, a, impl), ab = compose(a, b, impl);
        CHECK_FALSE(compare(ba.B.data(), ab.B.data(), ab.B.size()).within());
    }
}

namespace {

// A short-conv front end: raw projections [T][D] -> conv (window of W-1 raw rows) -> SiLU -> L2 norm
// per head (q, k). Used to check that context parallelism needs the conv halo.
struct Front {
    Shape s;
    int W = 4;
    FloatBuf wq, wk, wv;           // [D][W]
    FloatBuf raw_q, raw_k, raw_v;  // [T][D]
    FloatBuf g, beta;
};

Front make_front(const Shape& s, int T, uint64_t seed) {
    Front f;
    f.s = s;
    Rng r(seed);
    const size_t dq = s.qk_row(), dv = s.v_row();
    f.wq.resize(dq * 4), f.wk.resize(dq * 4), f.wv.resize(dv * 4);
    r.fill_normal(f.wq.data(), f.wq.size(), 0.5f);
    r.fill_normal(f.wk.data(), f.wk.size(), 0.5f);
    r.fill_normal(f.wv.data(), f.wv.size(), 0.5f);
    f.raw_q.resize(size_t(T) * dq), f.raw_k.resize(size_t(T) * dq), f.raw_v.resize(size_t(T) * dv);
    r.fill_normal(f.raw_q.data(), f.raw_q.size());
    r.fill_normal(f.raw_k.data(), f.raw_k.size());
    r.fill_normal(f.raw_v.data(), f.raw_v.size());
    const TokenData x = random_tokens(s, T, seed + 1);
    f.g = x.g, f.beta = x.beta;
    return f;
}

// q, k, v of tokens [t0, t0 + n) computed with the window taken from the raw rows before t0 (zeros
// before the sequence start): exactly what a rank holding only that slice plus the halo can do.
TokenData front_tokens(const Front& f, int t0, int n, bool halo) {
    const Shape& s = f.s;
    TokenData d;
    d.shape = s, d.T = n;
    auto stream = [&](const FloatBuf& raw, const FloatBuf& w, size_t D, FloatBuf& out) {
        FloatBuf win(size_t(f.W - 1) * D, 0.0f);
        for (int i = 0; i < f.W - 1; ++i) {
            const int t = t0 - (f.W - 1) + i;
            if (halo && t >= 0) std::memcpy(win.data() + size_t(i) * D, raw.data() + size_t(t) * D, D * 4);
        }
        out.resize(size_t(n) * D);
        conv_sequence(int(D), f.W, win.data(), raw.data() + size_t(t0) * D, n, w.data(), out.data());
        silu_inplace(out.data(), out.size());
    };
    stream(f.raw_q, f.wq, s.qk_row(), d.q);
    stream(f.raw_k, f.wk, s.qk_row(), d.k);
    stream(f.raw_v, f.wv, s.v_row(), d.v);
    l2norm_rows(d.q.data(), n * s.H, s.K);
    l2norm_rows(d.k.data(), n * s.H, s.K);
    d.g.assign(f.g.begin() + long(size_t(t0) * s.g_row()), f.g.begin() + long(size_t(t0 + n) * s.g_row()));
    d.beta.assign(f.beta.begin() + long(size_t(t0) * s.HV), f.beta.begin() + long(size_t(t0 + n) * s.HV));
    return d;
}

}  // namespace

TEST_CASE("kda invariant 12: context parallelism over R ranks equals the single-rank run (fix-ups a and b)") {
    const Shape s{2, 2, 16, 16};
    const int T = 101, C = 16;
    const Front f = make_front(s, T, 121);
    const float sc = default_scale(s.K);
    const FloatBuf S0 = random_state(s, 122, 0.5f);
    const TokenData all = front_tokens(f, 0, T, true);
    FloatBuf S_ref = S0, o_ref(size_t(T) * s.v_row());
    chunked(s, S_ref.data(), all.view(), sc, C, o_ref.data(), Impl::simd);

    // Uneven slices, boundaries off chunk multiples, one rank with fewer than W-1 = 3 tokens.
    const std::vector<std::vector<int>> splits = {{101}, {40, 61}, {33, 2, 66}, {10, 20, 1, 15, 30, 5, 20}};
    for (const auto& sizes : splits) {
        INFO("R = " << sizes.size());
        REQUIRE(std::accumulate(sizes.begin(), sizes.end(), 0) == T);
        for (Impl impl : kImpls) {
            // 1. every rank: the map of its slice from a zero start, outputs o0 and sensitivities eo
            struct Rank {
                int t0, n;
                TokenData x;
                AffineMap m;
                FloatBuf o0, eo;
            };
            std::vector<Rank> ranks;
            int t0 = 0;
            for (int n : sizes) {
                Rank r{t0,
                       n,
                       front_tokens(f, t0, n, true),
                       {},
                       FloatBuf(size_t(n) * s.v_row()),
                       FloatBuf(size_t(n) * s.g_row())};
                r.m = {s, FloatBuf(size_t(s.HV) * s.K * s.K), FloatBuf(s.state_floats())};
                segment_map(s, r.x.view(), sc, C, r.m.M.data(), r.m.B.data(), r.o0.data(), r.eo.data(), impl);
                ranks.push_back(std::move(r));
                t0 += n;
            }
            // 2-3. fold in rank order: S_in(r) = map(r-1) o ... o map(0) applied to S0
            FloatBuf S_in = S0, next(s.state_floats());
            FloatBuf o_a(size_t(T) * s.v_row()), o_b(o_a.size());
            FloatBuf S_a;
            for (auto& r : ranks) {
                // fix-up (a): rerun the chunked pass from S_in(r)
                FloatBuf Sa = S_in;
                chunked(s, Sa.data(), r.x.view(), sc, C, o_a.data() + size_t(r.t0) * s.v_row(), impl);
                // fix-up (b): linear correction of the outputs; final state M S_in + B
                affine_outputs(s, r.n, r.o0.data(), r.eo.data(), S_in.data(),
                               o_b.data() + size_t(r.t0) * s.v_row(), impl);
                affine_apply(s, r.m.M.data(), r.m.B.data(), S_in.data(), next.data(), impl);
                CHECK(compare(next.data(), Sa.data(), Sa.size()).within());
                S_in = next;
                S_a = Sa;
            }
            CHECK(compare(S_in.data(), S_ref.data(), S_ref.size()).within());
            CHECK(compare(S_a.data(), S_ref.data(), S_ref.size()).within());
            CHECK(compare(o_a.data(), o_ref.data(), o_ref.size()).within());
            CHECK(compare(o_b.data(), o_ref.data(), o_ref.size()).within());
            CHECK(compare(o_a.data(), o_b.data(), o_a.size()).within());  // (a) and (b) agree
            CHECK(rel_err(o_b, to_double(o_ref)) < 1e-5);
            if (sizes.size() == 1) {  // one rank: fix-up (a) is the reference run itself
                CHECK(bitwise_equal(o_a, o_ref));
            }
        }
    }
    // Without the conv halo the ranks after the first see zeros instead of the previous raw rows:
    // outputs at the rank boundary are wrong even though the state fold is right.
    const TokenData second = front_tokens(f, 40, 61, false);
    const TokenData second_halo = front_tokens(f, 40, 61, true);
    CHECK_FALSE(bitwise_equal(second.k, second_halo.k));
    CHECK(bitwise_equal(FloatBuf(second.k.begin() + long(3 * s.qk_row()), second.k.end()),
                        FloatBuf(second_halo.k.begin() + long(3 * s.qk_row()), second_halo.k.end())));
}

TEST_CASE("kda invariant 13: states do not add; the difference is the §4.3 formula") {
    const Shape s{1, 1, 8, 6};
    const TokenData x = random_tokens(s, 30, 131);
    const std::vector<int> sizes = {7, 11, 12};
    std::vector<std::vector<double>> M, B;
    int t0 = 0;
    for (int n : sizes) {
        std::vector<double> m(size_t(s.K) * s.K), b(s.state_floats());
        ref::segment_map_explicit(s, x.view().slice(s, t0, n), m.data(), b.data());
        M.push_back(m), B.push_back(b);
        t0 += n;
    }
    const std::vector<double> S0 = to_double(random_state(s, 132));
    std::vector<double> S_true = S0;
    ref::recurrent(s, S_true.data(), x.view(), 1.0, nullptr);
    const int K = s.K, V = s.V;
    auto matmul = [&](const std::vector<double>& A, const std::vector<double>& Bm, int cols) {
        std::vector<double> out(size_t(K) * cols, 0.0);
        for (int i = 0; i < K; ++i)
            for (int m = 0; m < K; ++m)
                for (int j = 0; j < cols; ++j)
                    out[size_t(i) * cols + j] += A[size_t(i) * K + m] * Bm[size_t(m) * cols + j];
        return out;
    };
    // rhs = sum_r (M_R ... M_{r+1} - I) B_r + (M_R ... M_1) S_0
    const size_t R = sizes.size();
    std::vector<double> rhs(s.state_floats(), 0.0), sumB(s.state_floats(), 0.0);
    for (size_t r = 0; r < R; ++r) {
        std::vector<double> P = B[r];
        for (size_t q = r + 1; q < R; ++q) P = matmul(M[q], P, V);
        for (size_t e = 0; e < rhs.size(); ++e) rhs[e] += P[e] - B[r][e], sumB[e] += B[r][e];
    }
    std::vector<double> P = S0;
    for (size_t q = 0; q < R; ++q) P = matmul(M[q], P, V);
    for (size_t e = 0; e < rhs.size(); ++e) rhs[e] += P[e];
    double diff_max = 0, formula_err = 0;
    for (size_t e = 0; e < rhs.size(); ++e) {
        const double lhs = S_true[e] - sumB[e];
        diff_max = std::fmax(diff_max, std::fabs(lhs));
        formula_err = std::fmax(formula_err, std::fabs(lhs - rhs[e]));
    }
    CHECK(diff_max > 0.05);      // a "+" reduction of the slices' states is wrong by O(1)
    CHECK(formula_err < 1e-12);  // and wrong by exactly the formula
    // Also with S0 = 0 and no decay at all (D = I): the delta rule alone breaks additivity.
    TokenData y = random_tokens(s, 2, 133);
    for (auto& g : y.g) g = 0.0f;
    std::vector<double> S2(s.state_floats(), 0.0), b1(s.state_floats(), 0.0), b2(s.state_floats(), 0.0),
        m1(size_t(K) * K);
    ref::recurrent(s, S2.data(), y.view(), 1.0, nullptr);
    ref::recurrent(s, b1.data(), y.view().slice(s, 0, 1), 1.0, nullptr);
    ref::recurrent(s, b2.data(), y.view().slice(s, 1, 1), 1.0, nullptr);
    double gap = 0;
    for (size_t e = 0; e < S2.size(); ++e) gap = std::fmax(gap, std::fabs(S2[e] - b1[e] - b2[e]));
    CHECK(gap > 1e-3);
}

// The page runs the kernels in parts between its frames (chunked_part, segment_map_part): any grouping
// of the units, run in order, must give the one call's bits, in both implementations. The shapes cover
// a partial last chunk, a chunk longer than the run, C = 1, and C past kMaxChunk (clamped).
TEST_CASE("kda parts: chunked and segment-map calls in parts give the one call's bits") {
    struct Case {
        Shape s;
        int T, C;
    };
    for (const Case& c : {Case{Shape{2, 4, 24, 20}, 45, 16}, Case{Shape{1, 3, 16, 8}, 7, 64},
                          Case{Shape{1, 1, 8, 12}, 33, 1}, Case{Shape{2, 2, 8, 8}, 40, 2000}}) {
        const Shape& s = c.s;
        const int T = c.T, C = c.C;
        CAPTURE(T);
        CAPTURE(C);
        const TokenData x = random_tokens(s, T, 7);
        const float sc = default_scale(s.K);
        const size_t no = size_t(T) * s.v_row(), ne = size_t(T) * s.g_row();
        const size_t units = chunked_units(s, T, C);
        REQUIRE(segment_map_units(s, T, C) == units);
        for (Impl impl : kImpls) {
            FloatBuf S1 = random_state(s, 3), o1(no), o01(no), eo1(ne);
            chunked(s, S1.data(), x.view(), sc, C, o1.data(), impl);
            AffineMap m1{s, FloatBuf(size_t(s.HV) * s.K * s.K), FloatBuf(s.state_floats())};
            segment_map(s, x.view(), sc, C, m1.M.data(), m1.B.data(), o01.data(), eo1.data(), impl);
            for (size_t per : {size_t(1), size_t(2), size_t(3), units}) {
                CAPTURE(per);
                FloatBuf S2 = random_state(s, 3), o2(no), o02(no), eo2(ne);
                AffineMap m2{s, FloatBuf(m1.M.size()), FloatBuf(m1.B.size())};
                for (size_t u = 0; u < units; u += per) {
                    const size_t n = std::min(per, units - u);
                    chunked_part(s, S2.data(), x.view(), sc, C, o2.data(), u, n, impl);
                    segment_map_part(s, x.view(), sc, C, m2.M.data(), m2.B.data(), o02.data(), eo2.data(), u,
                                     n, impl);
                }
                CHECK(bitwise_equal(S1, S2));
                CHECK(bitwise_equal(o1, o2));
                CHECK(bitwise_equal(m1.M, m2.M));
                CHECK(bitwise_equal(m1.B, m2.B));
                CHECK(bitwise_equal(o01, o02));
                CHECK(bitwise_equal(eo1, eo2));
            }
        }
    }
}
