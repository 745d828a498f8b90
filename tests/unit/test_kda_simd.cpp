// Bitwise identity of the scalar and the xsimd KDA kernels (the proof that native AVX-512/AVX2 and
// WebAssembly SIMD give the same bits is the digest test below, which runs in every build), and the
// vector exp against fmath's exp_f32.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/base/bytes.h"
#include "core/base/crc32c.h"
#include "core/base/fmath.h"
#include "core/base/rng.h"
#include "core/kda/affine.h"
#include "core/kda/chunked.h"
#include "core/kda/recurrent.h"
#include "core/kda/vexp.h"
#include "tests/unit/test_kda_util.h"

using namespace k3;
using namespace k3::kda;

#if K3_SIMD
TEST_CASE("kda exp_v: bit for bit exp_f32 in every lane") {
    using namespace k3::kda::simd;
    std::vector<float> xs = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             88.72283935546875f,
                             88.7228394f,
                             88.7f,
                             -87.33654f,
                             -87.5f,
                             -88.0f,
                             -89.0f,
                             -100.0f,
                             -103.0f,
                             -103.97208f,
                             -103.972084f,
                             -103.97209f,
                             -104.0f,
                             -150.0f,
                             -1e30f,
                             1e30f,
                             1e-30f,
                             -1e-30f,
                             1e-45f,
                             -1e-45f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             0.5f,
                             -0.5f,
                             0.3465736f,
                             -0.3465736f};
    Rng rng(9);
    for (int i = 0; i < 400000; ++i) xs.push_back(float(rng.uniform(-110.0, 95.0)));
    for (int i = 0; i < 100000; ++i) xs.push_back(float(rng.uniform(-2.0, 0.0)));
    uint32_t u = 0x3f000000u;  // a sweep of consecutive floats around -87.3 (normal/subnormal boundary)
    float x0 = -87.0f;
    std::memcpy(&u, &x0, 4);
    for (int i = 0; i < 100000; ++i, ++u) {
        float x;
        std::memcpy(&x, &u, 4);
        xs.push_back(x);
    }
    while (xs.size() % W) xs.push_back(0.0f);
    size_t bad = 0;
    for (size_t i = 0; i < xs.size(); i += W) {
        alignas(64) float out[W];
        store(out, exp_v(load(xs.data() + i)));
        for (int l = 0; l < W; ++l) {
            const float want = exp_f32(xs[i + l]);
            if (std::memcmp(&want, &out[l], 4) != 0 && !(std::isnan(want) && std::isnan(out[l]))) {
                if (bad < 5) INFO("x = " << xs[i + l] << " got " << out[l] << " want " << want);
                ++bad;
            }
        }
    }
    CHECK(bad == 0);
}
#endif

namespace {

// Shapes that exercise vector tails (K, V not multiples of 16 or 4), grouped value heads, and C not
// dividing T.
struct Case {
    Shape s;
    int T, C;
};
const Case kCases[] = {
    {{1, 1, 16, 16}, 1, 1}, {{2, 4, 40, 36}, 77, 16}, {{1, 1, 128, 128}, 70, 64},
    {{3, 3, 7, 5}, 19, 3},  {{2, 2, 64, 72}, 33, 32}, {{1, 2, 33, 129}, 50, 17},
};

}  // namespace

TEST_CASE("kda scalar == SIMD bitwise: recurrent step, sequence, chunked, affine maps") {
    for (const auto& c : kCases) {
        const Shape s = c.s;
        INFO("H " << s.H << " HV " << s.HV << " K " << s.K << " V " << s.V << " T " << c.T << " C " << c.C);
        const TokenData x = random_tokens(s, c.T, 42 + uint64_t(c.T));
        const FloatBuf S0 = random_state(s, 7);
        const float scale = default_scale(s.K);
        const size_t no = size_t(c.T) * s.v_row();

        FloatBuf Sa = S0, Sb = S0, oa(no), ob(no);
        for (int t = 0; t < c.T; ++t) {
            const Tokens r = x.view().slice(s, t, 1);
            recurrent_step(s, Sa.data(), r.q, r.k, r.v, r.g, r.beta, scale, oa.data() + size_t(t) * s.v_row(),
                           Impl::scalar);
            recurrent_step(s, Sb.data(), r.q, r.k, r.v, r.g, r.beta, scale, ob.data() + size_t(t) * s.v_row(),
                           Impl::simd);
        }
        CHECK(bitwise_equal(Sa, Sb));
        CHECK(bitwise_equal(oa, ob));

        FloatBuf Sc = S0, Sd = S0, oc(no), od(no);
        recurrent(s, Sc.data(), x.view(), scale, oc.data(), Impl::scalar);
        recurrent(s, Sd.data(), x.view(), scale, od.data(), Impl::simd);
        CHECK(bitwise_equal(Sc, Sa));  // the sequence form is T steps, bit for bit
        CHECK(bitwise_equal(oc, oa));
        CHECK(bitwise_equal(Sd, Sa));
        CHECK(bitwise_equal(od, oa));

        FloatBuf Se = S0, Sf = S0, oe(no), of(no);
        chunked(s, Se.data(), x.view(), scale, c.C, oe.data(), Impl::scalar);
        chunked(s, Sf.data(), x.view(), scale, c.C, of.data(), Impl::simd);
        CHECK(bitwise_equal(Se, Sf));
        CHECK(bitwise_equal(oe, of));

        const size_t nm = size_t(s.HV) * s.K * s.K;
        FloatBuf M1(nm), B1(s.state_floats()), M2(nm), B2(s.state_floats()), o01(no), o02(no),
            e1(size_t(c.T) * s.g_row()), e2(size_t(c.T) * s.g_row());
        segment_map(s, x.view(), scale, c.C, M1.data(), B1.data(), o01.data(), e1.data(), Impl::scalar);
        segment_map(s, x.view(), scale, c.C, M2.data(), B2.data(), o02.data(), e2.data(), Impl::simd);
        CHECK(bitwise_equal(M1, M2));
        CHECK(bitwise_equal(B1, B2));
        CHECK(bitwise_equal(o01, o02));
        CHECK(bitwise_equal(e1, e2));

        FloatBuf Ma(nm), Ba(s.state_floats()), Mb(nm), Bb(s.state_floats());
        affine_compose(s, M1.data(), B1.data(), M1.data(), S0.data(), Ma.data(), Ba.data(), Impl::scalar);
        affine_compose(s, M1.data(), B1.data(), M1.data(), S0.data(), Mb.data(), Bb.data(), Impl::simd);
        CHECK(bitwise_equal(Ma, Mb));
        CHECK(bitwise_equal(Ba, Bb));
        FloatBuf Sg(s.state_floats()), Sh(s.state_floats());
        affine_apply(s, M1.data(), B1.data(), S0.data(), Sg.data(), Impl::scalar);
        affine_apply(s, M1.data(), B1.data(), S0.data(), Sh.data(), Impl::simd);
        CHECK(bitwise_equal(Sg, Sh));
        FloatBuf og(no), oh(no);
        affine_outputs(s, c.T, o01.data(), e1.data(), S0.data(), og.data(), Impl::scalar);
        affine_outputs(s, c.T, o01.data(), e1.data(), S0.data(), oh.data(), Impl::simd);
        CHECK(bitwise_equal(og, oh));
    }
}

TEST_CASE("kda scalar == SIMD bitwise under extreme gates (underflow, subnormals, alpha = 0 and 1)") {
    const Shape s{2, 2, 24, 20};
    TokenData x = random_tokens(s, 41, 5);
    Rng r(3);
    for (auto& g : x.g) {
        const double u = r.uniform();
        g = u < 0.1 ? 0.0f : u < 0.2 ? -std::numeric_limits<float>::infinity() : float(-50.0 * r.uniform());
    }
    const FloatBuf S0 = random_state(s, 8);
    for (int C : {1, 5, 16}) {
        FloatBuf Sa = S0, Sb = S0, oa(size_t(x.T) * s.v_row()), ob(oa.size());
        chunked(s, Sa.data(), x.view(), 0.2f, C, oa.data(), Impl::scalar);
        chunked(s, Sb.data(), x.view(), 0.2f, C, ob.data(), Impl::simd);
        CHECK(bitwise_equal(Sa, Sb));
        CHECK(bitwise_equal(oa, ob));
    }
    FloatBuf Sa = S0, Sb = S0, oa(size_t(x.T) * s.v_row()), ob(oa.size());
    recurrent(s, Sa.data(), x.view(), 0.2f, oa.data(), Impl::scalar);
    recurrent(s, Sb.data(), x.view(), 0.2f, ob.data(), Impl::simd);
    CHECK(bitwise_equal(Sa, Sb));
    CHECK(bitwise_equal(oa, ob));
}

// ---- determinism digest -----------------------------------------------------------------------------
// CRC-32C of the bits of a fixed kernel run: recurrent, chunked, segment map, composition, application
// and output fix-up on seeded inputs, with shapes that exercise every vector tail. The constant was
// computed once and is checked in: this test passing natively (AVX-512 or AVX2), in the WebAssembly SIMD
// build and in the K3_SIMD=OFF builds is what shows that all of them produce the same bits.
static uint32_t kda_digest(Impl impl) {
    uint32_t crc = 0;
    auto add = [&](const FloatBuf& b) { crc = crc32c(b.data(), b.size() * sizeof(float), crc); };
    for (const auto& c : kCases) {
        const Shape s = c.s;
        InputRecipe rec;
        rec.gate = c.T % 2 ? GateRecipe::model : GateRecipe::logsigmoid;
        rec.gate_strength = c.T % 3 ? 1.0 : 4.0;
        const TokenData x = random_tokens(s, c.T, 1234 + uint64_t(c.T), rec);
        const FloatBuf S0 = random_state(s, 99);
        const float scale = default_scale(s.K);
        const size_t no = size_t(c.T) * s.v_row();
        FloatBuf S = S0, o(no);
        recurrent(s, S.data(), x.view(), scale, o.data(), impl);
        add(S), add(o);
        S = S0;
        chunked(s, S.data(), x.view(), scale, c.C, o.data(), impl);
        add(S), add(o);
        const size_t nm = size_t(s.HV) * s.K * s.K;
        FloatBuf M(nm), B(s.state_floats()), o0(no), eo(size_t(c.T) * s.g_row());
        segment_map(s, x.view(), scale, c.C, M.data(), B.data(), o0.data(), eo.data(), impl);
        add(M), add(B), add(o0), add(eo);
        FloatBuf M2(nm), B2(s.state_floats());
        affine_compose(s, M.data(), B.data(), M.data(), B.data(), M2.data(), B2.data(), impl);
        add(M2), add(B2);
        affine_apply(s, M.data(), B.data(), S0.data(), S.data(), impl);
        add(S);
        affine_outputs(s, c.T, o0.data(), eo.data(), S0.data(), o.data(), impl);
        add(o);
    }
    return crc;
}

TEST_CASE("kda determinism digest: the same bits in every build") {
    const uint32_t scalar = kda_digest(Impl::scalar), simd = kda_digest(Impl::simd);
    CHECK(scalar == simd);
    constexpr uint32_t kExpected = 0x40f00421u;
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", unsigned(simd));
    INFO("digest " << hex << " (build " << K3_BUILD_NAME << ", arch " << std::string(simd_arch()) << ")");
    CHECK(simd == kExpected);
}
