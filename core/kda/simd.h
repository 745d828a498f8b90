// xsimd set-up shared by the SIMD kernels (internal to core/kda).
//
// Every SIMD kernel vectorises along an output dimension ("axpy form"): lane j of a vector only ever
// combines values of column j, in the same order as the scalar loop. No horizontal reductions, no
// FMA (the build has -ffp-contract=off), so a kernel gives the same bits at any vector width: AVX-512
// (16 lanes), AVX2 (8), WebAssembly SIMD (4) and the scalar kernels. The one exception is the FMA
// variant of a kernel (`*_fma`, Impl::fma, builds with K3_FMA only): it calls xsimd::fma on purpose
// and says that it is not bit-exact.
#pragma once

#if K3_SIMD
#if defined(__GNUC__) && !defined(__clang__)
// g++ 12 warns about _mm512_undefined_ps() inside its own AVX-512 intrinsics (min, max, floor,
// conversions) wherever they are inlined; a known false positive, silenced for the SIMD kernel files.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <xsimd/xsimd.hpp>

namespace k3::kda::simd {

using arch = xsimd::default_arch;
using vf = xsimd::batch<float, arch>;
using vi = xsimd::batch<int32_t, arch>;
using vb = xsimd::batch_bool<float, arch>;
inline constexpr int W = int(vf::size);

inline vf load(const float* p) { return vf::load_unaligned(p); }
inline void store(float* p, vf x) { x.store_unaligned(p); }

// A vector several operations use, kept in a register. Otherwise g++ folds the load that produced it
// into every instruction that uses it (a memory operand looks free to it), which in the register-blocked
// products doubles the loads per multiply-add and costs a fifth of their speed on Zen 5. The empty asm
// changes no value, so no bits either; WebAssembly has no memory operands to fold into.
template <class V>
inline void keep_in_register([[maybe_unused]] V& x) {
#if defined(__x86_64__) || defined(__i386__)
    asm("" : "+v"(x.data));
#endif
}

inline vf load_shared(const float* p) {
    vf x = load(p);
    keep_in_register(x);
    return x;
}

// a + b * c and a - b * c, rounded twice (the bit-exact kernels) or once (F: the FMA variant).
template <bool F>
inline vf madd(vf a, vf b, vf c) {
    if constexpr (F)
        return xsimd::fma(b, c, a);
    else
        return a + b * c;
}
template <bool F>
inline vf msub(vf a, vf b, vf c) {
    if constexpr (F)
        return xsimd::fnma(b, c, a);
    else
        return a - b * c;
}

}  // namespace k3::kda::simd
#endif
