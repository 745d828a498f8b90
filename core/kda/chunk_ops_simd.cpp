// xsimd versions of the chunked kernel's primitives (contracts in chunk_ops.h), vectorised along the
// output columns: each lane accumulates its own column in the scalar order, so the bits are the
// scalar ones. Products are register-blocked (2 rows x NB vectors of accumulators, enough independent
// add chains to cover the add latency) and walk column blocks outermost so that the block of B stays
// in L1 while all rows use it.
#include "core/kda/chunked.h"

#include <algorithm>

#if K3_SIMD
#include "core/kda/affine.h"
#include "core/kda/affine_ops.h"
#include "core/kda/chunk_driver.h"
#include "core/kda/chunk_ops.h"
#include "core/kda/simd.h"
#include "core/kda/vexp.h"

namespace k3::kda {

namespace {

using namespace simd;

constexpr int kNB = 4;  // vectors per column block

// Add = false: C = A B; Add = true: C = C + A B, or Diag(d) C + A B when d is given.
template <bool Add, int NB, bool F>
void mm_block(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows, int inner,
              int j0, const float* d) {
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
        float* c0 = C + size_t(r) * ldc + j0;
        float* c1 = c0 + ldc;
        const float* a0 = A + size_t(r) * lda;
        const float* a1 = a0 + lda;
        vf x0[NB], x1[NB];
        for (int n = 0; n < NB; ++n) {
            x0[n] = Add ? load(c0 + n * W) : vf(0.0f);
            x1[n] = Add ? load(c1 + n * W) : vf(0.0f);
            if (Add && d) x0[n] = vf(d[r]) * x0[n], x1[n] = vf(d[r + 1]) * x1[n];
        }
        for (int m = 0; m < inner; ++m) {
            const float* b = B + size_t(m) * ldb + j0;
            const vf A0(a0[m]), A1(a1[m]);
            for (int n = 0; n < NB; ++n) {
                const vf bn = load_shared(b + n * W);
                x0[n] = madd<F>(x0[n], A0, bn);
                x1[n] = madd<F>(x1[n], A1, bn);
            }
        }
        for (int n = 0; n < NB; ++n) store(c0 + n * W, x0[n]), store(c1 + n * W, x1[n]);
    }
    if (r < rows) {
        float* c0 = C + size_t(r) * ldc + j0;
        const float* a0 = A + size_t(r) * lda;
        vf x0[NB];
        for (int n = 0; n < NB; ++n) {
            x0[n] = Add ? load(c0 + n * W) : vf(0.0f);
            if (Add && d) x0[n] = vf(d[r]) * x0[n];
        }
        for (int m = 0; m < inner; ++m) {
            const float* b = B + size_t(m) * ldb + j0;
            const vf A0(a0[m]);
            for (int n = 0; n < NB; ++n) x0[n] = madd<F>(x0[n], A0, load(b + n * W));
        }
        for (int n = 0; n < NB; ++n) store(c0 + n * W, x0[n]);
    }
}

template <int NB, bool F>
void lower_block(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int nrows, int j0) {
    int r = 0;
    for (; r + 2 <= nrows; r += 2) {
        float* c0 = C + size_t(r) * ldc + j0;
        float* c1 = c0 + ldc;
        const float* a0 = A + size_t(r) * lda;
        const float* a1 = a0 + lda;
        vf x0[NB], x1[NB];
        for (int n = 0; n < NB; ++n) x0[n] = load(c0 + n * W), x1[n] = load(c1 + n * W);
        for (int s = 0; s <= r; ++s) {
            const float* b = B + size_t(s) * ldb + j0;
            const vf A0(a0[s]), A1(a1[s]);
            for (int n = 0; n < NB; ++n) {
                const vf bn = load_shared(b + n * W);
                x0[n] = madd<F>(x0[n], A0, bn);
                x1[n] = madd<F>(x1[n], A1, bn);
            }
        }
        const float* b = B + size_t(r + 1) * ldb + j0;
        const vf A1(a1[r + 1]);
        for (int n = 0; n < NB; ++n) x1[n] = madd<F>(x1[n], A1, load(b + n * W));
        for (int n = 0; n < NB; ++n) store(c0 + n * W, x0[n]), store(c1 + n * W, x1[n]);
    }
    if (r < nrows) {
        float* c0 = C + size_t(r) * ldc + j0;
        const float* a0 = A + size_t(r) * lda;
        vf x0[NB];
        for (int n = 0; n < NB; ++n) x0[n] = load(c0 + n * W);
        for (int s = 0; s <= r; ++s) {
            const float* b = B + size_t(s) * ldb + j0;
            const vf A0(a0[s]);
            for (int n = 0; n < NB; ++n) x0[n] = madd<F>(x0[n], A0, load(b + n * W));
        }
        for (int n = 0; n < NB; ++n) store(c0 + n * W, x0[n]);
    }
}

template <int NB, bool F>
void subst_block(float* X, int ldx, const float* L, int ldl, const float* b, const float* Y, int ldy,
                 int nrows, int j0) {
    int r = 0;
    for (; r + 2 <= nrows; r += 2) {
        float* x0p = X + size_t(r) * ldx + j0;
        float* x1p = x0p + ldx;
        const float* l0 = L + size_t(r) * ldl;
        const float* l1 = l0 + ldl;
        vf x0[NB], x1[NB];
        const vf b0(b[r]), b1(b[r + 1]);
        for (int n = 0; n < NB; ++n) {
            x0[n] = b0 * load(Y + size_t(r) * ldy + j0 + n * W);
            x1[n] = b1 * load(Y + size_t(r + 1) * ldy + j0 + n * W);
        }
        for (int m = 0; m < r; ++m) {
            const float* xm = X + size_t(m) * ldx + j0;
            const vf L0(l0[m]), L1(l1[m]);
            for (int n = 0; n < NB; ++n) {
                const vf v = load_shared(xm + n * W);
                x0[n] = msub<F>(x0[n], L0, v);
                x1[n] = msub<F>(x1[n], L1, v);
            }
        }
        const vf L1(l1[r]);
        for (int n = 0; n < NB; ++n) {
            store(x0p + n * W, x0[n]);
            x1[n] = msub<F>(x1[n], L1, x0[n]);
            store(x1p + n * W, x1[n]);
        }
    }
    if (r < nrows) {
        float* x0p = X + size_t(r) * ldx + j0;
        const float* l0 = L + size_t(r) * ldl;
        vf x0[NB];
        const vf b0(b[r]);
        for (int n = 0; n < NB; ++n) x0[n] = b0 * load(Y + size_t(r) * ldy + j0 + n * W);
        for (int m = 0; m < r; ++m) {
            const float* xm = X + size_t(m) * ldx + j0;
            const vf L0(l0[m]);
            for (int n = 0; n < NB; ++n) x0[n] = msub<F>(x0[n], L0, load(xm + n * W));
        }
        for (int n = 0; n < NB; ++n) store(x0p + n * W, x0[n]);
    }
}

// F (fused): the FMA variant, not bit-exact (chunked.h).
template <bool F>
struct SimdOpsT {
    static void exp_rows(const float* g, float* a, int n) {
        int x = 0;
        for (; x + W <= n; x += W) store(a + x, exp_v(load(g + x)));
        for (; x < n; ++x) a[x] = exp_f32(g[x]);
    }

    // Column blocks of B are packed into a contiguous buffer first when enough rows reuse them: a
    // row-major B with rows 512 B apart (V = 128) maps a column block onto half of the L1 sets,
    // and the packed copy is what stays in L1 while the rows of C sweep over it.
    template <bool Add>
    static void mm_any(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows,
                       int inner, int cols, const float* d) {
        constexpr int bw = kNB * W;
        thread_local FloatBuf pack;
        int j = 0;
        for (; j + bw <= cols; j += bw) {
            if (rows >= 8) {
                if (pack.size() < size_t(inner) * bw) pack.resize(size_t(inner) * bw);
                for (int m = 0; m < inner; ++m)
                    for (int c = 0; c < bw; c += W)
                        store(pack.data() + size_t(m) * bw + c, load(B + size_t(m) * ldb + j + c));
                mm_block<Add, kNB, F>(C + j, ldc, A, lda, pack.data(), bw, rows, inner, 0, d);
            } else {
                mm_block<Add, kNB, F>(C, ldc, A, lda, B, ldb, rows, inner, j, d);
            }
        }
        for (; j + W <= cols; j += W) mm_block<Add, 1, F>(C, ldc, A, lda, B, ldb, rows, inner, j, d);
        if (j < cols) ScalarOps::mm_cols<Add>(C, ldc, A, lda, B, ldb, rows, inner, j, cols, d);
    }
    static void mm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows, int inner,
                   int cols) {
        mm_any<false>(C, ldc, A, lda, B, ldb, rows, inner, cols, nullptr);
    }
    static void mm_add(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int rows,
                       int inner, int cols) {
        mm_any<true>(C, ldc, A, lda, B, ldb, rows, inner, cols, nullptr);
    }
    static void mm_scale_add(float* C, int ldc, const float* d, const float* A, int lda, const float* B,
                             int ldb, int rows, int inner, int cols) {
        mm_any<true>(C, ldc, A, lda, B, ldb, rows, inner, cols, d);
    }

    static void mm_lower_add(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int n,
                             int cols) {
        int j = 0;
        for (; j + kNB * W <= cols; j += kNB * W) lower_block<kNB, F>(C, ldc, A, lda, B, ldb, n, j);
        for (; j + W <= cols; j += W) lower_block<1, F>(C, ldc, A, lda, B, ldb, n, j);
        if (j < cols) ScalarOps::mm_lower_add_cols(C, ldc, A, lda, B, ldb, n, j, cols);
    }

    static void forward_subst(float* X, int ldx, const float* L, int ldl, const float* b, const float* Y,
                              int ldy, int n, int cols) {
        int j = 0;
        for (; j + kNB * W <= cols; j += kNB * W) subst_block<kNB, F>(X, ldx, L, ldl, b, Y, ldy, n, j);
        for (; j + W <= cols; j += W) subst_block<1, F>(X, ldx, L, ldl, b, Y, ldy, n, j);
        if (j < cols) ScalarOps::forward_subst_cols(X, ldx, L, ldl, b, Y, ldy, n, j, cols);
    }

    // Lanes run over s (the column of L and Aqk) in blocks of W. For U consecutive key channels the
    // running products e(r, s, i) of a block live in registers while r sweeps down the chunk, and the
    // rows L[r], Aqk[r] of the block are loaded and stored once per U channels.
    template <int U>
    static void pairs_block(int n, int K, const float* Kc, const float* Qc, const float* alpha, float* L,
                            float* Aqk, float* KdT, int ldn, int s0, int i0, vf iota) {
        vf ks[U], e[U];
        for (int u = 0; u < U; ++u) ks[u] = load(KdT + size_t(i0 + u) * ldn + s0), e[u] = vf(0.0f);
        const int rd = std::min(n, s0 + W);
        for (int r = s0; r < n; ++r) {
            const float* al = alpha + size_t(r) * K + i0;
            const float* kr = Kc + size_t(r) * K + i0;
            const float* qr = Qc + size_t(r) * K + i0;
            float* lr = L + size_t(r) * ldn + s0;
            float* ar = Aqk + size_t(r) * ldn + s0;
            vf lacc = load(lr), aacc = load(ar);
            if (r < rd) {  // the block holding the diagonal: lane r - s0 starts its product at k_r
                const auto diag = iota == vf(float(r - s0));
                for (int u = 0; u < U; ++u) {
                    e[u] = xsimd::select(diag, ks[u], e[u] * vf(al[u]));
                    lacc = madd<F>(lacc, vf(kr[u]), e[u]);
                    aacc = madd<F>(aacc, vf(qr[u]), e[u]);
                }
            } else {
                for (int u = 0; u < U; ++u) {
                    e[u] = e[u] * vf(al[u]);
                    lacc = madd<F>(lacc, vf(kr[u]), e[u]);
                    aacc = madd<F>(aacc, vf(qr[u]), e[u]);
                }
            }
            store(lr, lacc);
            store(ar, aacc);
        }
        for (int u = 0; u < U; ++u) store(KdT + size_t(i0 + u) * ldn + s0, e[u]);
    }

    static void build_pairs(int n, int K, const float* Kc, const float* Qc, const float* alpha,
                            const float* b, float* L, float* Aqk, float* KdT, int ldn) {
        for (int r = 0; r < n; ++r)
            for (int s = 0; s < ldn; s += W)
                store(L + size_t(r) * ldn + s, vf(0.0f)), store(Aqk + size_t(r) * ldn + s, vf(0.0f));
        // KdT first holds K transposed (zero-padded), the starting values of the running products.
        for (int i = 0; i < K; ++i)
            for (int s = 0; s < ldn; ++s) KdT[size_t(i) * ldn + s] = s < n ? Kc[size_t(s) * K + i] : 0.0f;
        alignas(64) float lane[W];
        for (int l = 0; l < W; ++l) lane[l] = float(l);
        const vf iota = load(lane);
        for (int s0 = 0; s0 < n; s0 += W) {
            int i = 0;
            for (; i + 4 <= K; i += 4) pairs_block<4>(n, K, Kc, Qc, alpha, L, Aqk, KdT, ldn, s0, i, iota);
            for (; i < K; ++i) pairs_block<1>(n, K, Kc, Qc, alpha, L, Aqk, KdT, ldn, s0, i, iota);
        }
        for (int r = 0; r < n; ++r) {  // beta on the rows of L; clear the lanes on and above the diagonal
            float* lr = L + size_t(r) * ldn;
            float* ar = Aqk + size_t(r) * ldn;
            for (int s = 0; s < r; ++s) lr[s] = b[r] * lr[s];
            for (int s = r; s < ldn; ++s) lr[s] = 0.0f;
            for (int s = r + 1; s < ldn; ++s) ar[s] = 0.0f;
        }
    }
};

using SimdOps = SimdOpsT<false>;

}  // namespace

void chunked_simd(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o) {
    if (x.T <= 0) return;
    ChunkDriver<SimdOps>(s, C).prefill(S, x, scale, o);
}

void chunked_part_simd(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, size_t first,
                       size_t count) {
    if (x.T <= 0 || count == 0) return;
    ChunkDriver<SimdOps>(s, C).prefill_part(S, x, scale, o, first, first + count);
}

#if K3_FMA
void chunked_fma(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o) {
    if (x.T <= 0) return;
    ChunkDriver<SimdOpsT<true>>(s, C).prefill(S, x, scale, o);
}

void chunked_part_fma(const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, size_t first,
                      size_t count) {
    if (x.T <= 0 || count == 0) return;
    ChunkDriver<SimdOpsT<true>>(s, C).prefill_part(S, x, scale, o, first, first + count);
}
#endif

void segment_map_part_simd(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                           float* eo, size_t first, size_t count) {
    if (x.T <= 0 || count == 0) return;
    ChunkDriver<SimdOps>(s, C).segment_part(x, scale, M, B, o0, eo, first, first + count);
}

void segment_map_simd(const Shape& s, const Tokens& x, float scale, int C, float* M, float* B, float* o0,
                      float* eo) {
    ChunkDriver<SimdOps>(s, C).segment(x, scale, M, B, o0, eo);
}

void affine_compose_simd(const Shape& s, const float* M2, const float* B2, const float* M1, const float* B1,
                         float* M, float* B) {
    AffineOps<SimdOps>::compose(s, M2, B2, M1, B1, M, B);
}

void affine_apply_simd(const Shape& s, const float* M, const float* B, const float* S_in, float* S_out) {
    AffineOps<SimdOps>::apply(s, M, B, S_in, S_out);
}

void affine_outputs_simd(const Shape& s, int T, const float* o0, const float* eo, const float* S_in,
                         float* o) {
    AffineOps<SimdOps>::outputs(s, T, o0, eo, S_in, o);
}

}  // namespace k3::kda
#endif
