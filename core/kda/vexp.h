// exp over a SIMD vector, bit for bit the scalar exp_f32 of core/base/fmath.h in every lane
// (tests/unit/test_kda_simd.cpp checks this over edge cases and millions of arguments).
// Same Cody-Waite reduction, same polynomial, same two-step scaling of the subnormal range; the
// special cases (NaN, overflow, underflow) are blended in at the end, only when a lane needs them.
// Internal to core/kda.
#pragma once

#include "core/kda/simd.h"

#if K3_SIMD
#include <limits>

namespace k3::kda::simd {

inline vf exp_v(vf x) {
    const vf hi(88.72283935546875f), lo(-103.972084045410f);
    const vf xc = xsimd::min(xsimd::max(x, lo), hi);  // keep the arithmetic finite; blended below
    const vf n = xsimd::floor(xc * vf(1.44269504088896341f) + vf(0.5f));
    const vf r = (xc - n * vf(0.693145751953125f)) - n * vf(1.428606765330187045e-06f);
    vf p(1.0f / 5040.0f);
    p = p * r + vf(1.0f / 720.0f);
    p = p * r + vf(1.0f / 120.0f);
    p = p * r + vf(1.0f / 24.0f);
    p = p * r + vf(1.0f / 6.0f);
    p = p * r + vf(0.5f);
    p = p * r + vf(1.0f);
    p = p * r + vf(1.0f);
    // n is an integer in [-150, 128] (NaN where x is, if the build's max lets NaN through): adding
    // 1.5 * 2^23 leaves it in the low bits exactly, cheaper than a conversion (WebAssembly's saturating
    // one is a long sequence); a NaN becomes an integer far outside [-125, 127].
    const vi ni = xsimd::bitwise_cast<int32_t>(n + vf(0x1.8p23f)) - vi(0x4B400000);
    const auto lo_i = ni<vi(-125), hi_i = ni> vi(127);
    auto pow2 = [](vi e) { return xsimd::bitwise_cast<float>((e + vi(127)) << 23); };  // a normal e
    if (!xsimd::any(lo_i || hi_i)) return p * pow2(ni);  // every lane normal, none NaN or clamped
    // exp_f32: p * 2^n, or (p * 2^(n+60)) * 2^-60 below the normal range, or (p * 2^(n-1)) * 2 above.
    const vi e1 = xsimd::select(lo_i, ni + vi(60), xsimd::select(hi_i, ni - vi(1), ni));
    const vf f2 = xsimd::select(xsimd::batch_bool_cast<float>(lo_i), vf(0x1p-60f),
                                xsimd::select(xsimd::batch_bool_cast<float>(hi_i), vf(2.0f), vf(1.0f)));
    vf res = (p * pow2(e1)) * f2;
    res = xsimd::select(x > hi, vf(std::numeric_limits<float>::infinity()), res);
    res = xsimd::select(x < lo, vf(0.0f), res);
    return xsimd::select(x != x, x, res);
}

}  // namespace k3::kda::simd
#endif
