// xsimd set-up shared by the SIMD kernels (internal to core/kda).
//
// Every SIMD kernel vectorises along an output dimension ("axpy form"): lane j of a vector only ever
// combines values of column j, in the same order as the scalar loop. No horizontal reductions, no
// FMA (the build has -ffp-contract=off and we never call xsimd::fma), so a kernel gives the same bits
// at any vector width: AVX-512 (16 lanes), AVX2 (8), WebAssembly SIMD (4) and the scalar kernels.
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

}  // namespace k3::kda::simd
#endif
