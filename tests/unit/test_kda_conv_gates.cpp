// Invariants 15 (short conv and its window) and 18 (gate) of reference/kda.md §7, the L2 norm and beta.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/base/fmath.h"
#include "core/base/rng.h"
#include "core/kda/conv.h"
#include "core/kda/gates.h"
#include "core/kda/reference.h"
#include "tests/unit/test_kda_util.h"

using namespace k3;
using namespace k3::kda;

// The full causal conv by its definition: y_t[c] = sum_i w[c][i] x_{t-W+1+i}[c], zeros before t = 0,
// summed left to right (the kernel's order), in fp32.
static std::vector<float> causal_conv(const std::vector<float>& x, int T, int D, int W,
                                      const std::vector<float>& w) {
    std::vector<float> y(size_t(T) * D);
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < D; ++c) {
            float acc = 0.0f;
            for (int i = 0; i < W - 1; ++i) {
                const int s = t - (W - 1) + i;
                acc = acc + w[size_t(c) * W + i] * (s >= 0 ? x[size_t(s) * D + c] : 0.0f);
            }
            y[size_t(t) * D + c] = acc + w[size_t(c) * W + W - 1] * x[size_t(t) * D + c];
        }
    return y;
}

TEST_CASE(
    "kda invariant 15: conv steps with a window equal the full causal conv; the window holds raw rows") {
    const int T = 23, D = 13;
    Rng r(151);
    for (int W : {1, 2, 4, 5}) {
        INFO("W = " << W);
        std::vector<float> x(size_t(T) * D), w(size_t(D) * W);
        r.fill_normal(x.data(), x.size());
        r.fill_normal(w.data(), w.size());
        const std::vector<float> want = causal_conv(x, T, D, W, w);
        // a zero window is zero left padding; step by step == sequence == definition, bit for bit
        std::vector<float> win(size_t(std::max(W - 1, 0)) * D, 0.0f), y(size_t(T) * D);
        for (int t = 0; t < T; ++t)
            conv_step(D, W, win.data(), x.data() + size_t(t) * D, w.data(), y.data() + size_t(t) * D);
        CHECK(bitwise_equal(y, want));
        std::vector<float> win2(win.size(), 0.0f), y2(y.size());
        conv_sequence(D, W, win2.data(), x.data(), T, w.data(), y2.data());
        CHECK(bitwise_equal(y2, want));
        // the window is the last W-1 RAW rows, oldest first
        for (int i = 0; i < W - 1; ++i)
            CHECK(std::memcmp(win.data() + size_t(i) * D, x.data() + size_t(T - (W - 1) + i) * D,
                              size_t(D) * 4) == 0);
        CHECK(bitwise_equal(win, win2));
        // split: conv(A) then conv(B) with the carried window == conv(A ++ B)
        std::vector<float> win3(win.size(), 0.0f), y3(y.size());
        conv_sequence(D, W, win3.data(), x.data(), 9, w.data(), y3.data());
        conv_sequence(D, W, win3.data(), x.data() + size_t(9) * D, T - 9, w.data(),
                      y3.data() + size_t(9) * D);
        CHECK(bitwise_equal(y3, want));
    }
    std::vector<float> v = {-3.0f, -0.5f, 0.0f, 0.5f, 3.0f, 30.0f};
    std::vector<float> s = v;
    silu_inplace(s.data(), s.size());
    for (size_t i = 0; i < v.size(); ++i) CHECK(s[i] == silu_f32(v[i]));
    CHECK(std::fabs(s[4] - 3.0 / (1.0 + std::exp(-3.0))) < 1e-6);
}

TEST_CASE(
    "kda invariant 18: gate -exp(A_log) softplus(z + dt_bias), linear branch above 20, finite for |z| <= "
    "1e4") {
    const int HV = 3, K = 50;
    Rng r(181);
    std::vector<float> z(size_t(HV) * K), dt(z.size()), A(HV), g(z.size());
    for (int round = 0; round < 4; ++round) {
        const double range = round == 0 ? 3.0 : round == 1 ? 30.0 : round == 2 ? 1e3 : 1e4;
        for (auto& e : z) e = float(r.uniform(-range, range));
        r.fill_normal(dt.data(), dt.size());
        r.fill_normal(A.data(), A.size());
        kda_gate(z.data(), dt.data(), A.data(), HV, K, g.data());
        for (int h = 0; h < HV; ++h)
            for (int i = 0; i < K; ++i) {
                const size_t e = size_t(h) * K + i;
                const double u = double(z[e] + dt[e]);
                const double sp = u > 20 ? u : std::log1p(std::exp(u));
                const double want = -std::exp(double(A[size_t(h)])) * sp;
                CHECK(std::isfinite(g[e]));
                CHECK(g[e] <= 0.0f);
                CHECK(std::fabs(double(g[e]) - want) <= 2e-6 * std::fabs(want) + 1e-30);
            }
    }
    // the linear branch: softplus(25) is exactly 25
    const float z1 = 25.0f, d0 = 0.0f, a0 = 0.0f;
    float g1;
    kda_gate(&z1, &d0, &a0, 1, 1, &g1);
    CHECK(g1 == -25.0f);
    std::vector<float> lo = {-4.0f, 0.0f, 4.0f}, b(3);
    beta_sigmoid(lo.data(), 3, b.data());
    CHECK(b[1] == 0.5f);
    CHECK(std::fabs(b[2] - 1.0 / (1.0 + std::exp(-4.0))) < 1e-7);
}

// Kimi K3's bounded gate against its fp64 form kda::ref::gate: lower_bound < g < 0 (0 when the sigmoid
// underflows). Error bound, eps = 2^-24: the fp32 argument u = exp(A_log) (z + dt_bias) carries three
// roundings (exp_f32, the sum, the product), |du| <= 3 eps |u|, and d ln sigmoid(u) / du = 1 - sigmoid(u)
// <= 1 passes them to g's relative error; sigmoid_f32 and the product with the bound add about 4 eps:
// |g - g64| <= (4 + 3 |u|) eps |g64|. Large for a deep negative u, where |g| itself is tiny. Measured:
// at most 0.6 of the bound.
TEST_CASE("kda gate: the bounded gate lower_bound * sigmoid(exp(A_log) (z + dt_bias)) against fp64") {
    const int HV = 3, K = 40;
    Rng r(182);
    std::vector<float> z(size_t(HV) * K), dt(z.size()), A(HV), g(z.size());
    double worst = 0;
    for (int round = 0; round < 3; ++round) {
        const double range = round == 0 ? 1.0 : round == 1 ? 10.0 : 1e4;
        for (auto& e : z) e = float(r.uniform(-range, range));
        r.fill_normal(dt.data(), dt.size());
        for (auto& a : A) a = float(r.uniform(0.0, 2.8));  // exp(A_log) in [1, 16], as the model's init
        kda_gate_bounded(z.data(), dt.data(), A.data(), HV, K, -5.0f, g.data());
        for (size_t e = 0; e < g.size(); ++e) {
            const double want = ref::gate(z[e], dt[e], A[e / K], -5.0);
            CHECK(g[e] <= 0.0f);
            CHECK(g[e] >= -5.0f);
            const double err = std::fabs(double(g[e]) - want);
            const double u = std::exp(double(A[e / K])) * (double(z[e]) + double(dt[e]));
            const double bound = (4.0 + 3.0 * std::fabs(u)) * 0x1p-24 * std::fabs(want);
            CHECK(err <= bound + FLT_MIN);  // below FLT_MIN, fp32 underflows (subnormal, then 0)
            if (std::fabs(want) > FLT_MIN) worst = std::max(worst, err / bound);
        }
    }
    MESSAGE("bounded gate fp32 vs fp64: worst error / bound " << worst);
    // At the argument 0 the gate is exactly half the bound; lower_bound 0 in ref::gate is the softplus form.
    const float z0 = 0.0f, d0 = 0.0f, a0 = 1.0f;
    float g0;
    kda_gate_bounded(&z0, &d0, &a0, 1, 1, -5.0f, &g0);
    CHECK(g0 == -2.5f);
    CHECK(ref::gate(0.5, 0.25, 0.0, 0.0) == -softplus_f64(0.75));
}

TEST_CASE("kda l2 norm: eps inside the sqrt, zero rows stay zero") {
    std::vector<float> x = {3.0f, 4.0f, 0.0f, 0.0f};
    l2norm_rows(x.data(), 2, 2);
    CHECK(x[0] == 3.0f / std::sqrt(25.0f + 1e-6f));
    CHECK(x[1] == 4.0f / std::sqrt(25.0f + 1e-6f));
    CHECK(x[2] == 0.0f);
    CHECK(x[3] == 0.0f);
    // where the eps matters: ||x||^2 = 1e-6 gives a norm of sqrt(2e-6), not 1e-3
    std::vector<float> y = {1e-3f, 0.0f};
    l2norm_rows(y.data(), 1, 2);
    CHECK(std::fabs(y[0] - 1e-3 / std::sqrt(2e-6)) < 1e-6);
}
