#include "core/model/kda_layer.h"

#include "core/kda/chunked.h"
#include "core/kda/conv.h"
#include "core/kda/gates.h"
#include "core/kda/recurrent.h"
#include "core/model/matmul.h"
#include "core/model/norm.h"
#include "core/model/vec_kernels.h"

namespace k3::model {

KdaState KdaState::at(const KdaDims& d, float* base) {
    const size_t wq = size_t(d.window_rows()) * d.qk_channels();
    KdaState s;
    s.S = base;
    s.win_q = base + d.state_floats();
    s.win_k = s.win_q + wq;
    s.win_v = s.win_k + wq;
    return s;
}

void KdaActs::resize(const KdaDims& d, int T_) {
    T = T_;
    const size_t t = size_t(T_), qk = size_t(d.qk_channels()), vc = size_t(d.v_channels()),
                 gc = size_t(d.g_channels());
    auto grow = [](FloatBuf& b, size_t n) {
        if (b.size() < n) b.resize(n);
    };
    grow(raw_q, t * qk), grow(raw_k, t * qk), grow(raw_v, t * vc);
    grow(z, t * gc), grow(beta_logit, t * size_t(d.s.HV)), grow(gate_out, t * vc),
        grow(low, t * size_t(d.rank));
    grow(q, t * qk), grow(k, t * qk), grow(v, t * vc), grow(g, t * gc), grow(beta, t * size_t(d.s.HV));
    grow(o, t * vc), grow(y, t * vc);
}

void kda_project(const KdaWeights& w, const KdaDims& d, const float* x, int T, KdaActs& a, Impl impl) {
    const int D = d.d_model, R = d.rank;
    matmul(x, T, D, w.q.view(), a.raw_q.data(), w.q.out, impl);
    matmul(x, T, D, w.k.view(), a.raw_k.data(), w.k.out, impl);
    matmul(x, T, D, w.v.view(), a.raw_v.data(), w.v.out, impl);
    matmul(x, T, D, w.b.view(), a.beta_logit.data(), w.b.out, impl);
    matmul(x, T, D, w.f_a.view(), a.low.data(), R, impl);
    matmul(a.low.data(), T, R, w.f_b.view(), a.z.data(), w.f_b.out, impl);
    if (d.full_rank_gate) {
        matmul(x, T, D, w.g_proj.view(), a.gate_out.data(), w.g_proj.out, impl);
    } else {
        matmul(x, T, D, w.g_a.view(), a.low.data(), R, impl);
        matmul(a.low.data(), T, R, w.g_b.view(), a.gate_out.data(), w.g_b.out, impl);
    }
}

void kda_conv(const KdaWeights& w, const KdaDims& d, const KdaState& st, KdaActs& a, Impl impl) {
    const int W = d.conv_width, QK = d.qk_channels(), VC = d.v_channels();
    kda::conv_sequence(QK, W, st.win_q, a.raw_q.data(), a.T, w.conv_q.data(), a.q.data());
    kda::conv_sequence(QK, W, st.win_k, a.raw_k.data(), a.T, w.conv_k.data(), a.k.data());
    kda::conv_sequence(VC, W, st.win_v, a.raw_v.data(), a.T, w.conv_v.data(), a.v.data());
    // kda::silu_inplace's bits, vectorised (vec_kernels.h).
    silu(a.q.data(), size_t(a.T) * QK, impl);
    silu(a.k.data(), size_t(a.T) * QK, impl);
    silu(a.v.data(), size_t(a.T) * VC, impl);
}

void kda_normalize(const KdaDims& d, KdaActs& a) {
    kda::l2norm_rows(a.q.data(), a.T * d.s.H, d.s.K);
    kda::l2norm_rows(a.k.data(), a.T * d.s.H, d.s.K);
}

void kda_gates(const KdaWeights& w, const KdaDims& d, KdaActs& a) {
    for (int t = 0; t < a.T; ++t) {
        const size_t r = size_t(t) * d.g_channels();
        if (d.gate_lower_bound < 0)
            kda::kda_gate_bounded(a.z.data() + r, w.dt_bias.data(), w.A_log.data(), d.s.HV, d.s.K,
                                  d.gate_lower_bound, a.g.data() + r);
        else
            kda::kda_gate(a.z.data() + r, w.dt_bias.data(), w.A_log.data(), d.s.HV, d.s.K, a.g.data() + r);
    }
    kda::beta_sigmoid(a.beta_logit.data(), a.T * d.s.HV, a.beta.data());
}

void kda_activate(const KdaWeights& w, const KdaDims& d, KdaActs& a) {
    kda_normalize(d, a);
    kda_gates(w, d, a);
}

void kda_core(const KdaDims& d, float* S, KdaActs& a, CoreMode mode, int chunk, Impl impl) {
    if (a.T == 0) return;
    if (mode == CoreMode::chunked)
        kda::chunked(d.s, S, a.tokens(), d.scale, chunk, a.o.data(), impl);
    else
        kda::recurrent(d.s, S, a.tokens(), d.scale, a.o.data(), impl);
}

void kda_output(const KdaWeights& w, const KdaDims& d, KdaActs& a, float* out, Impl impl) {
    head_norm_gate(a.o.data(), a.gate_out.data(), a.T, d.s.HV, d.s.V, w.o_norm.data(), kRmsEps, a.y.data());
    matmul(a.y.data(), a.T, d.v_channels(), w.o.view(), out, d.d_model, impl);
}

void kda_forward(const KdaWeights& w, const KdaDims& d, const KdaState& st, const float* x, int T, KdaActs& a,
                 float* out, CoreMode mode, int chunk, Impl impl) {
    a.resize(d, T);
    if (T == 0) return;
    kda_project(w, d, x, T, a, impl);
    kda_conv(w, d, st, a, impl);
    kda_activate(w, d, a);
    kda_core(d, st.S, a, mode, chunk, impl);
    kda_output(w, d, a, out, impl);
}

void kda_replay(const KdaWeights& w, const KdaDims& d, const KdaState& st, KdaActs& a, Impl impl) {
    if (a.T == 0) return;
    kda_conv(w, d, st, a, impl);
    kda_normalize(d, a);
    kda_core(d, st.S, a, CoreMode::recurrent, 1, impl);
}

}  // namespace k3::model
