// Kernels of the runnable model (core/model): the bf16 projection kernel and the attention vector
// kernels, scalar against xsimd (same bits), batch independence, and against fp64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/base/bf16.h"
#include "core/base/bytes.h"
#include "core/base/fmath.h"
#include "core/base/rng.h"
#include "core/model/attn_res.h"
#include "core/model/matmul.h"
#include "core/model/vec_kernels.h"
#include "core/model/weights.h"

using namespace k3;
using namespace k3::model;

namespace {

Matrix random_matrix(int in, int out, uint64_t seed) {
    Matrix m(in, out);
    Rng r(seed);
    for (int i = 0; i < in; ++i)
        for (int o = 0; o < out; ++o) m.set(i, o, float(r.normal()));
    return m;
}

}  // namespace

TEST_CASE("model kernels: bf16 pair layout stores and widens exactly") {
    Matrix m(5, 3);  // odd in: the last pair's high half stays zero
    Rng r(3);
    std::vector<float> v(15);
    for (int i = 0; i < 5; ++i)
        for (int o = 0; o < 3; ++o) m.set(i, o, v[size_t(i) * 3 + o] = float(r.normal()));
    for (int i = 0; i < 5; ++i)
        for (int o = 0; o < 3; ++o) {
            const float x = v[size_t(i) * 3 + o];
            CHECK(m.at(i, o) == bf16_hi(uint32_t(f32_to_bf16(x)) << 16));
            CHECK(std::fabs(m.at(i, o) - x) <=
                  std::fabs(x) * 0x1p-8f);  // half a bf16 ulp (8 significant bits)
        }
    for (int o = 0; o < 3; ++o) CHECK((m.pairs[size_t(2) * 3 + o] >> 16) == 0u);
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);      // tie to even (down)
    CHECK(f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);  // tie to even (up)
    CHECK(f32_to_bf16(-2.5f) == 0xc020);
}

TEST_CASE("model kernels: matmul scalar and simd give the same bits, row by row") {
    struct Case {
        int rows, in, out;
    };
    for (const Case c : {Case{1, 256, 768}, Case{1, 37, 70}, Case{5, 33, 70}, Case{4, 1, 17},
                         Case{9, 64, 512}, Case{3, 7, 3}, Case{8, 256, 4}, Case{13, 128, 160}}) {
        CAPTURE(c.rows);
        CAPTURE(c.in);
        CAPTURE(c.out);
        const Matrix W = random_matrix(c.in, c.out, uint64_t(c.in * 1000 + c.out));
        const int ldx = c.in + 3, ldy = c.out + 5;  // strided rows, as the MLA stages use them
        std::vector<float> x(size_t(c.rows) * ldx);
        Rng(11).fill_normal(x.data(), x.size());
        std::vector<float> ys(size_t(c.rows) * ldy, -1.0f), yv = ys;
        matmul(x.data(), c.rows, ldx, W.view(), ys.data(), ldy, Impl::scalar);
        matmul(x.data(), c.rows, ldx, W.view(), yv.data(), ldy, Impl::simd);
        CHECK(bitwise_equal(ys, yv));
        // A row alone gives the bits it gets in the batch (what makes split prefill exact).
        for (int r = 0; r < c.rows; ++r) {
            std::vector<float> one(size_t(c.out));
            matmul(x.data() + size_t(r) * ldx, 1, ldx, W.view(), one.data(), c.out, Impl::simd);
            CHECK(bitwise_equal(one.data(), yv.data() + size_t(r) * ldy, size_t(c.out)));
        }
        // The padding between rows is not written.
        for (int r = 0; r < c.rows; ++r)
            for (int p = c.out; p < ldy; ++p) CHECK(yv[size_t(r) * ldy + p] == -1.0f);
        // Against fp64 with the same (bf16-valued) weights.
        double num = 0, den = 0;
        for (int r = 0; r < c.rows; ++r)
            for (int o = 0; o < c.out; ++o) {
                double acc = 0;
                for (int i = 0; i < c.in; ++i) acc += double(x[size_t(r) * ldx + i]) * double(W.at(i, o));
                num += (acc - yv[size_t(r) * ldy + o]) * (acc - yv[size_t(r) * ldy + o]);
                den += acc * acc;
            }
        CHECK(std::sqrt(num / den) < 1e-6);
    }
}

TEST_CASE("model kernels: dot16 and axpy, scalar and simd give the same bits") {
    Rng r(5);
    for (int n : {0, 1, 3, 15, 16, 17, 31, 160, 161, 288}) {
        CAPTURE(n);
        std::vector<float> a(size_t(n) + 1), b(size_t(n) + 1), y(size_t(n) + 1), y2;
        r.fill_normal(a.data(), a.size());
        r.fill_normal(b.data(), b.size());
        r.fill_normal(y.data(), y.size());
        const float s = dot16_scalar(a.data(), b.data(), n), v = dot16(a.data(), b.data(), n, Impl::simd);
        CHECK(std::memcmp(&s, &v, 4) == 0);
        double ref = 0, mag = 0;
        for (int i = 0; i < n; ++i)
            ref += double(a[size_t(i)]) * b[size_t(i)], mag += std::fabs(double(a[size_t(i)]) * b[size_t(i)]);
        CHECK(std::fabs(v - ref) <= 1e-6 * mag + 1e-30);
        y2 = y;
        axpy_scalar(0.37f, a.data(), y.data(), n);
        axpy(0.37f, a.data(), y2.data(), n, Impl::simd);
        CHECK(bitwise_equal(y, y2));
    }
}

TEST_CASE(
    "model kernels: silu, silu_mul and situ_mul, scalar and simd give the bits of silu_f32 / situ_f32") {
    Rng r(6);
    std::vector<float> x(1003);
    r.fill_normal(x.data(), x.size(), 8.0f);
    const float edge[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 20.0f,   -20.0f, 88.0f,
                          -88.0f, 89.0f, -89.0f, 104.0f,  -104.0f, 1e30f,  -1e30f};
    std::copy(std::begin(edge), std::end(edge), x.begin());
    std::vector<float> b(x.size());
    r.fill_normal(b.data(), b.size());
    std::vector<float> want(x.size()), want_mul(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = silu_f32(x[i]), want_mul[i] = silu_f32(x[i]) * b[i];
    for (Impl impl : {Impl::scalar, Impl::simd}) {
        std::vector<float> s = x, m = x;
        silu(s.data(), s.size(), impl);
        silu_mul(m.data(), b.data(), m.size(), impl);
        CHECK(bitwise_equal(s, want));
        CHECK(bitwise_equal(m, want_mul));
    }
    // SiTU: the SIMD tanh and sigmoid give situ_f32's bits in every lane (both tanh branches, +-0, huge).
    std::vector<float> want_situ(x.size());
    for (size_t i = 0; i < x.size(); ++i) want_situ[i] = situ_f32(x[i], 20.0f * b[i], 4.0f, 25.0f);
    std::vector<float> u(b.size());
    for (size_t i = 0; i < b.size(); ++i) u[i] = 20.0f * b[i];
    for (Impl impl : {Impl::scalar, Impl::simd}) {
        std::vector<float> m = x;
        situ_mul(m.data(), u.data(), m.size(), 4.0f, 25.0f, impl);
        CHECK(bitwise_equal(m, want_situ));
    }
}

// The attention-residual mix (attn_res.h): no sealed block gives the prefix itself; otherwise a convex
// combination of the sources with softmax weights of logit_i = (v_i . (norm * proj)) / rms(v_i).
TEST_CASE("model kernels: attention residuals mix the sources by a softmax over depth") {
    const int d = 8, T = 2, n = 2;
    Rng r(31);
    std::vector<float> blocks(size_t(T) * n * d), prefix(size_t(T) * d), out(prefix.size());
    r.fill_normal(blocks.data(), blocks.size());
    r.fill_normal(prefix.data(), prefix.size());
    AttnResWeights w{FloatBuf(size_t(d)), FloatBuf(size_t(d))};
    r.fill_normal(w.norm.data(), size_t(d));
    r.fill_normal(w.proj.data(), size_t(d));
    attn_res_mix(blocks.data(), 0, size_t(n) * d, prefix.data(), T, d, w, 1e-5f, out.data());
    CHECK(bitwise_equal(out, prefix));
    attn_res_mix(blocks.data(), n, size_t(n) * d, prefix.data(), T, d, w, 1e-5f, out.data());
    for (int t = 0; t < T; ++t) {
        double logit[n + 1], z = 0, m = -1e300;
        auto src = [&](int s) { return s < n ? &blocks[(size_t(t) * n + s) * d] : &prefix[size_t(t) * d]; };
        for (int s = 0; s <= n; ++s) {
            double ss = 0, dot = 0;
            for (int i = 0; i < d; ++i)
                ss += double(src(s)[i]) * src(s)[i], dot += double(src(s)[i]) * w.norm[i] * w.proj[i];
            logit[s] = dot / std::sqrt(ss / d + 1e-5);
            m = std::max(m, logit[s]);
        }
        for (int s = 0; s <= n; ++s) z += std::exp(logit[s] - m);
        for (int i = 0; i < d; ++i) {
            double want = 0;
            for (int s = 0; s <= n; ++s) want += std::exp(logit[s] - m) / z * src(s)[i];
            CHECK(std::fabs(out[size_t(t) * d + i] - want) < 1e-5);
        }
    }
    CHECK(attn_res_blocks_before(0, 3) == 0);  // vLLM's prev_valid_blocks = ceil(l / B)
    CHECK(attn_res_blocks_before(3, 3) == 1);
    CHECK(attn_res_blocks_before(4, 3) == 2);
    CHECK(attn_res_blocks_before(9, 3) == 3);    // k3-tiny's final mix: 3 blocks
    CHECK(attn_res_blocks_before(93, 12) == 8);  // K3's
}
