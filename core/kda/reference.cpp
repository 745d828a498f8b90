#include "core/kda/reference.h"

#include <vector>

#include "core/base/fmath.h"

namespace k3::kda::ref {

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

void chunked(const Shape& s, double* S, const Tokens& x, double scale, int C, double* o) {
    const int K = s.K, V = s.V, grp = s.group();
    const size_t Cs = size_t(C);
    std::vector<double> G(Cs * K), L(Cs * Cs), A(Cs * Cs), X(Cs * Cs), W(Cs * K), U(Cs * V), D(Cs * V);
    std::vector<double> Kx(Cs * K), Q(Cs * K), Vx(Cs * V), b(Cs), Qg(Cs * K), KG(Cs * K), Kd(Cs * K);
    for (int h = 0; h < s.HV; ++h) {
        double* Sh = S + size_t(h) * s.head_state();
        for (int t0 = 0; t0 < x.T; t0 += C) {
            const int n = x.T - t0 < C ? x.T - t0 : C;
            // ---- gather the chunk, cumulative gates (reset at the chunk start) ----
            for (int r = 0; r < n; ++r) {
                const size_t t = size_t(t0 + r);
                for (int i = 0; i < K; ++i) {
                    Kx[size_t(r) * K + i] = x.k[t * s.qk_row() + size_t(h / grp) * K + i];
                    Q[size_t(r) * K + i] = scale * double(x.q[t * s.qk_row() + size_t(h / grp) * K + i]);
                    const double gi = x.g[t * s.g_row() + size_t(h) * K + i];
                    G[size_t(r) * K + i] = (r ? G[size_t(r - 1) * K + i] : 0.0) + gi;
                }
                for (int j = 0; j < V; ++j) Vx[size_t(r) * V + j] = x.v[t * s.v_row() + size_t(h) * V + j];
                b[r] = x.beta[t * size_t(s.HV) + h];
            }
            // ---- phase A: L, Aqk with exp(G_r - G_s) <= 1; X = (I + L)^{-1}; W, U ----
            for (int r = 0; r < n; ++r)
                for (int c = 0; c < n; ++c) {
                    double l = 0, a = 0;
                    if (c <= r)
                        for (int i = 0; i < K; ++i) {
                            const double e = exp_f64(G[size_t(r) * K + i] - G[size_t(c) * K + i]);
                            l += Kx[size_t(r) * K + i] * Kx[size_t(c) * K + i] * e;
                            a += Q[size_t(r) * K + i] * Kx[size_t(c) * K + i] * e;
                        }
                    L[size_t(r) * Cs + c] = c < r ? b[r] * l : 0.0;
                    A[size_t(r) * Cs + c] = c <= r ? a : 0.0;
                }
            for (int r = 0; r < n; ++r)
                for (int c = 0; c < n; ++c) {
                    double xv = r == c ? 1.0 : 0.0;
                    if (c < r)
                        for (int m = c; m < r; ++m) xv -= L[size_t(r) * Cs + m] * X[size_t(m) * Cs + c];
                    X[size_t(r) * Cs + c] = xv;
                }
            const size_t last = size_t(n - 1) * K;
            for (int r = 0; r < n; ++r)
                for (int i = 0; i < K; ++i) {
                    const size_t ri = size_t(r) * K + i;
                    Qg[ri] = Q[ri] * exp_f64(G[ri]);
                    KG[ri] = Kx[ri] * exp_f64(G[ri]);
                    Kd[ri] = Kx[ri] * exp_f64(G[last + i] - G[ri]);
                }
            for (int r = 0; r < n; ++r) {
                for (int i = 0; i < K; ++i) {
                    double w = 0;
                    for (int c = 0; c <= r; ++c) w += X[size_t(r) * Cs + c] * b[c] * KG[size_t(c) * K + i];
                    W[size_t(r) * K + i] = w;
                }
                for (int j = 0; j < V; ++j) {
                    double u = 0;
                    for (int c = 0; c <= r; ++c) u += X[size_t(r) * Cs + c] * b[c] * Vx[size_t(c) * V + j];
                    U[size_t(r) * V + j] = u;
                }
            }
            // ---- phase B: D = U - W S; O = (Q exp G) S + Aqk D; S = Diag(exp G_n) S + Kd^T D ----
            for (int r = 0; r < n; ++r)
                for (int j = 0; j < V; ++j) {
                    double ws = 0;
                    for (int i = 0; i < K; ++i) ws += W[size_t(r) * K + i] * Sh[size_t(i) * V + j];
                    D[size_t(r) * V + j] = U[size_t(r) * V + j] - ws;
                }
            if (o)
                for (int r = 0; r < n; ++r)
                    for (int j = 0; j < V; ++j) {
                        double acc = 0;
                        for (int i = 0; i < K; ++i) acc += Qg[size_t(r) * K + i] * Sh[size_t(i) * V + j];
                        for (int c = 0; c <= r; ++c) acc += A[size_t(r) * Cs + c] * D[size_t(c) * V + j];
                        o[size_t(t0 + r) * s.v_row() + size_t(h) * V + j] = acc;
                    }
            for (int i = 0; i < K; ++i) {
                const double dl = exp_f64(G[last + i]);
                for (int j = 0; j < V; ++j) {
                    double acc = dl * Sh[size_t(i) * V + j];
                    for (int c = 0; c < n; ++c) acc += Kd[size_t(c) * K + i] * D[size_t(c) * V + j];
                    Sh[size_t(i) * V + j] = acc;
                }
            }
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
