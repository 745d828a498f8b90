#include "core/cp/reference.h"

#include "core/base/fmath.h"
#include "core/kda/reference.h"

namespace k3::cp::ref {

namespace {

// Linear and diagonal in fp64, token by token.
void gated(bool decay, const Shape& s, double* S, const Tokens& x, double scale, double* o) {
    const int K = s.K, V = s.V, grp = s.group();
    for (int t = 0; t < x.T; ++t)
        for (int h = 0; h < s.HV; ++h) {
            double* Sh = S + size_t(h) * s.head_state();
            const size_t qk = size_t(t) * s.qk_row() + size_t(h / grp) * K;
            const float* v = x.v + size_t(t) * s.v_row() + size_t(h) * V;
            const float* g = x.g + size_t(t) * s.g_row() + size_t(h) * K;
            for (int i = 0; i < K; ++i) {
                const double a = decay ? exp_f64(double(g[i])) : 1.0;
                for (int j = 0; j < V; ++j)
                    Sh[size_t(i) * V + j] = a * Sh[size_t(i) * V + j] + double(x.k[qk + i]) * double(v[j]);
            }
            if (!o) continue;
            double* oh = o + size_t(t) * s.v_row() + size_t(h) * V;
            for (int j = 0; j < V; ++j) oh[j] = 0;
            for (int i = 0; i < K; ++i)
                for (int j = 0; j < V; ++j) oh[j] += scale * double(x.q[qk + i]) * Sh[size_t(i) * V + j];
        }
}

// out = A B for K x K matrices per head (out may not alias).
void mul_heads(const Shape& s, const double* A, const double* B, double* out) {
    const int K = s.K;
    for (int h = 0; h < s.HV; ++h) {
        const size_t o = size_t(h) * K * K;
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < K; ++j) {
                double acc = 0;
                for (int l = 0; l < K; ++l) acc += A[o + size_t(i) * K + l] * B[o + size_t(l) * K + j];
                out[o + size_t(i) * K + j] = acc;
            }
    }
}

// acc += (P - I) X per head, P [K][K], X [K][V].
void add_minus_identity(const Shape& s, const double* P, const double* X, double* acc) {
    const int K = s.K, V = s.V;
    for (int h = 0; h < s.HV; ++h) {
        const double* Ph = P + size_t(h) * K * K;
        const double* Xh = X + size_t(h) * s.head_state();
        double* Ah = acc + size_t(h) * s.head_state();
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) {
                double y = -Xh[size_t(i) * V + j];
                for (int l = 0; l < K; ++l) y += Ph[size_t(i) * K + l] * Xh[size_t(l) * V + j];
                Ah[size_t(i) * V + j] += y;
            }
    }
}

std::vector<double> identity(const Shape& s) {
    std::vector<double> I(size_t(s.HV) * s.K * s.K, 0.0);
    for (int h = 0; h < s.HV; ++h)
        for (int i = 0; i < s.K; ++i) I[(size_t(h) * s.K + i) * s.K + i] = 1.0;
    return I;
}

}  // namespace

void run(Variant v, const Shape& s, double* S, const Tokens& x, double scale, double* o) {
    if (v == Variant::kda) return kda::ref::recurrent(s, S, x, scale, o);
    gated(v == Variant::diagonal, s, S, x, scale, o);
}

MapF64 map(Variant v, const Shape& s, const Tokens& x) {
    MapF64 m;
    m.B.assign(s.state_floats(), 0.0);
    run(v, s, m.B.data(), x, 1.0, nullptr);
    m.M = identity(s);
    if (v == Variant::kda) {
        // The recurrence on a K x K state with v = 0 from S = I ends in M (B = 0 without values).
        const Shape sk{s.H, s.HV, s.K, s.K};
        std::vector<float> zeros(size_t(x.T) * sk.v_row(), 0.0f);
        Tokens xz = x;
        xz.v = zeros.data();
        kda::ref::recurrent(sk, m.M.data(), xz, 1.0, nullptr);
    } else if (v == Variant::diagonal) {
        for (int t = 0; t < x.T; ++t)
            for (int h = 0; h < s.HV; ++h)
                for (int i = 0; i < s.K; ++i)
                    m.M[(size_t(h) * s.K + i) * s.K + i] *=
                        exp_f64(double(x.g[size_t(t) * s.g_row() + size_t(h) * s.K + i]));
    }
    return m;
}

MapF64 promote(const Shape& s, const float* M, const float* B) {
    MapF64 m;
    m.M.assign(M, M + size_t(s.HV) * s.K * s.K);
    m.B.assign(B, B + s.state_floats());
    return m;
}

std::vector<double> naive_sum_error(const Shape& s, const std::vector<MapF64>& maps, const double* S0) {
    std::vector<double> err(s.state_floats(), 0.0);
    // Walk r from the last slice down, keeping P = M_{R-1} ... M_{r+1} (the identity for the last).
    std::vector<double> P = identity(s), tmp(P.size());
    for (size_t r = maps.size(); r-- > 0;) {
        add_minus_identity(s, P.data(), maps[r].B.data(), err.data());
        mul_heads(s, P.data(), maps[r].M.data(), tmp.data());
        std::swap(P, tmp);
    }
    add_minus_identity(s, P.data(), S0, err.data());  // P = M_{R-1} ... M_0
    return err;
}

}  // namespace k3::cp::ref
