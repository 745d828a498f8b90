// The device probes of device.h: loops that do nothing but the one thing they measure, at the build's
// SIMD width (xsimd vectors; single floats in a build without SIMD). The constants come from volatile
// loads so that the compiler cannot fold x * 1 or x + 0 away, and every result ends in a volatile sink.
#if !K3_SIMD && defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")  // a scalar build measures one float per instruction
#endif
#include "core/kda/device.h"

#include "core/kda/layout.h"
#include "core/kda/novec.h"
#include "core/kda/simd.h"

namespace k3::kda {

namespace {

#if K3_SIMD
using vec = simd::vf;
constexpr int kLanes = simd::W;
inline vec load_vec(const float* p) { return simd::load(p); }
inline void store_vec(float* p, vec x) { simd::store(p, x); }
inline float sum_lanes(vec x) { return xsimd::reduce_add(x); }
#else
using vec = float;
constexpr int kLanes = 1;
inline vec load_vec(const float* p) { return *p; }
inline void store_vec(float* p, vec x) { *p = x; }
inline float sum_lanes(vec x) { return x; }
#endif

volatile float g_one = 1.0f, g_zero = 0.0f, g_sink = 0.0f;

// Elements per step of the streaming loops: 8 vectors (two cache lines per AVX-512 vector pair).
constexpr size_t kStep = size_t(8) * kLanes;

}  // namespace

bool fma_enabled() {
#if K3_FMA
    return true;
#else
    return false;
#endif
}

double probe_mul_add(long iters) {
    const vec m(g_one), a(g_zero);
    vec x[kMulAddChains];
    for (int c = 0; c < kMulAddChains; ++c) x[c] = vec(1.0f + float(c));
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < kMulAddChains; ++c) x[c] = x[c] * m + a;
    vec s = x[0];
    for (int c = 1; c < kMulAddChains; ++c) s = s + x[c];
    g_sink = sum_lanes(s);
    return 2.0 * double(iters) * kMulAddChains * kLanes;
}

double probe_fma(long iters) {
#if K3_FMA
    const vec m(g_one), a(g_zero);
    vec x[kFmaChains];
    for (int c = 0; c < kFmaChains; ++c) x[c] = vec(1.0f + float(c));
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < kFmaChains; ++c) x[c] = xsimd::fma(x[c], m, a);
    vec s = x[0];
    for (int c = 1; c < kFmaChains; ++c) s = s + x[c];
    g_sink = sum_lanes(s);
    return 2.0 * double(iters) * kFmaChains * kLanes;
#else
    (void)iters;
    return 0;
#endif
}

// One pass of each streaming probe, kept out of line: inlined into the loop over passes, the compiler
// may interchange the two loops (g++ -O3 does for read-modify-write) and keep an element in a register
// across passes, which measures nothing.
// The sums live in locals during the pass: `x` may alias `sums` as far as the compiler knows.
[[gnu::noinline]] static void read_pass(const float* x, size_t n, vec* sums) {
    vec acc[8];
    for (int u = 0; u < 8; ++u) acc[u] = sums[u];
    K3_SCALAR_LOOP for (size_t i = 0; i + kStep <= n; i += kStep) for (int u = 0; u < 8; ++u) acc[u] =
        acc[u] + load_vec(x + i + size_t(u) * kLanes);
    for (int u = 0; u < 8; ++u) sums[u] = acc[u];
}

[[gnu::noinline]] static void rmw_pass(float* x, size_t n, vec m) {
    K3_SCALAR_LOOP for (size_t i = 0; i + kStep <= n; i += kStep) for (int u = 0; u < 8; ++u) {
        float* at = x + i + size_t(u) * kLanes;
        store_vec(at, load_vec(at) * m);
    }
}

double probe_read(const float* x, size_t n, int passes) {
    vec acc[8];
    for (auto& v : acc) v = vec(0.0f);
    for (int p = 0; p < passes; ++p) read_pass(x, n, acc);
    vec s = acc[0];
    for (int u = 1; u < 8; ++u) s = s + acc[u];
    g_sink = sum_lanes(s);
    return double(passes) * double(n / kStep * kStep) * 4.0;
}

double probe_rmw(float* x, size_t n, int passes, float c) {
    const vec m(c * g_one);  // not a constant the compiler can see through
    for (int p = 0; p < passes; ++p) rmw_pass(x, n, m);
    return double(passes) * double(n / kStep * kStep) * 8.0;
}

// Vectors per step of the decode-mix probe: each carries two sums (p and o) beside the four constants,
// within the build's registers (32 with AVX-512, 15 or 16 otherwise).
#if K3_SIMD && defined(__AVX512F__)
constexpr int kMixVectors = 4;
#else
constexpr int kMixVectors = 2;
#endif
constexpr size_t kMixStep = size_t(kMixVectors) * kLanes;

// The loaded element is used twice: kept in a register, not loaded again by each multiply (simd.h).
inline vec load_once(const float* p) {
#if K3_SIMD
    return simd::load_shared(p);
#else
    return *p;
#endif
}

// The decay a, key k, decayed key ka and query q of a row stay in registers for the whole pass, where
// the kernel loads them per row (a = q = 1 and k = ka = 0: y = x, so no denormals and no growth). The
// delta u of a column is loaded from `u` every time: a store to x may alias it, so the compiler cannot
// hoist k * u out of the loop, and that load stands for the kernel's second read of the element (it
// reads the state in two passes).
[[gnu::noinline]] static void decode_mix_pass(float* x, size_t n, const float* u, vec* sums) {
    const vec a(g_one), k(g_zero), ka(g_zero), q(g_one);
    vec p[kMixVectors], o[kMixVectors];
    for (int v = 0; v < kMixVectors; ++v) p[v] = vec(0.0f), o[v] = vec(0.0f);
    K3_SCALAR_LOOP for (size_t i = 0; i + kMixStep <= n; i += kMixStep) {
        for (int v = 0; v < kMixVectors; ++v) {
            float* at = x + i + size_t(v) * kLanes;
            const vec s = load_once(at);
            p[v] = p[v] + ka * s;
            const vec y = a * s + k * load_vec(u + size_t(v) * kLanes);
            store_vec(at, y);
            o[v] = o[v] + q * y;
        }
    }
    for (int v = 0; v < kMixVectors; ++v) sums[0] = sums[0] + p[v], sums[1] = sums[1] + o[v];
}

double probe_decode_mix(float* x, size_t n, int passes) {
    alignas(64) float u[kMixStep];
    for (float& e : u) e = g_one;
    vec sums[2] = {vec(0.0f), vec(0.0f)};
    for (int p = 0; p < passes; ++p) decode_mix_pass(x, n, u, sums);
    g_sink = sum_lanes(sums[0] + sums[1]);
    return double(passes) * double(n / kMixStep * kMixStep) * 7.0;
}

float probe_sink() { return g_sink; }

}  // namespace k3::kda
