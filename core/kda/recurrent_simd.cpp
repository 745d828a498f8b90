// xsimd fp32 recurrent KDA. Same bits as recurrent_scalar.cpp, faster because of memory traffic and
// operation count. The five steps only couple rows, never columns (p, u and o of column j depend on
// column j of S alone), so a head's state is processed in column blocks of NB vectors (K x 64 floats =
// 32 KiB with AVX-512 and AVX2, which stays in L1) with two passes over each block:
//   pass 1 (decay + predict):        S_i = a_i * S_i (stored);  p += k_i * S_i
//   pass 2 (write + read):           S_i = S_i + k_i * u;       o += (scale q_i) * S_i
// 7 vector operations per state element and token, the minimum for this order of operations. Pass 2
// runs over the rows bottom up (i = K-1 ... 0): in a [K][V] state with V = 128 the rows of a column
// block fall into half of the L1 sets, more lines than the ways can hold, so walking back up
// meets the rows pass 1 left in L1 first (about 8% faster decode). Every lane sums p over i ascending
// and o over i descending, exactly as the scalar loops. Sequences run a block of tokens through
// one column block before moving to the next, so the block stays in L1 across tokens as well.
#include "core/kda/recurrent.h"

#if K3_SIMD
#include <algorithm>

#include "core/base/fmath.h"
#include "core/kda/simd.h"
#include "core/kda/vexp.h"

namespace k3::kda {

namespace {

using namespace simd;

struct HeadIn {
    const float* a;   // [K] exp(g)
    const float* k;   // [K]
    const float* qs;  // [K] scale * q
    const float* v;   // [V]
    float b;
};

// Columns [j0, j0 + NB*W) of one head; Sb points at column j0 of row 0, rows lds floats apart.
// in.v and o are indexed by absolute column (j0 + ...); o may be null.

template <int NB, bool Fused>
inline void block(float* Sb, int lds, int K, int j0, const HeadIn& in, float* o) {
    // Local copies: the vector stores may alias anything, so in.a, in.k and in.qs would be reloaded
    // after every row (WebAssembly does), and the row pointer steps instead of a multiply per row.
    const float *a = in.a, *k = in.k, *qs = in.qs;
    vf p[NB];
    for (int n = 0; n < NB; ++n) p[n] = vf(0.0f);
    for (ptrdiff_t i = 0, off = 0; i < K; ++i, off += lds) {
        float* row = Sb + off;
        const vf ai(a[i]), ki(k[i]);
        for (int n = 0; n < NB; ++n) {
            const vf d = ai * load(row + n * W);
            store(row + n * W, d);
            p[n] = madd<Fused>(p[n], ki, d);
        }
    }
    vf u[NB], acc[NB];
    const vf b(in.b);
    for (int n = 0; n < NB; ++n) {
        u[n] = b * (load(in.v + j0 + n * W) - p[n]);
        acc[n] = vf(0.0f);
    }
    // Bottom up: the rows pass 1 touched last are still in L1.
    for (ptrdiff_t i = K - 1, off = (K - 1) * ptrdiff_t(lds); i >= 0; --i, off -= lds) {
        float* row = Sb + off;
        const vf ki(k[i]), qi(qs[i]);
        for (int n = 0; n < NB; ++n) {
            const vf s = madd<Fused>(load(row + n * W), ki, u[n]);
            store(row + n * W, s);
            acc[n] = madd<Fused>(acc[n], qi, s);
        }
    }
    if (o)
        for (int n = 0; n < NB; ++n) store(o + j0 + n * W, acc[n]);
}

// Leftover columns [j0, V) one at a time, same order of operations.
inline void tail(float* Sh, int K, int V, int j0, const HeadIn& in, float* o) {
    for (int j = j0; j < V; ++j) {
        float p = 0.0f;
        for (int i = 0; i < K; ++i) p = p + in.k[i] * (in.a[i] * Sh[size_t(i) * V + j]);
        const float u = in.b * (in.v[j] - p);
        float acc = 0.0f;
        for (int i = K - 1; i >= 0; --i) {
            float& x = Sh[size_t(i) * V + j];
            x = in.a[i] * x + in.k[i] * u;
            acc = acc + in.qs[i] * x;
        }
        if (o) o[j] = acc;
    }
}

// Vectors per column block: 64 floats (half a row of a V = 128 state) where the registers allow. That
// width streams states from memory best: with AVX2, 4 vectors (32 floats, a quarter row per pass) moved
// 0.64x the states per second of 8 and were no faster in cache. WebAssembly keeps 4 vectors (16 floats):
// V8 has 15 vector registers, and 8 vectors spilled and ran at 0.78x.
constexpr int kBlock = W >= 8 ? 64 / W : 4;

// a = exp(g), qs = scale * q for one (token, head).
inline void prep(const float* gh, const float* qh, float scale, int K, float* a, float* qs) {
    int i = 0;
    for (; i + W <= K; i += W) {
        store(a + i, exp_v(load(gh + i)));
        store(qs + i, vf(scale) * load(qh + i));
    }
    for (; i < K; ++i) a[i] = exp_f32(gh[i]), qs[i] = scale * qh[i];
}

// Tokens in[0..n) one after the other on one head, column block by column block. With several
// tokens the block is first copied to a contiguous buffer: rows of a [K][V] state are V floats (512 B
// for V = 128) apart, which maps a column block onto half of the L1 sets (64 sets of 12 ways: a
// 32 KiB block at a 512 B stride would need 16 ways), while the packed copy fits L1 and stays there
// for all n tokens.
template <bool Fused>
inline void run_head(float* Sh, int K, int V, const HeadIn* in, float* const* out, int n, float* pack) {
    int j = 0;
    for (; j + kBlock * W <= V; j += kBlock * W) {
        constexpr int bw = kBlock * W;
        if (n == 1) {
            block<kBlock, Fused>(Sh + j, V, K, j, in[0], out[0]);
            continue;
        }
        for (int i = 0; i < K; ++i)
            for (int c = 0; c < bw; c += W)
                store(pack + size_t(i) * bw + c, load(Sh + size_t(i) * V + j + c));
        for (int t = 0; t < n; ++t) block<kBlock, Fused>(pack, bw, K, j, in[t], out[t]);
        for (int i = 0; i < K; ++i)
            for (int c = 0; c < bw; c += W)
                store(Sh + size_t(i) * V + j + c, load(pack + size_t(i) * bw + c));
    }
    for (; j + W <= V; j += W)
        for (int t = 0; t < n; ++t) block<1, Fused>(Sh + j, V, K, j, in[t], out[t]);
    if (j < V)
        for (int t = 0; t < n; ++t) tail(Sh, K, V, j, in[t], out[t]);
}

template <bool Fused>
void step_heads(const Shape& s, float* S, const float* q, const float* k, const float* v, const float* g,
                const float* beta, float scale, float* o) {
    const int K = s.K, V = s.V, grp = s.group();
    alignas(64) float a[kMaxHeadDim], qs[kMaxHeadDim];
    for (int h = 0; h < s.HV; ++h) {
        prep(g + size_t(h) * K, q + size_t(h / grp) * K, scale, K, a, qs);
        const HeadIn in{a, k + size_t(h / grp) * K, qs, v + size_t(h) * V, beta[h]};
        float* out = o ? o + size_t(h) * V : nullptr;
        run_head<Fused>(S + size_t(h) * s.head_state(), K, V, &in, &out, 1, nullptr);
    }
}

template <bool Fused>
void sequence(const Shape& s, float* S, const Tokens& x, float scale, float* o) {
    const int K = s.K, V = s.V, grp = s.group();
    FloatBuf a(size_t(kRecurrentTokenBlock) * K), qs(size_t(kRecurrentTokenBlock) * K),
        pack(size_t(K) * kBlock * W);
    HeadIn in[kRecurrentTokenBlock];
    float* out[kRecurrentTokenBlock];
    for (int t0 = 0; t0 < x.T; t0 += kRecurrentTokenBlock) {
        const int n = std::min(kRecurrentTokenBlock, x.T - t0);
        for (int h = 0; h < s.HV; ++h) {
            for (int t = 0; t < n; ++t) {
                const size_t tt = size_t(t0 + t);
                float* at = a.data() + size_t(t) * K;
                float* qt = qs.data() + size_t(t) * K;
                prep(x.g + tt * s.g_row() + size_t(h) * K, x.q + tt * s.qk_row() + size_t(h / grp) * K, scale,
                     K, at, qt);
                in[t] = {at, x.k + tt * s.qk_row() + size_t(h / grp) * K, qt,
                         x.v + tt * s.v_row() + size_t(h) * V, x.beta[tt * size_t(s.HV) + size_t(h)]};
                out[t] = o ? o + tt * s.v_row() + size_t(h) * V : nullptr;
            }
            run_head<Fused>(S + size_t(h) * s.head_state(), K, V, in, out, n, pack.data());
        }
    }
}

}  // namespace

void recurrent_step_simd(const Shape& s, float* S, const float* q, const float* k, const float* v,
                         const float* g, const float* beta, float scale, float* o) {
    step_heads<false>(s, S, q, k, v, g, beta, scale, o);
}

void recurrent_simd(const Shape& s, float* S, const Tokens& x, float scale, float* o) {
    sequence<false>(s, S, x, scale, o);
}

#if K3_FMA
void recurrent_step_fma(const Shape& s, float* S, const float* q, const float* k, const float* v,
                        const float* g, const float* beta, float scale, float* o) {
    step_heads<true>(s, S, q, k, v, g, beta, scale, o);
}

void recurrent_fma(const Shape& s, float* S, const Tokens& x, float scale, float* o) {
    sequence<true>(s, S, x, scale, o);
}
#endif

}  // namespace k3::kda
#endif
