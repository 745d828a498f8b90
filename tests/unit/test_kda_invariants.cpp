// Invariants of reference/kda.md §7 for the KDA kernels: 1-9 and 19 here; 10-13 in
// test_kda_affine.cpp; 15 and 18 in test_kda_conv_gates.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/base/bytes.h"
#include "core/base/fmath.h"
#include "core/base/rng.h"
#include "core/kda/chunked.h"
#include "core/kda/recurrent.h"
#include "core/kda/reference.h"
#include "tests/unit/test_kda_util.h"

using namespace k3;
using namespace k3::kda;
using k3::kda::test::rel_err;
using k3::kda::test::to_double;

static const Impl kImpls[] = {Impl::scalar, Impl::simd};

// fp32 run of `T` tokens from S0 with a kernel: (final state, outputs).
struct Run {
    FloatBuf S, o;
};
static Run run_recurrent(const Shape& s, const FloatBuf& S0, const Tokens& x, float scale, Impl impl) {
    Run r{S0, FloatBuf(size_t(x.T) * s.v_row())};
    recurrent(s, r.S.data(), x, scale, r.o.data(), impl);
    return r;
}
static Run run_chunked(const Shape& s, const FloatBuf& S0, const Tokens& x, float scale, int C, Impl impl) {
    Run r{S0, FloatBuf(size_t(x.T) * s.v_row())};
    chunked(s, r.S.data(), x, scale, C, r.o.data(), impl);
    return r;
}

TEST_CASE("kda invariant 1: the decode step equals the literal matrix definition") {
    // S' = (I - b k k^T) Diag(a) S + b k v^T, o = S'^T (scale q), evaluated as matrices in fp64.
    const Shape s{2, 4, 24, 20};
    const TokenData x = random_tokens(s, 1, 11);
    const FloatBuf S0 = random_state(s, 12);
    const float scale = default_scale(s.K);
    const int K = s.K, V = s.V;
    std::vector<double> Sm(s.state_floats()), om(s.v_row());
    for (int h = 0; h < s.HV; ++h) {
        const float* k = x.k.data() + size_t(h / s.group()) * K;
        const float* q = x.q.data() + size_t(h / s.group()) * K;
        const double b = x.beta[size_t(h)];
        std::vector<double> A(size_t(K) * K);  // (I - b k k^T) Diag(a)
        for (int i = 0; i < K; ++i)
            for (int c = 0; c < K; ++c)
                A[size_t(i) * K + c] = ((i == c ? 1.0 : 0.0) - b * double(k[i]) * double(k[c])) *
                                       exp_f64(double(x.g[size_t(h) * K + c]));
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) {
                double acc = b * double(k[i]) * double(x.v[size_t(h) * V + j]);
                for (int c = 0; c < K; ++c)
                    acc += A[size_t(i) * K + c] * double(S0[(size_t(h) * K + c) * V + j]);
                Sm[(size_t(h) * K + i) * V + j] = acc;
            }
        for (int j = 0; j < V; ++j) {
            double acc = 0;
            for (int i = 0; i < K; ++i) acc += double(scale) * double(q[i]) * Sm[(size_t(h) * K + i) * V + j];
            om[size_t(h) * V + j] = acc;
        }
    }
    std::vector<double> Sr = to_double(S0), orf(s.v_row());
    ref::step(s, Sr.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data(), scale, orf.data());
    for (size_t e = 0; e < Sr.size(); ++e) CHECK(std::fabs(Sr[e] - Sm[e]) < 1e-12);
    for (size_t e = 0; e < orf.size(); ++e) CHECK(std::fabs(orf[e] - om[e]) < 1e-12);
    for (Impl impl : kImpls) {
        FloatBuf S = S0, o(s.v_row());
        recurrent_step(s, S.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data(), scale,
                       o.data(), impl);
        CHECK(rel_err(S, Sm) < 1e-6);
        CHECK(rel_err(o, om) < 1e-6);
        const ErrorStats e = compare(S.data(), Sm.data(), S.size());
        CHECK(e.within());
    }
}

TEST_CASE("kda invariant 2: chunked == recurrent for C in {1, 16, 32, 64}, T not a multiple of C") {
    const Shape s{2, 2, 32, 40};
    const int T = 150;  // 150 = 9*16 + 6 = 4*32 + 22 = 2*64 + 22
    const TokenData x = random_tokens(s, T, 21);
    const FloatBuf S0 = random_state(s, 22);
    const float scale = default_scale(s.K);
    std::vector<double> Sr = to_double(S0), orf(size_t(T) * s.v_row());
    ref::recurrent(s, Sr.data(), x.view(), scale, orf.data());
    const Run rec = run_recurrent(s, S0, x.view(), scale, Impl::simd);
    CHECK(rel_err(rec.o, orf) < 1e-5);
    CHECK(rel_err(rec.S, Sr) < 1e-5);
    for (int C : {1, 16, 32, 64}) {
        INFO("C = " << C);
        // fp64 chunked == fp64 recurrent to 1e-12 (the algebra), fp32 chunked == fp32 recurrent within
        // tolerance.
        std::vector<double> Sc = to_double(S0), oc(size_t(T) * s.v_row());
        ref::chunked(s, Sc.data(), x.view(), scale, C, oc.data());
        double worst = 0;
        for (size_t e = 0; e < oc.size(); ++e) worst = std::fmax(worst, std::fabs(oc[e] - orf[e]));
        for (size_t e = 0; e < Sc.size(); ++e) worst = std::fmax(worst, std::fabs(Sc[e] - Sr[e]));
        CHECK(worst < 1e-12);
        for (Impl impl : kImpls) {
            const Run ch = run_chunked(s, S0, x.view(), scale, C, impl);
            CHECK(compare(ch.o.data(), rec.o.data(), ch.o.size()).within());
            CHECK(compare(ch.S.data(), rec.S.data(), ch.S.size()).within());
            CHECK(rel_err(ch.o, orf) < 1e-5);
            CHECK(rel_err(ch.S, Sr) < 1e-5);
        }
    }
}

TEST_CASE(
    "kda invariant 3: outputs for C = 16 and C = 64 agree; bits differ (boundaries move the rounding)") {
    const Shape s{1, 1, 64, 64};
    const TokenData x = random_tokens(s, 200, 31);
    const FloatBuf S0 = random_state(s, 32);
    const Run a = run_chunked(s, S0, x.view(), 0.125f, 16, Impl::simd);
    const Run b = run_chunked(s, S0, x.view(), 0.125f, 64, Impl::simd);
    CHECK(compare(a.o.data(), b.o.data(), a.o.size()).within());
    CHECK(compare(a.o.data(), b.o.data(), a.o.size()).rel_rms() < 1e-5);
    CHECK_FALSE(bitwise_equal(a.o, b.o));
}

TEST_CASE("kda invariant 4: split invariance of prefill, and prefill then decode") {
    const Shape s{2, 2, 32, 32};
    const int T = 100, C = 16;
    const TokenData x = random_tokens(s, T, 41);
    const FloatBuf S0 = random_state(s, 42);
    const float sc = default_scale(s.K);
    for (Impl impl : kImpls) {
        const Run whole = run_chunked(s, S0, x.view(), sc, C, impl);
        for (int A : {32, 48, 7, 50, 99}) {  // on and off chunk boundaries
            INFO("A = " << A);
            Run r{S0, FloatBuf(size_t(T) * s.v_row())};
            chunked(s, r.S.data(), x.view().slice(s, 0, A), sc, C, r.o.data(), impl);
            chunked(s, r.S.data(), x.view().slice(s, A, T - A), sc, C, r.o.data() + size_t(A) * s.v_row(),
                    impl);
            if (A % C == 0) {  // the same chunk boundaries: the same bits
                CHECK(bitwise_equal(r.S, whole.S));
                CHECK(bitwise_equal(r.o, whole.o));
            } else {
                CHECK(compare(r.S.data(), whole.S.data(), r.S.size()).within());
                CHECK(compare(r.o.data(), whole.o.data(), r.o.size()).within());
            }
        }
        // prefill(P) then d decode steps == prefill(P + d)
        const int P = 90;
        Run r{S0, FloatBuf(size_t(T) * s.v_row())};
        chunked(s, r.S.data(), x.view().slice(s, 0, P), sc, C, r.o.data(), impl);
        for (int t = P; t < T; ++t) {
            const Tokens one = x.view().slice(s, t, 1);
            recurrent_step(s, r.S.data(), one.q, one.k, one.v, one.g, one.beta, sc,
                           r.o.data() + size_t(t) * s.v_row(), impl);
        }
        CHECK(compare(r.S.data(), whole.S.data(), r.S.size()).within());
        CHECK(compare(r.o.data(), whole.o.data(), r.o.size()).within());
        // and the recurrent sequence split anywhere is bitwise the whole sequence
        const Run rec = run_recurrent(s, S0, x.view(), sc, impl);
        Run rr{S0, FloatBuf(size_t(T) * s.v_row())};
        recurrent(s, rr.S.data(), x.view().slice(s, 0, 37), sc, rr.o.data(), impl);
        recurrent(s, rr.S.data(), x.view().slice(s, 37, T - 37), sc, rr.o.data() + 37 * s.v_row(), impl);
        CHECK(bitwise_equal(rr.S, rec.S));
        CHECK(bitwise_equal(rr.o, rec.o));
    }
}

TEST_CASE("kda invariant 5: zero-length input; a single-token prefill equals one decode step") {
    const Shape s{1, 2, 16, 24};
    const TokenData x = random_tokens(s, 1, 51);
    const FloatBuf S0 = random_state(s, 52);
    for (Impl impl : kImpls) {
        FloatBuf S = S0;
        chunked(s, S.data(), x.view().slice(s, 0, 0), 0.25f, 16, nullptr, impl);
        CHECK(bitwise_equal(S, S0));
        recurrent(s, S.data(), x.view().slice(s, 0, 0), 0.25f, nullptr, impl);
        CHECK(bitwise_equal(S, S0));
        const Run ch = run_chunked(s, S0, x.view(), 0.25f, 16, impl);
        Run st{S0, FloatBuf(s.v_row())};
        recurrent_step(s, st.S.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data(), 0.25f,
                       st.o.data(), impl);
        CHECK(compare(ch.S.data(), st.S.data(), st.S.size()).within());
        CHECK(compare(ch.o.data(), st.o.data(), st.o.size()).within());
        CHECK(compare(ch.S.data(), st.S.data(), st.S.size()).rel_rms() < 1e-6);
    }
}

// o = S^T (scale q) in fp32, summed over i = K-1 ... 0 (the recurrent kernel's order) or 0 ... K-1
// (the chunked kernel's Qg S).
static FloatBuf read_out(const Shape& s, const FloatBuf& S, const float* q, float scale, bool descending) {
    FloatBuf o(s.v_row(), 0.0f);
    for (int h = 0; h < s.HV; ++h)
        for (int n = 0; n < s.K; ++n) {
            const int i = descending ? s.K - 1 - n : n;
            const float qs = scale * q[size_t(h / s.group()) * s.K + i];
            for (int j = 0; j < s.V; ++j)
                o[size_t(h) * s.V + j] = o[size_t(h) * s.V + j] + qs * S[(size_t(h) * s.K + i) * s.V + j];
        }
    return o;
}

TEST_CASE(
    "kda invariant 6: alpha = 1, beta = 0 leaves S unchanged and reads o = S^T q exactly; beta = 0 alone "
    "decays") {
    const Shape s{2, 2, 20, 28};
    TokenData x = random_tokens(s, 1, 61);
    const FloatBuf S0 = random_state(s, 62);
    for (auto& g : x.g) g = 0.0f;
    for (auto& b : x.beta) b = 0.0f;
    const FloatBuf want_rec = read_out(s, S0, x.q.data(), 0.3f, true),
                   want_ch = read_out(s, S0, x.q.data(), 0.3f, false);
    for (Impl impl : kImpls) {
        const Run r = run_recurrent(s, S0, x.view(), 0.3f, impl);
        CHECK(bitwise_equal(r.S, S0));
        CHECK(bitwise_equal(r.o, want_rec));
        for (int C : {1, 16}) {
            const Run c = run_chunked(s, S0, x.view(), 0.3f, C, impl);
            CHECK(bitwise_equal(c.S, S0));
            CHECK(bitwise_equal(c.o, want_ch));
        }
    }
    // beta = 0 with a decay: S = Diag(alpha) S exactly, row i scaled by exp(g_i).
    Rng rng(63);
    for (auto& g : x.g) g = float(-rng.uniform(0.0, 3.0));
    FloatBuf want = S0;
    for (int h = 0; h < s.HV; ++h)
        for (int i = 0; i < s.K; ++i)
            for (int j = 0; j < s.V; ++j) {
                float& e = want[(size_t(h) * s.K + i) * s.V + j];
                e = exp_f32(x.g[size_t(h) * s.K + i]) * e;
            }
    for (Impl impl : kImpls) {
        CHECK(bitwise_equal(run_recurrent(s, S0, x.view(), 0.3f, impl).S, want));
        CHECK(bitwise_equal(run_chunked(s, S0, x.view(), 0.3f, 8, impl).S, want));
    }
}

TEST_CASE("kda invariant 7: alpha = 1, beta = 1 stores v under k; alpha = 0 erases the history") {
    const Shape s{1, 1, 32, 16};
    TokenData x = random_tokens(s, 1, 71);
    const FloatBuf S0 = random_state(s, 72);
    for (auto& g : x.g) g = 0.0f;
    x.beta[0] = 1.0f;
    for (Impl impl : kImpls) {
        for (bool chunk : {false, true}) {
            const Run r = chunk ? run_chunked(s, S0, x.view(), 0.2f, 4, impl)
                                : run_recurrent(s, S0, x.view(), 0.2f, impl);
            // S^T k = v up to the L2-eps effect: ||k||^2 = s / (s + 1e-6)
            double worst = 0;
            for (int j = 0; j < s.V; ++j) {
                double acc = 0;
                for (int i = 0; i < s.K; ++i)
                    acc += double(x.k[size_t(i)]) * double(r.S[size_t(i) * s.V + j]);
                worst = std::fmax(
                    worst, std::fabs(acc - double(x.v[size_t(j)])) / (1.0 + std::fabs(x.v[size_t(j)])));
            }
            CHECK(worst < 2e-6);
        }
    }
    // g = -inf: S = beta k v^T exactly, whatever S was
    for (auto& g : x.g) g = -std::numeric_limits<float>::infinity();
    x.beta[0] = 0.7f;
    FloatBuf want(s.state_floats());
    for (int i = 0; i < s.K; ++i)
        for (int j = 0; j < s.V; ++j) want[size_t(i) * s.V + j] = x.k[size_t(i)] * (0.7f * x.v[size_t(j)]);
    for (Impl impl : kImpls) {
        CHECK(bitwise_equal(run_recurrent(s, S0, x.view(), 0.2f, impl).S, want));
        CHECK(bitwise_equal(run_chunked(s, S0, x.view(), 0.2f, 16, impl).S, want));
    }
}

TEST_CASE("kda invariant 8: a zero key writes nothing (S = Diag(alpha) S)") {
    const Shape s{1, 1, 16, 16};
    TokenData x = random_tokens(s, 1, 81);
    for (auto& k : x.k) k = 0.0f;
    const FloatBuf S0 = random_state(s, 82);
    FloatBuf want = S0;
    for (int i = 0; i < s.K; ++i)
        for (int j = 0; j < s.V; ++j)
            want[size_t(i) * s.V + j] = exp_f32(x.g[size_t(i)]) * S0[size_t(i) * s.V + j];
    for (Impl impl : kImpls) {
        CHECK(bitwise_equal(run_recurrent(s, S0, x.view(), 0.25f, impl).S, want));
        CHECK(bitwise_equal(run_chunked(s, S0, x.view(), 0.25f, 16, impl).S, want));
    }
}

// Largest singular value of a K x V matrix by power iteration on S^T S, in fp64.
static double spectral_norm(const double* S, int K, int V) {
    std::vector<double> x(static_cast<size_t>(V), 1.0), y(static_cast<size_t>(K));
    double sigma = 0;
    for (int it = 0; it < 300; ++it) {
        for (int i = 0; i < K; ++i) {
            double acc = 0;
            for (int j = 0; j < V; ++j) acc += S[size_t(i) * V + j] * x[size_t(j)];
            y[size_t(i)] = acc;
        }
        double nx = 0;
        for (int j = 0; j < V; ++j) {
            double acc = 0;
            for (int i = 0; i < K; ++i) acc += S[size_t(i) * V + j] * y[size_t(i)];
            x[size_t(j)] = acc;
            nx += acc * acc;
        }
        nx = std::sqrt(nx);
        if (nx == 0) return 0;
        for (auto& e : x) e /= nx;
        sigma = std::sqrt(nx);
    }
    return sigma;
}

TEST_CASE("kda invariant 9: non-expansion ||S_t|| <= ||S_t-1|| + beta ||v_t|| (spectral and Frobenius)") {
    const Shape s{1, 1, 12, 10};
    InputRecipe rec;
    rec.gate_strength = 0.05;  // little decay: the bound is nearly tight
    const TokenData x = random_tokens(s, 60, 91, rec);
    std::vector<double> S = to_double(random_state(s, 92));
    for (int t = 0; t < x.T; ++t) {
        const Tokens one = x.view().slice(s, t, 1);
        const double before = spectral_norm(S.data(), s.K, s.V);
        double fb = 0, nv = 0;
        for (double e : S) fb += e * e;
        for (int j = 0; j < s.V; ++j) nv += double(one.v[j]) * double(one.v[j]);
        ref::step(s, S.data(), one.q, one.k, one.v, one.g, one.beta, 1.0, nullptr);
        double fa = 0;
        for (double e : S) fa += e * e;
        const double bound = double(one.beta[0]) * std::sqrt(nv);
        CHECK(spectral_norm(S.data(), s.K, s.V) <= (before + bound) * (1 + 1e-9));
        CHECK(std::sqrt(fa) <= std::sqrt(fb) + bound + 1e-12);
    }
}

TEST_CASE("kda invariant 19: gate stress (per-step log decay down to -50) stays finite and matches") {
    const Shape s{2, 2, 32, 32};
    const int T = 150;
    TokenData x = random_tokens(s, T, 191);
    Rng r(192);
    for (auto& g : x.g) g = float(-50.0 * r.uniform());  // cumulative down to about -3,000 over a chunk of 64
    const FloatBuf S0 = random_state(s, 193);
    const float sc = default_scale(s.K);
    std::vector<double> Sr = to_double(S0), orf(size_t(T) * s.v_row());
    ref::recurrent(s, Sr.data(), x.view(), sc, orf.data());
    const Run rec = run_recurrent(s, S0, x.view(), sc, Impl::simd);
    for (int C : {16, 64, 150}) {
        for (Impl impl : kImpls) {
            const Run ch = run_chunked(s, S0, x.view(), sc, C, impl);
            size_t bad = 0;
            for (float e : ch.o) bad += !std::isfinite(e);
            for (float e : ch.S) bad += !std::isfinite(e);
            CHECK(bad == 0);
            CHECK(compare(ch.o.data(), rec.o.data(), ch.o.size()).within());
            CHECK(compare(ch.S.data(), rec.S.data(), ch.S.size()).within());
            CHECK(rel_err(ch.o, orf) < 1e-5);
        }
    }
    // The fp64 chunked reference, with exp of pairwise differences, is stable too.
    std::vector<double> Sc = to_double(S0), oc(size_t(T) * s.v_row());
    ref::chunked(s, Sc.data(), x.view(), sc, 64, oc.data());
    double worst = 0;
    for (size_t e = 0; e < oc.size(); ++e) worst = std::fmax(worst, std::fabs(oc[e] - orf[e]));
    CHECK(worst < 1e-12);
}

TEST_CASE("kda invariant 19: a long run with alpha close to 1 does not drift from fp64") {
    const Shape s{1, 1, 16, 16};
    const int T = 65536;
    InputRecipe rec;
    rec.gate_strength = 0.001;  // g about -7e-4 per step
    const TokenData x = random_tokens(s, T, 194, rec);
    const FloatBuf S0 = random_state(s, 195);
    std::vector<double> Sr = to_double(S0), orf(size_t(T) * s.v_row());
    ref::recurrent(s, Sr.data(), x.view(), 0.25, orf.data());
    const Run rec32 = run_recurrent(s, S0, x.view(), 0.25f, Impl::simd);
    const Run ch32 = run_chunked(s, S0, x.view(), 0.25f, 64, Impl::simd);
    // the error of the last 1,024 outputs and of the final state, relative to their size
    const size_t tail = size_t(1024) * s.v_row(), off = rec32.o.size() - tail;
    const std::vector<double> ref_tail(orf.begin() + long(off), orf.end());
    CHECK(compare(rec32.o.data() + off, ref_tail.data(), tail).rel_rms() < 1e-5);
    CHECK(compare(ch32.o.data() + off, ref_tail.data(), tail).rel_rms() < 1e-5);
    CHECK(rel_err(rec32.S, Sr) < 1e-5);
    CHECK(rel_err(ch32.S, Sr) < 1e-5);
}
