// xsimd version of matmul.h. Each lane owns one output column and adds its terms in ascending i, as
// the scalar kernel does, so the bits are the scalar ones whatever the blocking below:
//   one row (decode): groups of kStream input rows, each group one pass over y. The group's weight
//     rows are read front to back (kStream / 2 sequential streams the prefetcher follows); decode
//     reads every weight once per token, so streaming is what bounds it. A column-blocked walk of W
//     measured half the bandwidth (strided rows), natively and in WebAssembly.
//   batches (prefill): register blocks of R rows x NB vectors of columns live in accumulators while i
//     walks the input dimension, so each loaded weight vector serves R rows; column panels are the
//     outer loop, so the panel of W stays in cache while all rows use it.
// Columns left over (out % W) and rows left over (rows % R) run the same arithmetic with fewer lanes.
#include "core/model/matmul.h"

#if K3_SIMD
#include "core/kda/simd.h"

namespace k3::model {

namespace {

using namespace kda::simd;
using vu = xsimd::batch<uint32_t, arch>;

inline vf lo(vu w) { return xsimd::bitwise_cast<float>(w << 16); }
inline vf hi(vu w) { return xsimd::bitwise_cast<float>(w & vu(0xffff0000u)); }
inline vu load_u(const uint32_t* p) { return vu::load_unaligned(p); }

constexpr int kRows = 4;
constexpr int kNB =
    W >= 16 ? 4 : 2;        // R * NB accumulators + 2 NB weights fit 16 (SSE, wasm, AVX2) / 32 registers
constexpr int kStream = 8;  // input rows per pass over y in the one-row kernel (measured best)

// Columns [j0, j0 + NB*W) of R rows.
template <int R, int NB>
inline void block(const float* x, int ldx, const Weights16& Wt, float* y, int ldy, int j0) {
    const int in = Wt.in, out = Wt.out;
    vf acc[R][NB];
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < NB; ++n) acc[r][n] = vf(0.0f);
    int i = 0;
    for (; i + 2 <= in; i += 2) {
        const uint32_t* wp = Wt.pairs + size_t(i / 2) * out + j0;
        vf w0[NB], w1[NB];
        for (int n = 0; n < NB; ++n) {
            vu u = load_u(wp + n * W);
            keep_in_register(u);
            w0[n] = lo(u), w1[n] = hi(u);
        }
        for (int r = 0; r < R; ++r) {
            const vf a0(x[size_t(r) * ldx + i]), a1(x[size_t(r) * ldx + i + 1]);
            for (int n = 0; n < NB; ++n) acc[r][n] = (acc[r][n] + a0 * w0[n]) + a1 * w1[n];
        }
    }
    if (i < in) {  // odd in: the last pair's low half
        const uint32_t* wp = Wt.pairs + size_t(i / 2) * out + j0;
        for (int r = 0; r < R; ++r) {
            const vf a0(x[size_t(r) * ldx + i]);
            for (int n = 0; n < NB; ++n) acc[r][n] = acc[r][n] + a0 * lo(load_u(wp + n * W));
        }
    }
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < NB; ++n) store(y + size_t(r) * ldy + j0 + n * W, acc[r][n]);
}

template <int R>
inline void columns(const float* x, int ldx, const Weights16& Wt, float* y, int ldy, int j0, int j1) {
    int j = j0;
    for (; j + kNB * W <= j1; j += kNB * W) block<R, kNB>(x, ldx, Wt, y, ldy, j);
    for (; j + W <= j1; j += W) block<R, 1>(x, ldx, Wt, y, ldy, j);
}

// Columns [j0, out) of one row, one column at a time (fewer than W are left).
inline void tail(const float* x, const Weights16& Wt, float* y, int j0) {
    for (int j = j0; j < Wt.out; ++j) {
        float acc = 0.0f;
        for (int i = 0; i < Wt.in; ++i) {
            const uint32_t w = Wt.pairs[size_t(i / 2) * Wt.out + j];
            acc = acc + x[i] * (i % 2 ? bf16_hi(w) : bf16_lo(w));
        }
        y[j] = acc;
    }
}

void row_stream(const float* x, const Weights16& Wt, float* y) {
    const int in = Wt.in, out = Wt.out, vec_end = out / W * W;
    for (int o = 0; o < vec_end; ++o) y[o] = 0.0f;
    int i = 0;
    for (; i + kStream <= in; i += kStream) {
        vf a[kStream];
        const uint32_t* wp[kStream / 2];
        for (int s = 0; s < kStream; ++s) a[s] = vf(x[i + s]);
        for (int q = 0; q < kStream / 2; ++q) wp[q] = Wt.pairs + size_t(i / 2 + q) * out;
        for (int o = 0; o < vec_end; o += W) {
            vf acc = load(y + o);
            for (int q = 0; q < kStream / 2; ++q) {
                const vu u = load_u(wp[q] + o);
                acc = (acc + a[2 * q] * lo(u)) + a[2 * q + 1] * hi(u);
            }
            store(y + o, acc);
        }
    }
    for (; i < in; ++i) {
        const vf a(x[i]);
        const uint32_t* wp = Wt.pairs + size_t(i / 2) * out;
        const bool odd = i % 2;
        for (int o = 0; o < vec_end; o += W) {
            const vu u = load_u(wp + o);
            store(y + o, load(y + o) + a * (odd ? hi(u) : lo(u)));
        }
    }
}

}  // namespace

void matmul_simd(const float* x, int rows, int ldx, const Weights16& Wt, float* y, int ldy) {
    const int out = Wt.out, vec_end = out / W * W;
    if (rows == 1) {
        row_stream(x, Wt, y);
    } else {
        constexpr int kPanel = 256;  // columns per panel, a multiple of kNB * W
        for (int j0 = 0; j0 < vec_end; j0 += kPanel) {
            const int j1 = j0 + kPanel < vec_end ? j0 + kPanel : vec_end;
            int r = 0;
            for (; r + kRows <= rows; r += kRows)
                columns<kRows>(x + size_t(r) * ldx, ldx, Wt, y + size_t(r) * ldy, ldy, j0, j1);
            for (; r < rows; ++r) columns<1>(x + size_t(r) * ldx, ldx, Wt, y + size_t(r) * ldy, ldy, j0, j1);
        }
    }
    if (vec_end < out)
        for (int r = 0; r < rows; ++r) tail(x + size_t(r) * ldx, Wt, y + size_t(r) * ldy, vec_end);
}

}  // namespace k3::model
#endif
