#include "core/kda/reference.h"

#include <vector>

#include "core/base/fmath.h"

namespace k3::kda::ref {

double gate(double z, double dt_bias, double A_log, double lower_bound) {
    if (lower_bound < 0) return lower_bound * sigmoid_f64(exp_f64(A_log) * (z + dt_bias));
    return -exp_f64(A_log) * softplus_f64(z + dt_bias);
}

void step(const Shape& s, double* S, const float* q, const float* k, const float* v, const float* g,
          const float* beta, double scale, double* o) {
    const int K = s.K, V = s.V, grp = s.group();
    std::vector<double> p(static_cast<size_t>(V)), u(static_cast<size_t>(V));
    for (int h = 0; h < s.HV; ++h) {
        double* Sh = S + size_t(h) * s.head_state();
        const float* kh = k + size_t(h / grp) * K;
        const float* qh = q + size_t(h / grp) * K;
        const float* vh = v + size_t(h) * V;
        const float* gh = g + size_t(h) * K;
        for (int i = 0; i < K; ++i) {  // 1. decay the key rows
            const double a = exp_f64(double(gh[i]));
            for (int j = 0; j < V; ++j) Sh[size_t(i) * V + j] *= a;
        }
        for (int j = 0; j < V; ++j) p[j] = 0;  // 2. predict from the decayed state
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) p[j] += double(kh[i]) * Sh[size_t(i) * V + j];
        for (int j = 0; j < V; ++j) u[j] = double(beta[h]) * (double(vh[j]) - p[j]);  // 3. delta
        for (int i = 0; i < K; ++i)                                                   // 4. rank-1 write
            for (int j = 0; j < V; ++j) Sh[size_t(i) * V + j] += double(kh[i]) * u[j];
        if (!o) continue;
        double* oh = o + size_t(h) * V;  // 5. read with the updated state
        for (int j = 0; j < V; ++j) oh[j] = 0;
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) oh[j] += scale * double(qh[i]) * Sh[size_t(i) * V + j];
    }
}

void recurrent(const Shape& s, double* S, const Tokens& x, double scale, double* o) {
    for (int t = 0; t < x.T; ++t) {
        const Tokens r = x.slice(s, t, 1);
        step(s, S, r.q, r.k, r.v, r.g, r.beta, scale, o ? o + size_t(t) * s.v_row() : nullptr);
    }
}

namespace {

// The work buffers of chunked(), sized for a full chunk of C tokens: allocated once per call and
// reused by every head and chunk (a shorter last chunk uses their first rows).
struct ChunkBufs {
    ChunkBufs(size_t rows, int K, int V)
        : Cs(rows),
          G(rows * K),
          L(rows * rows),
          A(rows * rows),
          X(rows * rows),
          W(rows * K),
          U(rows * V),
          D(rows * V),
          Kx(rows * K),
          Q(rows * K),
          Vx(rows * V),
          b(rows),
          Qg(rows * K),
          KG(rows * K),
          Kd(rows * K) {}
    size_t Cs;  // the row stride of L, A and X
    std::vector<double> G, L, A, X, W, U, D;
    std::vector<double> Kx, Q, Vx, b, Qg, KG, Kd;
};

// Gathers the n tokens from t0 of head h: keys, scaled queries, values, beta, and the cumulative gates
// G, reset at the chunk start.
void gather_chunk(const Shape& s, const Tokens& x, double scale, int h, int t0, int n, ChunkBufs& w) {
    const int K = s.K, V = s.V, grp = s.group();
    for (int r = 0; r < n; ++r) {
        const size_t t = size_t(t0 + r);
        for (int i = 0; i < K; ++i) {
            w.Kx[size_t(r) * K + i] = x.k[t * s.qk_row() + size_t(h / grp) * K + i];
            w.Q[size_t(r) * K + i] = scale * double(x.q[t * s.qk_row() + size_t(h / grp) * K + i]);
            const double gi = x.g[t * s.g_row() + size_t(h) * K + i];
            w.G[size_t(r) * K + i] = (r ? w.G[size_t(r - 1) * K + i] : 0.0) + gi;
        }
        for (int j = 0; j < V; ++j) w.Vx[size_t(r) * V + j] = x.v[t * s.v_row() + size_t(h) * V + j];
        w.b[r] = x.beta[t * size_t(s.HV) + h];
    }
}

// Phase A, the pairwise terms: L (strictly lower, times beta) and Aqk (lower), each gated by
// exp(G_r - G_c) <= 1, so no exp of a positive number is ever taken.
void pairwise_terms(const Shape& s, int n, ChunkBufs& w) {
    const int K = s.K;
    const size_t Cs = w.Cs;
    for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c) {
            double l = 0, a = 0;
            if (c <= r)
                for (int i = 0; i < K; ++i) {
                    const double e = exp_f64(w.G[size_t(r) * K + i] - w.G[size_t(c) * K + i]);
                    l += w.Kx[size_t(r) * K + i] * w.Kx[size_t(c) * K + i] * e;
                    a += w.Q[size_t(r) * K + i] * w.Kx[size_t(c) * K + i] * e;
                }
            w.L[size_t(r) * Cs + c] = c < r ? w.b[r] * l : 0.0;
            w.A[size_t(r) * Cs + c] = c <= r ? a : 0.0;
        }
}

// Phase A: X = (I + L)^{-1} by forward substitution (L is strictly lower, so X is unit lower).
void invert_unit_lower(int n, ChunkBufs& w) {
    const size_t Cs = w.Cs;
    for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c) {
            double xv = r == c ? 1.0 : 0.0;
            if (c < r)
                for (int m = c; m < r; ++m) xv -= w.L[size_t(r) * Cs + m] * w.X[size_t(m) * Cs + c];
            w.X[size_t(r) * Cs + c] = xv;
        }
}

// Phase A: queries and keys gated from the chunk start (Q exp G, K exp G) and keys gated to its end
// (K exp(G_n - G), the exp of a difference again, <= 1).
void gated_rows(const Shape& s, int n, ChunkBufs& w) {
    const int K = s.K;
    const size_t last = size_t(n - 1) * K;
    for (int r = 0; r < n; ++r)
        for (int i = 0; i < K; ++i) {
            const size_t ri = size_t(r) * K + i;
            w.Qg[ri] = w.Q[ri] * exp_f64(w.G[ri]);
            w.KG[ri] = w.Kx[ri] * exp_f64(w.G[ri]);
            w.Kd[ri] = w.Kx[ri] * exp_f64(w.G[last + i] - w.G[ri]);
        }
}

// Phase A, the WY transform: W = X Diag(beta) (K exp G), U = X Diag(beta) V.
void wy_transform(const Shape& s, int n, ChunkBufs& w) {
    const int K = s.K, V = s.V;
    const size_t Cs = w.Cs;
    for (int r = 0; r < n; ++r) {
        for (int i = 0; i < K; ++i) {
            double acc = 0;
            for (int c = 0; c <= r; ++c) acc += w.X[size_t(r) * Cs + c] * w.b[c] * w.KG[size_t(c) * K + i];
            w.W[size_t(r) * K + i] = acc;
        }
        for (int j = 0; j < V; ++j) {
            double u = 0;
            for (int c = 0; c <= r; ++c) u += w.X[size_t(r) * Cs + c] * w.b[c] * w.Vx[size_t(c) * V + j];
            w.U[size_t(r) * V + j] = u;
        }
    }
}

// Phase B: D = U - W S, with the state the chunk starts from.
void chunk_deltas(const Shape& s, const double* Sh, int n, ChunkBufs& w) {
    const int K = s.K, V = s.V;
    for (int r = 0; r < n; ++r)
        for (int j = 0; j < V; ++j) {
            double ws = 0;
            for (int i = 0; i < K; ++i) ws += w.W[size_t(r) * K + i] * Sh[size_t(i) * V + j];
            w.D[size_t(r) * V + j] = w.U[size_t(r) * V + j] - ws;
        }
}

// Phase B: O = (Q exp G) S + Aqk D for the chunk's rows of head h, before S moves on.
void chunk_outputs(const Shape& s, const double* Sh, int h, int t0, int n, const ChunkBufs& w, double* o) {
    const int K = s.K, V = s.V;
    const size_t Cs = w.Cs;
    for (int r = 0; r < n; ++r)
        for (int j = 0; j < V; ++j) {
            double acc = 0;
            for (int i = 0; i < K; ++i) acc += w.Qg[size_t(r) * K + i] * Sh[size_t(i) * V + j];
            for (int c = 0; c <= r; ++c) acc += w.A[size_t(r) * Cs + c] * w.D[size_t(c) * V + j];
            o[size_t(t0 + r) * s.v_row() + size_t(h) * V + j] = acc;
        }
}

// Phase B: S = Diag(exp G_n) S + Kd^T D, the state after the chunk.
void advance_state(const Shape& s, double* Sh, int n, const ChunkBufs& w) {
    const int K = s.K, V = s.V;
    const size_t last = size_t(n - 1) * K;
    for (int i = 0; i < K; ++i) {
        const double dl = exp_f64(w.G[last + i]);
        for (int j = 0; j < V; ++j) {
            double acc = dl * Sh[size_t(i) * V + j];
            for (int c = 0; c < n; ++c) acc += w.Kd[size_t(c) * K + i] * w.D[size_t(c) * V + j];
            Sh[size_t(i) * V + j] = acc;
        }
    }
}

}  // namespace

void chunked(const Shape& s, double* S, const Tokens& x, double scale, int C, double* o) {
    ChunkBufs w(size_t(C), s.K, s.V);
    for (int h = 0; h < s.HV; ++h) {
        double* Sh = S + size_t(h) * s.head_state();
        for (int t0 = 0; t0 < x.T; t0 += C) {
            const int n = x.T - t0 < C ? x.T - t0 : C;
            gather_chunk(s, x, scale, h, t0, n, w);
            // ---- phase A: everything within the chunk, independent of the state ----
            pairwise_terms(s, n, w);
            invert_unit_lower(n, w);
            gated_rows(s, n, w);
            wy_transform(s, n, w);
            // ---- phase B: the chunk against the state, then the state past it ----
            chunk_deltas(s, Sh, n, w);
            if (o) chunk_outputs(s, Sh, h, t0, n, w, o);
            advance_state(s, Sh, n, w);
        }
    }
}

void segment_map_explicit(const Shape& s, const Tokens& x, double* M, double* B) {
    const int K = s.K, grp = s.group();
    std::vector<double> T(static_cast<size_t>(K) * K), kw(static_cast<size_t>(K));
    for (int h = 0; h < s.HV; ++h) {
        double* Mh = M + size_t(h) * K * K;
        for (int i = 0; i < K; ++i)
            for (int c = 0; c < K; ++c) Mh[size_t(i) * K + c] = i == c ? 1.0 : 0.0;
        for (int t = 0; t < x.T; ++t) {
            const float* kh = x.k + size_t(t) * s.qk_row() + size_t(h / grp) * K;
            const float* gh = x.g + size_t(t) * s.g_row() + size_t(h) * K;
            const double b = x.beta[size_t(t) * s.HV + h];
            // A_t = (I - b k k^T) Diag(alpha): A[i][c] = (delta_ic - b k_i k_c) alpha_c
            // M <- A_t M, computed as T = Diag(alpha) M; M = T - b k (k^T T)
            for (int i = 0; i < K; ++i) {
                const double a = exp_f64(double(gh[i]));
                for (int c = 0; c < K; ++c) T[size_t(i) * K + c] = a * Mh[size_t(i) * K + c];
            }
            for (int c = 0; c < K; ++c) {
                double acc = 0;
                for (int i = 0; i < K; ++i) acc += double(kh[i]) * T[size_t(i) * K + c];
                kw[c] = acc;
            }
            for (int i = 0; i < K; ++i)
                for (int c = 0; c < K; ++c)
                    Mh[size_t(i) * K + c] = T[size_t(i) * K + c] - b * double(kh[i]) * kw[c];
        }
    }
    // B = run(0)
    for (size_t i = 0; i < s.state_floats(); ++i) B[i] = 0;
    recurrent(s, B, x, 1.0, nullptr);
}

}  // namespace k3::kda::ref
