#include "core/kda/affine.h"

#include "core/kda/chunked.h"

namespace k3::kda {

AffineMap affine_identity(const Shape& s) {
    AffineMap a{s, FloatBuf(size_t(s.HV) * s.K * s.K, 0.0f), FloatBuf(s.state_floats(), 0.0f)};
    for (int h = 0; h < s.HV; ++h)
        for (int i = 0; i < s.K; ++i) a.M[(size_t(h) * s.K + i) * s.K + i] = 1.0f;
    return a;
}

void segment_map(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                 float* eo, Impl impl) {
#if K3_SIMD
    if (impl != Impl::scalar) return segment_map_simd(s, x, scale, C, M, B, o0, eo);
#endif
    segment_map_scalar(s, x, scale, C, M, B, o0, eo);
}

size_t segment_map_units(const Shape& s, int T, int C) { return chunked_units(s, T, C); }

void segment_map_part(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                      float* eo, size_t first, size_t count, Impl impl) {
#if K3_SIMD
    if (impl != Impl::scalar) return segment_map_part_simd(s, x, scale, C, M, B, o0, eo, first, count);
#endif
    segment_map_part_scalar(s, x, scale, C, M, B, o0, eo, first, count);
}

AffineMap segment_map(const Shape& s, const Tokens& x, float scale, int C, Impl impl) {
    AffineMap a{s, FloatBuf(size_t(s.HV) * s.K * s.K), FloatBuf(s.state_floats())};
    segment_map(s, x, scale, C, a.M.data(), a.B.data(), nullptr, nullptr, impl);
    return a;
}

void affine_compose(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                    float* M, float* B, Impl impl) {
#if K3_SIMD
    if (impl != Impl::scalar) return affine_compose_simd(s, M2, B2, M1, B1, M, B);
#endif
    affine_compose_scalar(s, M2, B2, M1, B1, M, B);
}

AffineMap compose(const AffineMap& second, const AffineMap& first, Impl impl) {
    AffineMap a{first.shape, FloatBuf(first.M.size()), FloatBuf(first.B.size())};
    affine_compose(first.shape, second.M.data(), second.B.data(), first.M.data(), first.B.data(), a.M.data(),
                   a.B.data(), impl);
    return a;
}

void affine_apply(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out,
                  Impl impl) {
#if K3_SIMD
    if (impl != Impl::scalar) return affine_apply_simd(s, M, B, S_in, S_out);
#endif
    affine_apply_scalar(s, M, B, S_in, S_out);
}

void affine_outputs(const Shape& s, int T, const float* o0, const float* eo, const float* S_in, float* o,
                    Impl impl) {
#if K3_SIMD
    if (impl != Impl::scalar) return affine_outputs_simd(s, T, o0, eo, S_in, o);
#endif
    affine_outputs_scalar(s, T, o0, eo, S_in, o);
}

}  // namespace k3::kda
