// The primitives of the chunked kernel, scalar versions (internal to core/kda).
//
// Each primitive fixes the order in which every output element is accumulated; chunk_ops_simd.cpp
// implements the same contracts with xsimd, vectorised along the output columns, and therefore gives
// the same bits. All matrices are row-major float with explicit leading dimensions (ld*); the
// column-range versions [j0, j1) also serve as the SIMD kernels' tails.
#pragma once

#include <cstddef>
#include <vector>

#include "core/base/fmath.h"
#include "core/kda/novec.h"

namespace k3::kda {

struct ScalarOps {
    // a[x] = exp(g[x]), x < n
    static void exp_rows(const float* g, float* a, int n) {
        K3_SCALAR_LOOP for (int x = 0; x < n; ++x) a[x] = exp_f32(g[x]);
    }

    // C[r][j] = A[r][0] B[0][j] + A[r][1] B[1][j] + ... (from 0, m ascending); with Add, from C[r][j],
    // and with a row scale d, from d[r] * C[r][j]. A [rows][inner], B [inner][cols], C [rows][cols].
    template <bool Add>
    static void mm_cols(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows,
                        int inner, int j0, int j1, const float* d = nullptr) {
        for (int r = 0; r < rows; ++r) {
            float* c = C + size_t(r) * ldc;
            if (!Add) K3_SCALAR_LOOP for (int j = j0; j < j1; ++j) c[j] = 0.0f;
            if (Add && d) K3_SCALAR_LOOP for (int j = j0; j < j1; ++j) c[j] = d[r] * c[j];
            for (int m = 0; m < inner; ++m) {
                const float a = A[size_t(r) * lda + m];
                const float* b = B + size_t(m) * ldb;
                K3_SCALAR_LOOP for (int j = j0; j < j1; ++j) c[j] = c[j] + a * b[j];
            }
        }
    }
    static void mm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows, int inner,
                   int cols) {
        mm_cols<false>(C, ldc, A, lda, B, ldb, rows, inner, 0, cols);
    }
    static void mm_add(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows,
                       int inner, int cols) {
        mm_cols<true>(C, ldc, A, lda, B, ldb, rows, inner, 0, cols);
    }
    // C = Diag(d) C + A B
    static void mm_scale_add(float* C, int ldc, const float* d, const float* A, int lda, const float* B,
                             int ldb, int rows, int inner, int cols) {
        mm_cols<true>(C, ldc, A, lda, B, ldb, rows, inner, 0, cols, d);
    }

    // C[r][j] += A[r][s] B[s][j] for s = 0..r ascending (A lower triangular incl. the diagonal). A [n][n].
    static void mm_lower_add_cols(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int n,
                                  int j0, int j1) {
        for (int r = 0; r < n; ++r) {
            float* c = C + size_t(r) * ldc;
            for (int s = 0; s <= r; ++s) {
                const float a = A[size_t(r) * lda + s];
                const float* b = B + size_t(s) * ldb;
                K3_SCALAR_LOOP for (int j = j0; j < j1; ++j) c[j] = c[j] + a * b[j];
            }
        }
    }
    static void mm_lower_add(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int n,
                             int cols) {
        mm_lower_add_cols(C, ldc, A, lda, B, ldb, n, 0, cols);
    }

    // Forward substitution with a unit lower-triangular (I + L), right-hand side Diag(b) Y:
    // X[r][j] = b[r] Y[r][j] - L[r][0] X[0][j] - L[r][1] X[1][j] - ... - L[r][r-1] X[r-1][j]  (left to
    // right).
    static void forward_subst_cols(float* X, int ldx, const float* L, int ldl, const float* b, const float* Y,
                                   int ldy, int n, int j0, int j1) {
        for (int r = 0; r < n; ++r) {
            float* x = X + size_t(r) * ldx;
            const float* y = Y + size_t(r) * ldy;
            K3_SCALAR_LOOP for (int j = j0; j < j1; ++j) x[j] = b[r] * y[j];
            for (int m = 0; m < r; ++m) {
                const float l = L[size_t(r) * ldl + m];
                const float* xm = X + size_t(m) * ldx;
                K3_SCALAR_LOOP for (int j = j0; j < j1; ++j) x[j] = x[j] - l * xm[j];
            }
        }
    }
    static void forward_subst(float* X, int ldx, const float* L, int ldl, const float* b, const float* Y,
                              int ldy, int n, int cols) {
        forward_subst_cols(X, ldx, L, ldl, b, Y, ldy, n, 0, cols);
    }

    // The S-independent pair matrices of a chunk, with running products of the decays (reference/kda.md
    // §3.4 item 3: no exp, nothing above 1, no overflow whatever the gates). For s <= r let
    //     e(r,s,i) = k_s[i] alpha_{s+1}[i] ... alpha_r[i]        (rounded left to right; e(s,s,i) = k_s[i])
    //     L[r][s]   = b[r] * (sum_i k_r[i] e(r,s,i))    for s < r, 0 elsewhere
    //     Aqk[r][s] = sum_i q_r[i] e(r,s,i)             for s <= r, 0 elsewhere
    //     KdT[i][s] = e(n-1,s,i)  (= k_s[i] exp(G_last[i] - G_s[i]))
    // sums over i ascending from 0. Kc, Qc, alpha: [n][K] (ld K); L, Aqk: [n][ldn]; KdT: [K][ldn].
    // The loop over i runs inside the loop over r, with the row e(r,s,.) carried from r - 1 to r: every
    // access is contiguous. (With i outside, r strode through columns of L and of the inputs, and at
    // C = 1024 one chunk of one head took seconds of cache misses.) Each sum adds its terms over i
    // ascending from 0 and each e is the same product as written above: the same bits.
    static void build_pairs(int n, int K, const float* Kc, const float* Qc, const float* alpha,
                            const float* b, float* L, float* Aqk, float* KdT, int ldn) {
        for (int r = 0; r < n; ++r)
            for (int s = 0; s < ldn; ++s) L[size_t(r) * ldn + s] = 0.0f, Aqk[size_t(r) * ldn + s] = 0.0f;
        std::vector<float> e(static_cast<size_t>(K));
        for (int s = 0; s < n; ++s) {
            const float *ks = Kc + size_t(s) * K, *qs = Qc + size_t(s) * K;
            float diag = 0.0f;
            for (int i = 0; i < K; ++i) e[size_t(i)] = ks[i], diag = diag + qs[i] * ks[i];
            Aqk[size_t(s) * ldn + s] = diag;
            for (int r = s + 1; r < n; ++r) {
                const float *al = alpha + size_t(r) * K, *kr = Kc + size_t(r) * K, *qr = Qc + size_t(r) * K;
                float l = 0.0f, a = 0.0f;
                for (int i = 0; i < K; ++i) {
                    e[size_t(i)] = e[size_t(i)] * al[i];
                    l = l + kr[i] * e[size_t(i)];
                    a = a + qr[i] * e[size_t(i)];
                }
                L[size_t(r) * ldn + s] = l, Aqk[size_t(r) * ldn + s] = a;
            }
            for (int i = 0; i < K; ++i) KdT[size_t(i) * ldn + s] = e[size_t(i)];
        }
        for (int r = 0; r < n; ++r)
            K3_SCALAR_LOOP for (int s = 0; s < r; ++s) L[size_t(r) * ldn + s] = b[r] * L[size_t(r) * ldn + s];
    }
};

}  // namespace k3::kda
