// The chunked kernel and the segment map over the scalar primitives.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#include "core/kda/affine.h"
#include "core/kda/affine_ops.h"
#include "core/kda/chunk_driver.h"
#include "core/kda/chunk_ops.h"
#include "core/kda/chunked.h"

namespace k3::kda {

void chunked_scalar(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o) {
    if (x.T <= 0) return;
    ChunkDriver<ScalarOps>(s, C).prefill(S, x, scale, o);
}

size_t chunked_scratch_floats(const Shape& s, int C) {
    return ChunkScratch(s, ChunkScratch::clamped(C)).total;
}

void segment_map_scalar(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                        float* eo) {
    ChunkDriver<ScalarOps>(s, C).segment(x, scale, M, B, o0, eo);
}

void affine_compose_scalar(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                           float* M, float* B) {
    AffineOps<ScalarOps>::compose(s, M2, B2, M1, B1, M, B);
}

void affine_apply_scalar(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out) {
    AffineOps<ScalarOps>::apply(s, M, B, S_in, S_out);
}

void affine_outputs_scalar(const Shape& s, int T, const float* o0, const float* eo, const float* S_in,
                           float* o) {
    AffineOps<ScalarOps>::outputs(s, T, o0, eo, S_in, o);
}

void chunked(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, Impl impl) {
#if K3_FMA
    if (impl == Impl::fma) return chunked_fma(s, S, x, scale, C, o);
#endif
#if K3_SIMD
    if (impl != Impl::scalar) return chunked_simd(s, S, x, scale, C, o);
#endif
    chunked_scalar(s, S, x, scale, C, o);
}

void chunked_part_scalar(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o,
                         size_t first, size_t count) {
    if (x.T <= 0 || count == 0) return;
    ChunkDriver<ScalarOps>(s, C).prefill_part(S, x, scale, o, first, first + count);
}

void segment_map_part_scalar(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B,
                             float* o0, float* eo, size_t first, size_t count) {
    if (x.T <= 0 || count == 0) return;
    ChunkDriver<ScalarOps>(s, C).segment_part(x, scale, M, B, o0, eo, first, first + count);
}

// Both loops have one unit per (chunk, value head) pair (ChunkDriver::units).
size_t chunked_units(const Shape& s, int T, int C) {
    const int c = std::max(1, std::min(C, kMaxChunk));
    return T <= 0 ? 0 : size_t((T + c - 1) / c) * size_t(s.HV);
}

void chunked_part(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, size_t first,
                  size_t count, Impl impl) {
#if K3_FMA
    if (impl == Impl::fma) return chunked_part_fma(s, S, x, scale, C, o, first, count);
#endif
#if K3_SIMD
    if (impl != Impl::scalar) return chunked_part_simd(s, S, x, scale, C, o, first, count);
#endif
    chunked_part_scalar(s, S, x, scale, C, o, first, count);
}

}  // namespace k3::kda
