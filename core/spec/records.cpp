#include "core/spec/records.h"

#include <algorithm>
#include <cstring>

#include "core/kda/recurrent.h"
#include "core/spec/delta.h"

namespace k3::spec {

using model::KdaActs;
using model::KdaDims;
using model::KdaState;

RecordLayout RecordLayout::of(const KdaDims& d, RecordVariant v) {
    RecordLayout L;
    L.variant = v;
    const int qk = d.qk_channels(), vc = d.v_channels(), gc = d.g_channels(), hv = d.s.HV;
    int at = 0;
    auto put = [&](int& field, int n) { field = at, at += n; };
    switch (v) {  // field order as in spec::record_fields
        case RecordVariant::core_only: put(L.k, qk), put(L.v, vc), put(L.g, gc), put(L.beta, hv); break;
        case RecordVariant::minimal_exact:
            put(L.raw_q, qk), put(L.raw_k, qk), put(L.raw_v, vc), put(L.g, gc), put(L.beta, hv);
            break;
        case RecordVariant::raw_gates:
            put(L.raw_q, qk), put(L.raw_k, qk), put(L.raw_v, vc), put(L.z, gc), put(L.beta_logit, hv);
            break;
        case RecordVariant::no_conv_recompute:
            put(L.k, qk), put(L.v, vc), put(L.g, gc), put(L.beta, hv);
            put(L.raw_q, qk), put(L.raw_k, qk), put(L.raw_v, vc);
            break;
        case RecordVariant::layer_input: put(L.x, d.d_model); break;
        case RecordVariant::delta: put(L.k, qk), put(L.delta, vc), put(L.g, gc); break;
        case RecordVariant::delta_conv:
            put(L.k, qk), put(L.delta, vc), put(L.g, gc), put(L.raw_q, qk), put(L.raw_k, qk),
                put(L.raw_v, vc);
            break;
        case RecordVariant::recoverssm:  // the record (spec::record_fields), then the conv column
            put(L.delta, vc), put(L.k_pre, qk), put(L.z, gc), put(L.raw_q, qk), put(L.raw_k, qk),
                put(L.raw_v, vc);
            break;
    }
    L.floats = at;
    return L;
}

RecordLayout RecordLayout::under_allocated() const {
    RecordLayout L = *this;
    int* fields[] = {&L.k,     &L.v,     &L.g, &L.beta,       &L.delta, &L.raw_q,
                     &L.raw_k, &L.raw_v, &L.z, &L.beta_logit, &L.x,     &L.k_pre};
    int* last = nullptr;
    for (int* f : fields)
        if (*f >= 0 && (!last || *f > *last)) last = f;
    const int size = last ? floats - *last : 0;
    if (!last || *last < size) return L;  // one field, or a last field larger than the rest
    *last -= size;
    L.floats -= size;
    return L;
}

void flip_record_bit(const RecordLayout& lay, float* record, int bit, bool correction) {
    if (correction && lay.delta < 0) return;
    float* f = record + (correction ? lay.delta : lay.g >= 0 ? lay.g : lay.z >= 0 ? lay.z : lay.x);
    uint32_t u;
    std::memcpy(&u, f, sizeof u);
    u ^= 1u << (bit & 31);
    std::memcpy(f, &u, sizeof u);
}

// ---- RecordBuffer ------------------------------------------------------------------------------

void RecordBuffer::reset(const RecordLayout& lay, int layers) {
    lay_ = lay;
    rows_.resize(size_t(layers));
    filled_.assign(size_t(layers), 0);
}

int RecordBuffer::tokens() const {
    if (filled_.empty()) return 0;
    return *std::min_element(filled_.begin(), filled_.end());
}

float* RecordBuffer::append(int layer, int n) {
    FloatBuf& b = rows_[size_t(layer)];
    int& f = filled_[size_t(layer)];
    const size_t need = size_t(f + n) * size_t(lay_.floats);
    if (b.size() < need) b.resize(std::max(need, b.size() * 2));
    float* out = b.data() + size_t(f) * lay_.floats;
    std::fill(out, out + size_t(n) * lay_.floats, 0.0f);
    f += n;
    return out;
}

uint64_t RecordBuffer::bytes() const {
    return uint64_t(tokens()) * uint64_t(lay_.floats) * sizeof(float) * uint64_t(rows_.size());
}

// ---- Recorder ----------------------------------------------------------------------------------

Recorder::Recorder(const model::Model& m, RecordVariant v, bool under_allocated)
    : m_(m), lay_(RecordLayout::of(m.kda(), v)) {
    if (under_allocated) lay_ = lay_.under_allocated();
    buf_.reset(lay_, m.config().n_linear());
}

void Recorder::flip_record_bit(int layer, int token, int bit, bool correction) {
    if (layer < 0 || layer >= buf_.layers() || token < 0 || token >= buf_.tokens()) return;
    spec::flip_record_bit(lay_, buf_.row(layer, token), bit, correction);
}

void Recorder::begin(std::span<const std::byte> start) {
    buf_.reset(lay_, m_.config().n_linear());
    const size_t per_layer = size_t(m_.pool_model().state_bytes_per_layer);
    const KdaDims& d = m_.kda();
    // A layer's floats [from, from + n) of the start state; a missing start reads as zeros (a new sequence).
    auto copy = [&](std::vector<FloatBuf>& to, size_t from, size_t n) {
        to.resize(size_t(buf_.layers()));
        for (int l = 0; l < buf_.layers(); ++l) {
            to[size_t(l)].assign(n, 0.0f);
            if (start.size() >= size_t(l + 1) * per_layer)
                std::memcpy(to[size_t(l)].data(), start.data() + size_t(l) * per_layer + from * sizeof(float),
                            n * sizeof(float));
        }
    };
    if (lay_.delta >= 0) copy(S_, 0, d.state_floats());
    if (lay_.k_pre >= 0) copy(win_, d.state_floats(), d.window_floats());  // KdaState::at: S, then windows
}

void Recorder::on_kda(int layer, int li, uint64_t pos, const float* x, const KdaActs& a) {
    const KdaDims& d = m_.kda();
    const int T = a.T, F = lay_.floats;
    if (T == 0) return;
    float* out = buf_.append(li, T);
    auto put = [&](int off, const FloatBuf& src, int per) {
        if (off < 0) return;
        for (int t = 0; t < T; ++t)
            std::memcpy(out + size_t(t) * F + off, src.data() + size_t(t) * per, sizeof(float) * size_t(per));
    };
    const int qk = d.qk_channels(), vc = d.v_channels(), gc = d.g_channels(), hv = d.s.HV;
    put(lay_.k, a.k, qk), put(lay_.v, a.v, vc), put(lay_.g, a.g, gc), put(lay_.beta, a.beta, hv);
    put(lay_.raw_q, a.raw_q, qk), put(lay_.raw_k, a.raw_k, qk), put(lay_.raw_v, a.raw_v, vc);
    put(lay_.z, a.z, gc), put(lay_.beta_logit, a.beta_logit, hv);
    if (lay_.x >= 0)
        for (int t = 0; t < T; ++t)
            std::memcpy(out + size_t(t) * F + lay_.x, x + size_t(t) * d.d_model,
                        sizeof(float) * size_t(d.d_model));
    if (lay_.k_pre >= 0) {
        // The forward normalised k in place: the layer's conv stage again on the same raw rows and a copy
        // of the windows it started from gives k's bits before the norm (the kernel keeps them in registers).
        conv_.resize(d, T);
        const size_t rows = size_t(T);
        std::copy(a.raw_q.begin(), a.raw_q.begin() + ptrdiff_t(rows * qk), conv_.raw_q.begin());
        std::copy(a.raw_k.begin(), a.raw_k.begin() + ptrdiff_t(rows * qk), conv_.raw_k.begin());
        std::copy(a.raw_v.begin(), a.raw_v.begin() + ptrdiff_t(rows * vc), conv_.raw_v.begin());
        float* w = win_[size_t(li)].data();
        const size_t wq = size_t(d.window_rows()) * size_t(qk);
        model::KdaState st;
        st.win_q = w, st.win_k = w + wq, st.win_v = w + 2 * wq;
        model::kda_conv(m_.kda_weights(li), d, st, conv_, m_.options().impl);
        put(lay_.k_pre, conv_.k, qk);
    }
    if (lay_.delta >= 0) {
        // The kernel keeps delta in registers; recompute it from this layer's S before these tokens.
        if (delta_.size() < size_t(T) * vc) delta_.resize(size_t(T) * vc);
        delta_record(d.s, S_[size_t(li)].data(), a.k.data(), a.v.data(), a.g.data(), a.beta.data(), T,
                     delta_.data());
        put(lay_.delta, delta_, vc);
    }
}

// ---- replay ------------------------------------------------------------------------------------

namespace {

// Copies field `off` of n records into a [n][per] buffer.
void gather(const float* rec, int n, int F, int off, int per, float* to) {
    for (int t = 0; t < n; ++t)
        std::memcpy(to + size_t(t) * per, rec + size_t(t) * F + off, sizeof(float) * size_t(per));
}

// The window after n more raw rows: the last W-1 rows of [window, rows], as kda::conv_step leaves it.
void push_rows(float* win, int rows, int D, const float* rec, int n, int F, int off) {
    if (rows < 1) return;
    for (int t = 0; t < n; ++t) {
        std::memmove(win, win + D, sizeof(float) * size_t(rows - 1) * D);
        std::memcpy(win + size_t(rows - 1) * D, rec + size_t(t) * F + off, sizeof(float) * size_t(D));
    }
}

}  // namespace

FoldInputs recoverssm_fold_inputs(const model::KdaWeights& w, const KdaDims& d, const RecordLayout& L,
                                  const float* rec, int n, ReplayScratch& s) {
    KdaActs& a = s.acts;
    a.resize(d, n);
    const int F = L.floats, qk = d.qk_channels(), vc = d.v_channels(), gc = d.g_channels();
    if (n <= 0) return {a.k.data(), s.c.data(), a.g.data(), 0};
    if (s.c.size() < size_t(n) * vc) s.c.resize(size_t(n) * vc);
    gather(rec, n, F, L.delta, vc, s.c.data());
    gather(rec, n, F, L.k_pre, qk, a.k.data());
    gather(rec, n, F, L.z, gc, a.z.data());
    // The layer's own stages: its L2 norm (q is not needed: zero rows stay zero) and its gate function
    // (beta is computed too, from zero logits, and not read).
    std::fill(a.q.begin(), a.q.begin() + ptrdiff_t(size_t(n) * qk), 0.0f);
    std::fill(a.beta_logit.begin(), a.beta_logit.begin() + ptrdiff_t(size_t(n) * d.s.HV), 0.0f);
    model::kda_normalize(d, a);
    model::kda_gates(w, d, a);
    return {a.k.data(), s.c.data(), a.g.data(), n};
}

void replay_layer(const model::KdaWeights& w, const KdaDims& d, const RecordLayout& L, const KdaState& st,
                  const float* rec, int n, ReplayScratch& s, kda::Impl impl) {
    if (n <= 0) return;
    KdaActs& a = s.acts;
    a.resize(d, n);
    const int F = L.floats, qk = d.qk_channels(), vc = d.v_channels(), gc = d.g_channels(), hv = d.s.HV;
    auto raws = [&] {
        gather(rec, n, F, L.raw_q, qk, a.raw_q.data());
        gather(rec, n, F, L.raw_k, qk, a.raw_k.data());
        gather(rec, n, F, L.raw_v, vc, a.raw_v.data());
    };
    auto core = [&] {  // recurrent core on a.k, a.v, a.g, a.beta; q is not read without an output
        if (s.zeros.size() < size_t(n) * qk) s.zeros.assign(size_t(n) * qk, 0.0f);
        kda::recurrent(d.s, st.S,
                       kda::Tokens{s.zeros.data(), a.k.data(), a.v.data(), a.g.data(), a.beta.data(), n},
                       d.scale, nullptr, impl);
    };
    auto windows = [&] {
        const int r = d.window_rows();
        push_rows(st.win_q, r, qk, rec, n, F, L.raw_q);
        push_rows(st.win_k, r, qk, rec, n, F, L.raw_k);
        push_rows(st.win_v, r, vc, rec, n, F, L.raw_v);
    };
    switch (L.variant) {
        case RecordVariant::minimal_exact:
            raws();
            gather(rec, n, F, L.g, gc, a.g.data());
            gather(rec, n, F, L.beta, hv, a.beta.data());
            model::kda_replay(w, d, st, a, impl);
            break;
        case RecordVariant::raw_gates:
            raws();
            gather(rec, n, F, L.z, gc, a.z.data());
            gather(rec, n, F, L.beta_logit, hv, a.beta_logit.data());
            model::kda_conv(w, d, st, a, impl);
            model::kda_activate(w, d, a);
            model::kda_core(d, st.S, a, model::CoreMode::recurrent, 1, impl);
            break;
        case RecordVariant::layer_input: {
            if (s.x.size() < size_t(n) * d.d_model) s.x.resize(size_t(n) * d.d_model);
            gather(rec, n, F, L.x, d.d_model, s.x.data());
            model::kda_project(w, d, s.x.data(), n, a, impl);
            model::kda_conv(w, d, st, a, impl);
            model::kda_activate(w, d, a);
            model::kda_core(d, st.S, a, model::CoreMode::recurrent, 1, impl);
            break;
        }
        case RecordVariant::core_only:
        case RecordVariant::no_conv_recompute:
            gather(rec, n, F, L.k, qk, a.k.data());
            gather(rec, n, F, L.v, vc, a.v.data());
            gather(rec, n, F, L.g, gc, a.g.data());
            gather(rec, n, F, L.beta, hv, a.beta.data());
            core();
            if (L.variant == RecordVariant::no_conv_recompute) windows();
            break;
        case RecordVariant::delta:
        case RecordVariant::delta_conv:
            delta_replay(d.s, st.S, rec + L.k, rec + L.delta, rec + L.g, n, size_t(F));
            if (L.variant == RecordVariant::delta_conv) windows();
            break;
        case RecordVariant::recoverssm: {
            const FoldInputs f = recoverssm_fold_inputs(w, d, L, rec, n, s);
            for (int t = 0; t < n; ++t)
                delta_replay(d.s, st.S, f.k + size_t(t) * qk, f.c + size_t(t) * vc, f.g + size_t(t) * gc, 1,
                             0);
            windows();
            break;
        }
    }
}

void replay(const model::Model& m, model::Sequence& seq, const RecordBuffer& buf, int first, int n,
            ReplayScratch& s) {
    if (n <= 0) return;
    for (int li = 0; li < buf.layers(); ++li)
        replay_layer(m.kda_weights(li), m.kda(), buf.layout(), m.kda_state(seq, li), buf.row(li, first), n, s,
                     m.options().impl);
}

}  // namespace k3::spec
