// Portable elementary functions: exp, log, log1p, sigmoid, softplus, SiLU, tanh, SiTU in float and double.
//
// Why our own: libm differs between glibc (native) and musl (Emscripten), so calling std::exp would
// make the native and the WebAssembly builds disagree in the last bits. These use only +, -, *, /,
// floor and bit manipulation, all of which IEEE 754 defines exactly, so both builds give the same
// bits (the build forbids FMA contraction and fast-math). Accuracy: float about 1-2 ulp, double
// about 1-2 ulp over the ranges the kernels use; tests/unit/test_fmath.cpp measures it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace k3 {

namespace fm_detail {
inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline double bits_to_double(uint64_t u) {
    double d;
    std::memcpy(&d, &u, 8);
    return d;
}
inline uint64_t double_to_bits(double d) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
}
// 2^n for n in the normal exponent range.
inline float pow2f(int n) { return bits_to_float(uint32_t(n + 127) << 23); }
inline double pow2d(int n) { return bits_to_double(uint64_t(n + 1023) << 52); }
}  // namespace fm_detail

// exp(x) in float. Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-6 minimax-like
// Taylor polynomial (error < 1 ulp before scaling), then 2^n applied in two steps so the
// subnormal range is rounded once.
inline float exp_f32(float x) {
    if (x != x) return x;
    if (x > 88.72283935546875f) return std::numeric_limits<float>::infinity();
    if (x < -103.972084045410f) return 0.0f;
    const float n = std::floor(x * 1.44269504088896341f + 0.5f);
    // ln2 split so n*ln2_hi is exact for |n| < 2^9.
    const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int ni = int(n);
    if (ni < -125) return p * fm_detail::pow2f(ni + 60) * fm_detail::pow2f(-60);
    if (ni > 127) return p * fm_detail::pow2f(ni - 1) * 2.0f;
    return p * fm_detail::pow2f(ni);
}

// exp(x) in double: same scheme, degree-13 polynomial (truncation < 1e-17 relative).
inline double exp_f64(double x) {
    if (x != x) return x;
    if (x > 709.782712893383973096) return std::numeric_limits<double>::infinity();
    if (x < -745.1332191019412) return 0.0;
    const double n = std::floor(x * 1.4426950408889634074 + 0.5);
    const double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
    static constexpr double c[] = {1.0 / 6227020800.0,
                                   1.0 / 479001600.0,
                                   1.0 / 39916800.0,
                                   1.0 / 3628800.0,
                                   1.0 / 362880.0,
                                   1.0 / 40320.0,
                                   1.0 / 5040.0,
                                   1.0 / 720.0,
                                   1.0 / 120.0,
                                   1.0 / 24.0,
                                   1.0 / 6.0,
                                   0.5,
                                   1.0,
                                   1.0};
    double p = c[0];
    for (int i = 1; i < 14; ++i) p = p * r + c[i];
    const int ni = int(n);
    if (ni < -1021) return p * fm_detail::pow2d(ni + 600) * fm_detail::pow2d(-600);
    if (ni > 1023) return p * fm_detail::pow2d(ni - 1) * 2.0;
    return p * fm_detail::pow2d(ni);
}

// log(x) in float: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1).
inline float log_f32(float x) {
    if (x != x || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
    if (x == 0.0f) return -std::numeric_limits<float>::infinity();
    if (x == std::numeric_limits<float>::infinity()) return x;
    int e = 0;
    if (x < 1.17549435e-38f) {
        x *= 16777216.0f;
        e = -24;
    }  // subnormal: scale into normal range
    uint32_t u = fm_detail::float_to_bits(x);
    e += int(u >> 23) - 127;
    u = (u & 0x007fffffu) | 0x3f800000u;  // m in [1, 2)
    float m = fm_detail::bits_to_float(u);
    if (m > 1.41421356f) {
        m *= 0.5f;
        e += 1;
    }
    const float s = (m - 1.0f) / (m + 1.0f);
    const float s2 = s * s;
    float p = 1.0f / 11.0f;
    p = p * s2 + 1.0f / 9.0f;
    p = p * s2 + 1.0f / 7.0f;
    p = p * s2 + 1.0f / 5.0f;
    p = p * s2 + 1.0f / 3.0f;
    p = p * s2 + 1.0f;
    const float fe = float(e);
    return (2.0f * s * p + fe * 1.428606765330187045e-06f) + fe * 0.693145751953125f;
}

inline double log_f64(double x) {
    if (x != x || x < 0.0) return std::numeric_limits<double>::quiet_NaN();
    if (x == 0.0) return -std::numeric_limits<double>::infinity();
    if (x == std::numeric_limits<double>::infinity()) return x;
    int e = 0;
    if (x < 2.2250738585072014e-308) {
        x *= 18014398509481984.0;
        e = -54;
    }
    uint64_t u = fm_detail::double_to_bits(x);
    e += int(u >> 52) - 1023;
    u = (u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m = fm_detail::bits_to_double(u);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e += 1;
    }
    const double s = (m - 1.0) / (m + 1.0);
    const double s2 = s * s;
    double p = 1.0 / 23.0;
    for (int k = 21; k >= 1; k -= 2) p = p * s2 + 1.0 / double(k);
    const double fe = double(e);
    return (2.0 * s * p + fe * 1.90821492927058770002e-10) + fe * 6.93147180369123816490e-01;
}

// log(1 + x), accurate for tiny x (the classic u = 1 + x correction).
inline float log1p_f32(float x) {
    const float u = 1.0f + x;
    if (u == 1.0f) return x;
    if (u == std::numeric_limits<float>::infinity()) return u;
    return log_f32(u) * (x / (u - 1.0f));
}
inline double log1p_f64(double x) {
    const double u = 1.0 + x;
    if (u == 1.0) return x;
    if (u == std::numeric_limits<double>::infinity()) return u;
    return log_f64(u) * (x / (u - 1.0));
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }
inline double sigmoid_f64(double x) { return 1.0 / (1.0 + exp_f64(-x)); }

// softplus with the threshold of the reference implementations: linear above 20.
inline float softplus_f32(float z) { return z > 20.0f ? z : log1p_f32(exp_f32(z)); }
inline double softplus_f64(double z) { return z > 20.0 ? z : log1p_f64(exp_f64(z)); }

inline float silu_f32(float x) { return x * sigmoid_f32(x); }
inline double silu_f64(double x) { return x * sigmoid_f64(x); }

namespace fm_detail {
// tanh's Taylor coefficients x^15 ... x^1 (the float series of tanh_f32, shared with its SIMD form).
inline constexpr float kTanhSeriesF32[8] = {
    -0.0014558343870513183f, 0.003592128036572481f, -0.008863235529902197f, 0.021869488536155203f,
    -0.05396825396825397f,   0.13333333333333333f,  -0.3333333333333333f,   1.0f};
}  // namespace fm_detail

// tanh(x): below |x| = 0.5 its Taylor series (float: 8 terms, truncation < 1e-8 relative; double: 16
// terms, < 1e-16), above it 1 - 2 / (exp(2|x|) + 1) with the sign of x (the cancellation there costs a
// few ulp at most, tanh >= 0.46). +-1 for large |x|; tests/unit/test_fmath.cpp compares with std::tanh.
inline float tanh_f32(float x) {
    if (x != x) return x;
    const float a = x < 0.0f ? -x : x;
    if (a < 0.5f) {
        const float x2 = x * x;
        const float* c = fm_detail::kTanhSeriesF32;
        float p = c[0];
        for (int i = 1; i < 8; ++i) p = p * x2 + c[i];
        return x * p;
    }
    const float t = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
    return x < 0.0f ? -t : t;
}
inline double tanh_f64(double x) {
    if (x != x) return x;
    const double a = x < 0.0 ? -x : x;
    if (a < 0.5) {
        static constexpr double c[] = {
            -1.0597268320104654e-06, 2.6147711512907546e-06, -6.451689215655431e-06,  1.5918905069328964e-05,
            -3.927832388331683e-05,  9.691537956929451e-05,  -0.00023912911424355248, 0.000590027440945586,
            -0.0014558343870513183,  0.003592128036572481,   -0.008863235529902197,   0.021869488536155203,
            -0.05396825396825397,    0.13333333333333333,    -0.3333333333333333,     1.0};
        const double x2 = x * x;
        double p = c[0];
        for (int i = 1; i < 16; ++i) p = p * x2 + c[i];
        return x * p;
    }
    const double t = 1.0 - 2.0 / (exp_f64(2.0 * a) + 1.0);
    return x < 0.0 ? -t : t;
}

// SiTU, Kimi K3's gated activation (reference/kimi_k3.md §1.3): beta tanh(g / beta) sigmoid(g) times
// beta_lin tanh(u / beta_lin), for the MLP's gate g and up u (K3: beta = 4, beta_lin = 25).
inline float situ_f32(float g, float u, float beta, float beta_lin) {
    return (beta * tanh_f32(g / beta)) * sigmoid_f32(g) * (beta_lin * tanh_f32(u / beta_lin));
}
inline double situ_f64(double g, double u, double beta, double beta_lin) {
    return (beta * tanh_f64(g / beta)) * sigmoid_f64(g) * (beta_lin * tanh_f64(u / beta_lin));
}

// Overloads so templated code written for float and double picks the right one.
inline float k3exp(float x) { return exp_f32(x); }
inline double k3exp(double x) { return exp_f64(x); }
inline float k3log(float x) { return log_f32(x); }
inline double k3log(double x) { return log_f64(x); }
inline float k3sigmoid(float x) { return sigmoid_f32(x); }
inline double k3sigmoid(double x) { return sigmoid_f64(x); }
inline float k3softplus(float x) { return softplus_f32(x); }
inline double k3softplus(double x) { return softplus_f64(x); }
inline float k3silu(float x) { return silu_f32(x); }
inline double k3silu(double x) { return silu_f64(x); }

}  // namespace k3
