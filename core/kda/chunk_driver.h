// The chunked (WY) algorithm of reference/kda.md §3.2 written once over a set of primitives `Ops`
// (ScalarOps in chunk_ops.h, SimdOps in chunk_ops_simd.cpp). Internal to core/kda: the public entry
// points are in chunked.h and affine.h.
//
// Per (value head, chunk of n <= C tokens), with E(r,s) = Diag(exp(G_r - G_s)) formed as running
// products of the decays (never the exponential of a positive number, whatever the gates):
//   phase A (independent of S):
//     L[r][s]   = b_r k_r^T E(r,s) k_s        s < r          Aqk[r][s] = q_r^T E(r,s) k_s   s <= r
//     W = (I + L)^{-1} Diag(b) (K ⊙ exp G)  and  U = (I + L)^{-1} Diag(b) V    (forward substitution)
//     Qg = Q ⊙ exp G,  KdT[i][s] = k_s[i] exp(G_last[i] - G_s[i]),  dlast = exp G_last
//   phase B (the state pass, column by column of S):
//     D = U - W S;   O = Qg S + Aqk D;   S = Diag(dlast) S + KdT D
// Phase B only couples rows of S, never columns, so it can run on any block of columns of a state,
// and on the augmented state [M | B] of an affine segment map (affine.h) with U = [0 | U].
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/kda/layout.h"

namespace k3::kda {

// Where the driver's per-chunk arrays live in its one scratch buffer (float offsets, each array 64-byte
// aligned) and the buffer's size: also what chunked_scratch_floats reports.
struct ChunkScratch {
    int ldn;  // leading dimension of the [C][C] pair matrices: C rounded up to 16
    size_t Kc, Qc, Vc, alpha, b, eg, L, Aqk, KdT, W, U, KG, P, D, total = 0;

    static int clamped(int C) { return std::max(1, std::min(C, kMaxChunk)); }  // the chunk size used

    ChunkScratch(const Shape& s, int C) : ldn((C + 15) / 16 * 16) {
        const size_t c = size_t(C), ln = size_t(ldn), K = size_t(s.K), V = size_t(s.V), KV = std::max(K, V);
        auto take = [&](size_t n) {
            const size_t o = total;
            total += (n + 15) / 16 * 16;
            return o;
        };
        Kc = take(c * K), Qc = take(c * K), Vc = take(c * V), alpha = take(c * K), b = take(c), eg = take(K);
        L = take(c * ln), Aqk = take(c * ln), KdT = take(K * ln), W = take(2 * c * K), U = take(c * V);
        KG = take(c * K), P = take(2 * c * KV), D = take(c * KV);
    }
};

template <class Ops>
class ChunkDriver {
  public:
    ChunkDriver(const Shape& s, int C) : s_(s), C_(ChunkScratch::clamped(C)) {
        const ChunkScratch l(s, C_);
        ldn_ = l.ldn;
        buf_.assign(l.total, 0.0f);
        float* p = buf_.data();
        Kc_ = p + l.Kc, Qc_ = p + l.Qc, Vc_ = p + l.Vc, alpha_ = p + l.alpha, b_ = p + l.b, eg_ = p + l.eg;
        L_ = p + l.L, Aqk_ = p + l.Aqk, KdT_ = p + l.KdT, W_ = p + l.W, U_ = p + l.U, KG_ = p + l.KG;
        P_ = p + l.P, D_ = p + l.D;
    }

    int chunk() const { return C_; }

    // Work units: one (chunk, value head) pair each, the steps both loops below are made of. A caller
    // may run a loop's units in parts (prefill_part, segment_part): in order, they do exactly what one
    // call does, since a unit depends only on its chunk's tokens and the head's state or map.
    size_t units(int T) const { return size_t((T + C_ - 1) / C_) * size_t(s_.HV); }

    // Prefill: S [HV][K][V] in place, o [T][HV][V] or null.
    void prefill(float* S, const Tokens& x, float scale, float* o) {
        prefill_part(S, x, scale, o, 0, units(x.T));
    }

    // Units [u0, u1) of the prefill of x. Chunk-major: unit u is head u % HV of chunk u / HV (the chunk's
    // input rows are read contiguously and reused by every head; a head's state is read and written
    // once per chunk).
    void prefill_part(float* S, const Tokens& x, float scale, float* o, size_t u0, size_t u1) {
        for (size_t u = u0; u < u1; ++u) {
            const int t0 = int(u / size_t(s_.HV)) * C_, h = int(u % size_t(s_.HV));
            const int n = std::min(C_, x.T - t0);
            if (s_.HV > 1 && (h == 0 || u == u0)) read_rows(x, t0, n);
            phase_a(x, h, t0, n, scale);
            state_pass(n, S + size_t(h) * s_.head_state(), s_.V, s_.V, U_, s_.V,
                       o ? o + size_t(t0) * s_.v_row() + size_t(h) * s_.V : nullptr, int(s_.v_row()));
        }
    }

    // Affine segment map: M [HV][K][K] and B [HV][K][V] (overwritten), outputs from a zero start o0
    // [T][HV][V] and output sensitivities eo [T][HV][K] (O = o0 + eo S_in per head), both optional.
    void segment(const Tokens& x, float scale, float* M, float* B, float* o0, float* eo) {
        if (x.T <= 0)  // no units: every head's map is the identity
            for (int h = 0; h < s_.HV; ++h) start_map(h, M, B);
        segment_part(x, scale, M, B, o0, eo, 0, units(x.T));
    }

    // Units [u0, u1) of the segment map of x. Head-major: unit u is chunk u % chunks of head u / chunks;
    // a head's first unit starts its map at (I, 0).
    void segment_part(const Tokens& x, float scale, float* M, float* B, float* o0, float* eo, size_t u0,
                      size_t u1) {
        const int K = s_.K, V = s_.V;
        const size_t chunks = size_t((x.T + C_ - 1) / C_);
        for (size_t u = u0; u < u1; ++u) {
            const int h = int(u / chunks), t0 = int(u % chunks) * C_;
            const int n = std::min(C_, x.T - t0);
            float* Mh = M + size_t(h) * K * K;
            float* Bh = B + size_t(h) * s_.head_state();
            if (t0 == 0) start_map(h, M, B);
            phase_a(x, h, t0, n, scale);
            state_pass(n, Mh, K, K, nullptr, 0, eo ? eo + size_t(t0) * s_.g_row() + size_t(h) * K : nullptr,
                       int(s_.g_row()));
            state_pass(n, Bh, V, V, U_, V, o0 ? o0 + size_t(t0) * s_.v_row() + size_t(h) * V : nullptr,
                       int(s_.v_row()));
        }
    }

  private:
    // Head h's map before any token: (I, 0).
    void start_map(int h, float* M, float* B) const {
        const int K = s_.K;
        float* Mh = M + size_t(h) * K * K;
        float* Bh = B + size_t(h) * s_.head_state();
        for (int i = 0; i < K; ++i)
            for (int c = 0; c < K; ++c) Mh[size_t(i) * K + c] = i == c ? 1.0f : 0.0f;
        for (size_t e = 0; e < s_.head_state(); ++e) Bh[e] = 0.0f;
    }

    // Reads the input rows of tokens [t0, t0 + n) front to back, one load per cache line, before the
    // chunk's first head gathers its slice of them. Each head reads a piece of every row (512 bytes of
    // each 2 KiB q row with 4 heads of 128 channels), a pattern the hardware prefetcher does not
    // follow, so with a prompt larger than the caches every head's gather waited on memory; one
    // sequential pass brings the rows in at streaming speed. (With one head its gather already reads
    // whole rows.) Changes no value: the bits are only combined so that the reads are not optimised
    // away.
    void read_rows(const Tokens& x, int t0, int n) {
        constexpr size_t kLineFloats = 64 / sizeof(float);
        uint32_t bits = 0;
        auto read = [&](const float* p, size_t row) {
            const float* r = p + size_t(t0) * row;
            for (size_t e = 0; e < size_t(n) * row; e += kLineFloats) {
                uint32_t b;
                std::memcpy(&b, r + e, sizeof b);
                bits ^= b;
            }
        };
        read(x.q, s_.qk_row()), read(x.k, s_.qk_row()), read(x.v, s_.v_row()), read(x.g, s_.g_row());
        sink_ = sink_ ^ bits;
    }

    // Gathers tokens [t0, t0 + n) of value head h and computes everything that does not depend on S.
    void phase_a(const Tokens& x, int h, int t0, int n, float scale) {
        const int K = s_.K, V = s_.V, hk = h / s_.group();
        for (int r = 0; r < n; ++r) {
            const size_t t = size_t(t0 + r);
            const float* q = x.q + t * s_.qk_row() + size_t(hk) * K;
            const float* k = x.k + t * s_.qk_row() + size_t(hk) * K;
            const float* v = x.v + t * s_.v_row() + size_t(h) * V;
            float* kc = Kc_ + size_t(r) * K;
            float* qc = Qc_ + size_t(r) * K;
            float* vc = Vc_ + size_t(r) * V;
            for (int i = 0; i < K; ++i) kc[i] = k[i], qc[i] = scale * q[i];
            for (int j = 0; j < V; ++j) vc[j] = v[j];
            Ops::exp_rows(x.g + t * s_.g_row() + size_t(h) * K, alpha_ + size_t(r) * K, K);
            b_[r] = x.beta[t * size_t(s_.HV) + size_t(h)];
        }
        // exp(G_r) = alpha_0 ... alpha_r as a running product; Qg = Q ⊙ exp G, KG = K ⊙ exp G.
        Qg_ = W_ + size_t(n) * K;
        for (int i = 0; i < K; ++i) eg_[i] = alpha_[i];
        for (int r = 0; r < n; ++r) {
            const float* al = alpha_ + size_t(r) * K;
            if (r)
                for (int i = 0; i < K; ++i) eg_[i] = eg_[i] * al[i];
            const float* qc = Qc_ + size_t(r) * K;
            const float* kc = Kc_ + size_t(r) * K;
            float* qg = Qg_ + size_t(r) * K;
            float* kg = KG_ + size_t(r) * K;
            for (int i = 0; i < K; ++i) qg[i] = qc[i] * eg_[i], kg[i] = kc[i] * eg_[i];
        }
        Ops::build_pairs(n, K, Kc_, Qc_, alpha_, b_, L_, Aqk_, KdT_, ldn_);
        Ops::forward_subst(W_, K, L_, ldn_, b_, KG_, K, n, K);
        Ops::forward_subst(U_, V, L_, ldn_, b_, Vc_, V, n, V);
    }

    // Phase B on a block of `cols` columns of a state, Sb [K][cols] (ld lds), with the chunk's U block
    // [n][cols] (ld ldu; null = zeros) and outputs O [n][cols] (ld ldo; null = not wanted).
    void state_pass(int n, float* Sb, int lds, int cols, const float* U, int ldu, float* O, int ldo) {
        const int K = s_.K;
        const int ldp = std::max(s_.K, s_.V);
        Ops::mm(P_, ldp, W_, K, Sb, lds, O ? 2 * n : n, K, cols);  // [P; O] = [W; Qg] S, one pass over S
        for (int r = 0; r < n; ++r) {
            const float* p = P_ + size_t(r) * ldp;
            float* d = D_ + size_t(r) * ldp;
            if (U)
                for (int j = 0; j < cols; ++j) d[j] = U[size_t(r) * ldu + j] - p[j];
            else
                for (int j = 0; j < cols; ++j) d[j] = 0.0f - p[j];
        }
        if (O) {
            for (int r = 0; r < n; ++r) {  // O = Qg S + Aqk D
                const float* p = P_ + size_t(n + r) * ldp;
                float* o = O + size_t(r) * ldo;
                for (int j = 0; j < cols; ++j) o[j] = p[j];
            }
            Ops::mm_lower_add(O, ldo, Aqk_, ldn_, D_, ldp, n, cols);
        }
        Ops::mm_scale_add(Sb, lds, eg_, KdT_, ldn_, D_, ldp, K, n, cols);  // S = Diag(dlast) S + KdT D
    }

    Shape s_;
    int C_, ldn_;
    FloatBuf buf_;
    float *Kc_, *Qc_, *Vc_, *alpha_, *b_, *eg_, *L_, *Aqk_, *KdT_, *W_, *U_, *KG_, *P_, *D_;
    float* Qg_ = nullptr;         // = W_ + n K: [W; Qg] is one matrix of 2n rows
    volatile uint32_t sink_ = 0;  // where read_rows leaves the bits it read
};

}  // namespace k3::kda
