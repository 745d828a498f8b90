// Accuracy of the portable elementary functions against libm, and a digest of their bits that must
// be the same natively and in WebAssembly.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/base/fmath.h"
#include "core/base/rng.h"

using namespace k3;

static double ulp_err_f(float got, double want) {
    const float w = float(want);
    if (got == w) return 0;
    const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
    return std::fabs(double(got) - want) / ulp;
}

TEST_CASE("exp_f32 within 2 ulp of libm over the kernels' range") {
    double worst = 0;
    for (int i = 0; i <= 200000; ++i) {
        const float x = -87.0f + 175.0f * float(i) / 200000.0f;
        worst = std::max(worst, ulp_err_f(exp_f32(x), std::exp(double(x))));
    }
    CHECK(worst <= 2.0);
    CHECK(exp_f32(0.0f) == 1.0f);
    CHECK(exp_f32(-200.0f) == 0.0f);
    CHECK(std::isinf(exp_f32(100.0f)));
    for (float x : {-90.0f, -100.0f, -103.0f}) {  // subnormal results: within one subnormal step
        CHECK(exp_f32(x) > 0.0f);
        CHECK(std::fabs(double(exp_f32(x)) - double(float(std::exp(double(x))))) <= 1.5e-45);
    }
}

TEST_CASE("exp_f64 and log_f64 near machine precision") {
    Rng rng(3);
    double worst_e = 0, worst_l = 0;
    for (int i = 0; i < 100000; ++i) {
        const double x = rng.uniform(-700, 700);
        worst_e = std::max(worst_e, std::fabs(exp_f64(x) / std::exp(x) - 1));
        const double y = std::exp(rng.uniform(-300, 300));
        worst_l =
            std::max(worst_l, std::fabs(log_f64(y) - std::log(y)) / std::max(1.0, std::fabs(std::log(y))));
    }
    CHECK(worst_e < 5e-16);
    CHECK(worst_l < 5e-16);
    CHECK(log_f64(1.0) == 0.0);
    CHECK(std::isinf(log_f64(0.0)));
    CHECK(std::isnan(log_f64(-1.0)));
}

TEST_CASE("log_f32, log1p, softplus, sigmoid") {
    double worst = 0;
    for (int i = 1; i <= 100000; ++i) {
        const float x = std::ldexp(1.0f + float(i) / 100000.0f, (i % 200) - 100);
        const double want = std::log(double(x));
        worst = std::max(worst, std::fabs(double(log_f32(x)) - want) / std::max(1.0, std::fabs(want)));
    }
    CHECK(worst < 3e-7);
    CHECK(log_f32(1e-40f) == doctest::Approx(std::log(1e-40)).epsilon(1e-6));  // subnormal input
    CHECK(log1p_f64(1e-20) == 1e-20);
    CHECK(std::fabs(log1p_f32(1e-3f) - std::log1p(1e-3)) < 1e-9);
    CHECK(softplus_f32(30.0f) == 30.0f);  // linear branch above 20
    CHECK(softplus_f32(-30.0f) > 0.0f);   // tiny but not zero
    CHECK(std::fabs(softplus_f64(0.5) - std::log1p(std::exp(0.5))) < 1e-15);
    CHECK(sigmoid_f32(-200.0f) == 0.0f);
    CHECK(sigmoid_f32(200.0f) == 1.0f);
    CHECK(std::fabs(sigmoid_f64(0.3) - 1 / (1 + std::exp(-0.3))) < 1e-16);
}

// FNV-1a over the bit patterns of many results. The constant was computed once; the native and
// the WebAssembly builds must both reproduce it (docs/architecture.md, Numerics).
TEST_CASE("fmath and rng digests are the same in every build") {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    };
    Rng rng(42);
    for (int i = 0; i < 20000; ++i) {
        const float xf = float(rng.uniform(-90, 90));
        const double xd = rng.uniform(-700, 700);
        const float a = exp_f32(xf), b = log_f32(std::fabs(xf) + 1e-30f), c = softplus_f32(xf),
                    d = sigmoid_f32(xf);
        const double e = exp_f64(xd), f = log_f64(std::fabs(xd)), g = log1p_f64(xd / 1000), n = rng.normal();
        mix(&a, 4), mix(&b, 4), mix(&c, 4), mix(&d, 4), mix(&e, 8), mix(&f, 8), mix(&g, 8), mix(&n, 8);
    }
    MESSAGE("fmath digest " << h);
    CHECK(h == 15338954166961815472ull);
}

// tanh from exp_f32 / exp_f64 (the Taylor series below |x| = 0.5, 1 - 2 / (exp(2|x|) + 1) above):
// float within 4 ulp of libm (relative 4 * 2^-24 = 2.4e-7; the cancellation of the exp branch near
// |x| = 0.5 costs about 2 ulp), double within 1e-15 relative (measured 4.4e-16); odd, +-1 at the ends, tiny x
// returns x.
TEST_CASE("tanh_f32 and tanh_f64 against std::tanh, and SiTU") {
    double worst_f = 0, worst_d = 0;
    for (int i = 0; i <= 100000; ++i) {
        const float x = -12.0f + 24.0f * float(i) / 100000.0f;
        worst_f = std::max(worst_f, ulp_err_f(tanh_f32(x), std::tanh(double(x))));
        const double xd = -12.0 + 24.0 * double(i) / 100000.0 + 1e-7;
        worst_d = std::max(worst_d, std::fabs(tanh_f64(xd) - std::tanh(xd)) / std::fabs(std::tanh(xd)));
    }
    MESSAGE("tanh_f32 worst " << worst_f << " ulp, tanh_f64 worst relative " << worst_d);
    CHECK(worst_f <= 4.0);
    CHECK(worst_d < 1e-15);
    for (float x : {1e-30f, 1e-6f, 0.25f, 0.4999f, 0.5f, 3.0f, 20.0f, 100.0f})
        CHECK(tanh_f32(-x) == -tanh_f32(x));
    CHECK(tanh_f32(1e-20f) == 1e-20f);
    CHECK(tanh_f32(100.0f) == 1.0f);
    CHECK(tanh_f64(-1000.0) == -1.0);
    CHECK(std::isnan(tanh_f32(std::numeric_limits<float>::quiet_NaN())));
    // SiTU (reference/kimi_k3.md §1.3) against its formula in libm; bounded by beta in g and beta_lin in u.
    Rng rng(7);
    double worst_s = 0;
    for (int i = 0; i < 20000; ++i) {
        const float g = float(rng.uniform(-40, 40)), u = float(rng.uniform(-200, 200));
        const double want = 4.0 * std::tanh(double(g) / 4.0) / (1.0 + std::exp(-double(g))) * 25.0 *
                            std::tanh(double(u) / 25.0);
        worst_s = std::max(
            worst_s, std::fabs(double(situ_f32(g, u, 4.0f, 25.0f)) - want) / std::max(1e-3, std::fabs(want)));
        CHECK(std::fabs(situ_f64(g, u, 4.0, 25.0) - want) <= 1e-14 * std::max(1.0, std::fabs(want)));
    }
    MESSAGE("situ_f32 worst relative " << worst_s);
    CHECK(worst_s < 1e-6);
    CHECK(std::fabs(situ_f32(1e4f, 1e4f, 4.0f, 25.0f) - 100.0f) < 1e-4f);  // the bound beta * beta_lin
}
