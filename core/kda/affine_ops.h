// Composition, application and output fix-up of affine maps over a set of primitives (ScalarOps or
// SimdOps); internal to core/kda, instantiated in chunked_scalar.cpp and chunk_ops_simd.cpp.
// Every product is accumulated from 0 over the inner index in ascending order; the constant term is
// added last.
#pragma once

#include "core/kda/layout.h"

namespace k3::kda {

template <class Ops>
struct AffineOps {
    static void compose(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                        float* M, float* B) {
        const int K = s.K, V = s.V;
        for (int h = 0; h < s.HV; ++h) {
            const size_t mk = size_t(h) * K * K, bk = size_t(h) * s.head_state();
            Ops::mm(M + mk, K, M2 + mk, K, M1 + mk, K, K, K, K);
            Ops::mm(B + bk, V, M2 + mk, K, B1 + bk, V, K, K, V);
            for (size_t e = 0; e < s.head_state(); ++e) B[bk + e] = B[bk + e] + B2[bk + e];
        }
    }
    static void apply(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out) {
        const int K = s.K, V = s.V;
        for (int h = 0; h < s.HV; ++h) {
            const size_t mk = size_t(h) * K * K, bk = size_t(h) * s.head_state();
            Ops::mm(S_out + bk, V, M + mk, K, S_in + bk, V, K, K, V);
            for (size_t e = 0; e < s.head_state(); ++e) S_out[bk + e] = S_out[bk + e] + B[bk + e];
        }
    }
    static void outputs(const Shape& s, int T, const float* o0, const float* eo, const float* S_in,
                        float* o) {
        const int K = s.K, V = s.V;
        FloatBuf tmp(size_t(T) * V);
        for (int h = 0; h < s.HV; ++h) {
            Ops::mm(tmp.data(), V, eo + size_t(h) * K, int(s.g_row()), S_in + size_t(h) * s.head_state(), V,
                    T, K, V);
            for (int t = 0; t < T; ++t) {
                const size_t ot = size_t(t) * s.v_row() + size_t(h) * V;
                for (int j = 0; j < V; ++j) o[ot + j] = o0[ot + j] + tmp[size_t(t) * V + j];
            }
        }
    }
};

}  // namespace k3::kda
