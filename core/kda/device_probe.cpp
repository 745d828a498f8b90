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

float probe_sink() { return g_sink; }

}  // namespace k3::kda
