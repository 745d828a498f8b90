// The device probes and the roofline of core/kda/device.h, and the FMA variants against fp64
// (recurrent.h, chunked.h). Timing itself is never tested: only the work the probes report, the
// roofline arithmetic, and the accuracy of the kernels that are not bit-exact.
#include <doctest/doctest.h>

#include <cmath>

#include "core/kda/chunked.h"
#include "core/kda/device.h"
#include "core/kda/golden.h"
#include "core/kda/inputs.h"
#include "core/kda/kernel_work.h"
#include "core/kda/recurrent.h"
#include "core/kda/reference.h"

using namespace k3::kda;

TEST_CASE("device probes report the work they did and leave a buffer multiplied by 1 as it was") {
    CHECK(probe_mul_add(10) == doctest::Approx(2.0 * 10 * kMulAddChains * simd_width()));
    CHECK(probe_fma(10) ==
          (fma_enabled() ? doctest::Approx(2.0 * 10 * kFmaChains * simd_width()) : doctest::Approx(0)));
    FloatBuf x(4096);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7);
    CHECK(probe_read(x.data(), x.size(), 3) == doctest::Approx(3.0 * 4096 * 4));
    CHECK(probe_sink() == doctest::Approx(3.0 * (4096 / 7 * 21)));  // 4096 = 7 * 585 + 1; the last is 0
    CHECK(probe_rmw(x.data(), x.size(), 2, 1.0f) == doctest::Approx(2.0 * 4096 * 8));
    CHECK(probe_decode_mix(x.data(), x.size(), 2) == doctest::Approx(2.0 * 4096 * 7));
    CHECK(probe_sink() == doctest::Approx(2.0 * (4096 / 7 * 21)));  // o sums y = x over every element
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == float(i % 7));
}

TEST_CASE("roofline: the lower of compute and bandwidth binds, FMA only for fused kernels") {
    DeviceLimits d;
    d.mul_add_flops = 100e9, d.fma_flops = 150e9;
    d.rmw_bytes = {400e9, 200e9, 40e9, 300e9, 0};
    d.read_bytes = {300e9, 150e9, 30e9, 250e9, 0};
    const KernelWork decode{.flop = 1e5, .bytes = 1e5, .level = MemLevel::memory, .rmw = true};
    KernelLimit k = roofline_limit(d, decode);
    CHECK(!k.compute_binds);
    CHECK(k.units_per_s == doctest::Approx(40e9 / 1e5));
    CHECK(k.binding == "memory read-modify-write");
    KernelWork in_l1 = decode;
    in_l1.level = MemLevel::l1;
    k = roofline_limit(d, in_l1);
    CHECK(k.compute_binds);
    CHECK(k.units_per_s == doctest::Approx(1e6));
    CHECK(k.binding == "multiply+add");
    k = roofline_limit(d, fused(in_l1));
    CHECK(k.units_per_s == doctest::Approx(1.5e6));
    CHECK(k.binding == "FMA");
    d.fma_flops = 0;  // a build without FMA: a fused kernel is held to multiply+add
    CHECK(roofline_limit(d, fused(in_l1)).units_per_s == doctest::Approx(1e6));
    // the level nearest a working set by ratio
    d.level_bytes[size_t(MemLevel::working_set)] = 1 << 20;
    CHECK(level_for(d, 1 << 20) == MemLevel::working_set);
    CHECK(level_for(d, 200 << 10) == MemLevel::l2);
    CHECK(level_for(d, 1e9) == MemLevel::memory);
}

TEST_CASE("kernel work: the decode step moves its state once, the chunked kernel once per chunk") {
    const Shape s{2, 2, 128, 128};
    const KernelWork dec = decode_step_work(s, MemLevel::working_set);
    CHECK(dec.flop == 7.0 * 128 * 128 + 2 * 128 + 128);
    CHECK(dec.bytes == 8.0 * 128 * 128);
    const KernelWork ch = chunked_work(s, 64, MemLevel::working_set);
    CHECK(ch.bytes == doctest::Approx(dec.bytes / 64));
    CHECK(ch.flop == doctest::Approx(2 * chunk_unit_madds(s, 64) / 64));
    CHECK(ch.intensity() > 10 * dec.intensity());
}

// The FMA variants are not bit-exact, so they are held to fp64 like the fp32 kernels (kda.md §7).
TEST_CASE("FMA variants: within 1e-5 relative RMS of fp64 (builds with FMA)") {
    if (!fma_enabled()) return;
    const Shape s{2, 4, 64, 96};
    const int T = 100;
    const TokenData x = random_tokens(s, T, 11);
    const FloatBuf S0 = random_state(s, 12);
    const float scale = default_scale(s.K);
    std::vector<double> ref_S(S0.begin(), S0.end()), ref_o(size_t(T) * s.v_row());
    ref::recurrent(s, ref_S.data(), x.view(), double(scale), ref_o.data());
    auto rel = [&](const FloatBuf& o, const FloatBuf& S) {
        ErrorStats e = compare(o.data(), ref_o.data(), o.size());
        return e.add(compare(S.data(), ref_S.data(), S.size())).rel_rms();
    };
    FloatBuf S = S0, o(size_t(T) * s.v_row());
    recurrent(s, S.data(), x.view(), scale, o.data(), Impl::fma);
    CHECK(rel(o, S) < 1e-5);
    FloatBuf S2 = S0, o2(o.size());
    for (int t = 0; t < T; ++t) {
        const Tokens r = x.view().slice(s, t, 1);
        recurrent_step(s, S2.data(), r.q, r.k, r.v, r.g, r.beta, scale, o2.data() + size_t(t) * s.v_row(),
                       Impl::fma);
    }
    CHECK(rel(o2, S2) < 1e-5);
    for (int C : {1, 16, 64}) {
        FloatBuf S3 = S0, o3(o.size());
        chunked(s, S3.data(), x.view(), scale, C, o3.data(), Impl::fma);
        CHECK_MESSAGE(rel(o3, S3) < 1e-5, "C = " << C);
    }
}
