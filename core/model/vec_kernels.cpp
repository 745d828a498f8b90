// Scalar and xsimd versions of vec_kernels.h side by side (each is a few lines).
#include "core/model/vec_kernels.h"

#include "core/base/fmath.h"

#if K3_SIMD
#include "core/kda/simd.h"
#include "core/kda/vexp.h"
#endif

namespace k3::model {

namespace {

float combine16(float* p) {
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) p[j] = p[j] + p[j + w];
    return p[0];
}

}  // namespace

float dot16_scalar(const float* a, const float* b, int n) {
    float p[16] = {};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) p[j] = p[j] + a[i + j] * b[i + j];
    for (int j = 0; i < n; ++i, ++j) p[j] = p[j] + a[i] * b[i];
    return combine16(p);
}

void axpy_scalar(float a, const float* x, float* y, int n) {
    for (int i = 0; i < n; ++i) y[i] = y[i] + a * x[i];
}

void silu_scalar(float* x, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = silu_f32(x[i]);
}

void silu_mul_scalar(float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; ++i) a[i] = silu_f32(a[i]) * b[i];
}

void situ_mul_scalar(float* a, const float* b, size_t n, float beta, float beta_lin) {
    for (size_t i = 0; i < n; ++i) a[i] = situ_f32(a[i], b[i], beta, beta_lin);
}

#if K3_SIMD
namespace {
using namespace kda::simd;

// tanh_f32 lane by lane: both branches computed, the series one kept below |x| = 0.5.
inline vf tanh_v(vf x) {
    const float* c = fm_detail::kTanhSeriesF32;
    const vf a = xsimd::abs(x), x2 = x * x;
    vf p(c[0]);
    for (int i = 1; i < 8; ++i) p = p * x2 + vf(c[i]);
    const vf t = vf(1.0f) - vf(2.0f) / (exp_v(vf(2.0f) * a) + vf(1.0f));
    const vf r = xsimd::select(a < vf(0.5f), x * p, xsimd::select(x < vf(0.0f), -t, t));
    return xsimd::select(x != x, x, r);
}

void situ_mul_simd(float* a, const float* b, size_t n, float beta, float beta_lin) {
    const vf vb_(beta), vl(beta_lin);
    size_t i = 0;
    for (; i + W <= n; i += W) {
        const vf g = load(a + i), u = load(b + i);
        const vf sg = vf(1.0f) / (vf(1.0f) + exp_v(-g));
        store(a + i, (vb_ * tanh_v(g / vb_)) * sg * (vl * tanh_v(u / vl)));
    }
    for (; i < n; ++i) a[i] = situ_f32(a[i], b[i], beta, beta_lin);
}

// silu_f32 lane by lane: x * (1 / (1 + exp(-x))).
inline vf silu_v(vf x) { return x * (vf(1.0f) / (vf(1.0f) + exp_v(-x))); }

void silu_simd(float* x, size_t n) {
    size_t i = 0;
    for (; i + W <= n; i += W) store(x + i, silu_v(load(x + i)));
    for (; i < n; ++i) x[i] = silu_f32(x[i]);
}

void silu_mul_simd(float* a, const float* b, size_t n) {
    size_t i = 0;
    for (; i + W <= n; i += W) store(a + i, silu_v(load(a + i)) * load(b + i));
    for (; i < n; ++i) a[i] = silu_f32(a[i]) * b[i];
}
static_assert(W <= 16 && 16 % W == 0, "dot16 needs a vector width that divides 16");
constexpr int kParts = 16 / W;

float dot16_simd(const float* a, const float* b, int n) {
    vf acc[kParts];
    for (int v = 0; v < kParts; ++v) acc[v] = vf(0.0f);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int v = 0; v < kParts; ++v) acc[v] = acc[v] + load(a + i + v * W) * load(b + i + v * W);
    alignas(64) float p[16];
    for (int v = 0; v < kParts; ++v) store(p + v * W, acc[v]);
    for (int j = 0; i < n; ++i, ++j) p[j] = p[j] + a[i] * b[i];
    return combine16(p);
}

void axpy_simd(float a, const float* x, float* y, int n) {
    const vf va(a);
    int i = 0;
    for (; i + W <= n; i += W) store(y + i, load(y + i) + va * load(x + i));
    for (; i < n; ++i) y[i] = y[i] + a * x[i];
}
}  // namespace
#endif

float dot16(const float* a, const float* b, int n, Impl impl) {
#if K3_SIMD
    if (impl == Impl::simd) return dot16_simd(a, b, n);
#endif
    return dot16_scalar(a, b, n);
}

void silu(float* x, size_t n, Impl impl) {
#if K3_SIMD
    if (impl == Impl::simd) return silu_simd(x, n);
#endif
    silu_scalar(x, n);
}

void silu_mul(float* a, const float* b, size_t n, Impl impl) {
#if K3_SIMD
    if (impl == Impl::simd) return silu_mul_simd(a, b, n);
#endif
    silu_mul_scalar(a, b, n);
}

void situ_mul(float* a, const float* b, size_t n, float beta, float beta_lin, Impl impl) {
#if K3_SIMD
    if (impl == Impl::simd) return situ_mul_simd(a, b, n, beta, beta_lin);
#endif
    situ_mul_scalar(a, b, n, beta, beta_lin);
}

void axpy(float a, const float* x, float* y, int n, Impl impl) {
#if K3_SIMD
    if (impl == Impl::simd) return axpy_simd(a, x, y, n);
#endif
    axpy_scalar(a, x, y, n);
}

}  // namespace k3::model
