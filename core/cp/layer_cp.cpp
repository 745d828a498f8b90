#include "core/cp/layer_cp.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace k3::cp {

using model::KdaActs;
using model::KdaDims;
using model::KdaState;

namespace {

// Appends the first n rows of src ([rows][ch]) to dst.
void append_rows(FloatBuf& dst, const FloatBuf& src, int n, int ch) {
    dst.insert(dst.end(), src.begin(), src.begin() + ptrdiff_t(n) * ch);
}

FloatBuf start_state(const KdaDims& d, const float* start) {
    return start ? FloatBuf(start, start + d.layer_floats()) : FloatBuf(d.layer_floats(), 0.0f);
}

// The rank whose slice holds token t.
int rank_of(const Bounds& b, int t) { return int(std::upper_bound(b.begin(), b.end(), t) - b.begin()) - 1; }

// The core's inputs of one rank's a.T tokens, appended in token order.
void append_core_inputs(LayerRun& out, const KdaActs& a, const kda::Shape& s) {
    append_rows(out.q, a.q, a.T, int(s.qk_row()));
    append_rows(out.k, a.k, a.T, int(s.qk_row()));
    append_rows(out.v, a.v, a.T, int(s.v_row()));
    append_rows(out.g, a.g, a.T, int(s.g_row()));
    append_rows(out.beta, a.beta, a.T, s.HV);
}

// Project: every rank on its own rows of x.
std::vector<KdaActs> project_ranks(const model::KdaWeights& w, const KdaDims& d, const float* x,
                                   const Bounds& b, Impl impl) {
    const int R = int(b.size()) - 1, D = d.d_model;
    std::vector<KdaActs> acts(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) {
        acts[size_t(r)].resize(d, b[r + 1] - b[r]);
        model::kda_project(w, d, x + size_t(b[r]) * D, b[r + 1] - b[r], acts[size_t(r)], impl);
    }
    return acts;
}

// The raw (pre-conv) q/k/v rows of the whole sequence, wherever they live: on the rank whose slice
// holds the token, or, before the first token, in the start state's windows. What a halo reads.
class RawRows {
  public:
    RawRows(const KdaDims& d, const Bounds& b, const std::vector<KdaActs>& acts, const KdaState& init)
        : d_(d),
          b_(b),
          acts_(acts),
          init_(init),
          W1_(d.window_rows()),
          QK_(d.qk_channels()),
          VC_(d.v_channels()) {}

    // Raw row `t` of a stream (0 q, 1 k, 2 v; t < 0: row W-1+t of the start window).
    const float* row(int stream, int t) const {
        const int ch = stream == 2 ? VC_ : QK_;
        if (t < 0) {
            const float* win = stream == 0 ? init_.win_q : stream == 1 ? init_.win_k : init_.win_v;
            return win + size_t(W1_ + t) * ch;
        }
        const int r = rank_of(b_, t);
        const KdaActs& a = acts_[size_t(r)];
        const FloatBuf& buf = stream == 0 ? a.raw_q : stream == 1 ? a.raw_k : a.raw_v;
        return buf.data() + size_t(t - b_[r]) * ch;
    }
    // The W-1 raw rows before token t0, row 0 the oldest, into a window of a KdaState layout.
    void window_before(int t0, FloatBuf& state) const {
        const KdaState st = KdaState::at(d_, state.data());
        for (int i = 0; i < W1_; ++i) {
            const int t = t0 - W1_ + i;
            std::memcpy(st.win_q + size_t(i) * QK_, row(0, t), sizeof(float) * QK_);
            std::memcpy(st.win_k + size_t(i) * QK_, row(1, t), sizeof(float) * QK_);
            std::memcpy(st.win_v + size_t(i) * VC_, row(2, t), sizeof(float) * VC_);
        }
    }

  private:
    const KdaDims& d_;
    const Bounds& b_;
    const std::vector<KdaActs>& acts_;
    const KdaState& init_;
    const int W1_, QK_, VC_;
};

// Zeroes the newest row of the q, k and v windows of a KdaState layout (the falsifier hook).
void drop_newest_row(const KdaDims& d, FloatBuf& state) {
    const KdaState st = KdaState::at(d, state.data());
    const size_t last = size_t(d.window_rows() - 1), QK = size_t(d.qk_channels()),
                 VC = size_t(d.v_channels());
    std::fill_n(st.win_q + last * QK, QK, 0.0f);
    std::fill_n(st.win_k + last * QK, QK, 0.0f);
    std::fill_n(st.win_v + last * VC, VC, 0.0f);
}

// Halo exchange, then conv and activation per rank. Rank 0 always takes its window (from the start
// state); without the halo every later rank starts from a zero window. Counts what the halos send.
void conv_ranks(const model::KdaWeights& w, const KdaDims& d, const Bounds& b, const LayerCpOptions& o,
                const RawRows& raw, std::vector<KdaActs>& acts, LayerRun& out) {
    const int R = int(b.size()) - 1, W1 = d.window_rows();
    const int QK = d.qk_channels(), VC = d.v_channels();
    for (int r = 0; r < R; ++r) {
        FloatBuf local(d.layer_floats(), 0.0f);
        if (r == 0 || o.halo) {
            raw.window_before(b[r], local);
            if (r == o.drop_newest_halo_row && W1 > 0) drop_newest_row(d, local);
            std::set<int> from;
            for (int t = std::max(0, b[r] - W1); t < b[r]; ++t) {
                from.insert(rank_of(b, t));
                out.halo_bytes += 4.0 * (2 * QK + VC);
            }
            out.halo_max_ranks = std::max(out.halo_max_ranks, int(from.size()));
        }
        KdaActs& a = acts[size_t(r)];
        model::kda_conv(w, d, KdaState::at(d, local.data()), a, o.impl);
        model::kda_activate(w, d, a);
    }
}

// The KDA core over the ranks: local maps, then their combination from the start state.
CpResult core_over_ranks(const KdaDims& d, const std::vector<KdaActs>& acts, const KdaState& init,
                         const LayerCpOptions& o) {
    std::vector<Tokens> slices;
    for (const KdaActs& a : acts) slices.push_back(a.tokens());
    const std::vector<RankMap> maps =
        local_maps(Variant::kda, d.s, slices, d.scale, o.chunk, o.fixup == Fixup::linear, o.impl);
    return combine(Variant::kda, d.s, slices, maps, init.S, d.scale, o.chunk, o.combiner, o.fixup, o.impl);
}

// Output per rank: its rows of the core's output through the output projection, into out.out; and
// the core's inputs, in token order.
void output_ranks(const model::KdaWeights& w, const KdaDims& d, const Bounds& b, const CpResult& cp,
                  Impl impl, std::vector<KdaActs>& acts, LayerRun& out) {
    const kda::Shape& s = d.s;
    const int R = int(b.size()) - 1, T = b.back(), D = d.d_model;
    out.out.assign(size_t(T) * D, 0.0f);
    for (int r = 0; r < R; ++r) {
        KdaActs& a = acts[size_t(r)];
        const size_t n = size_t(a.T) * s.v_row();
        std::copy(cp.o.begin() + ptrdiff_t(size_t(b[r]) * s.v_row()),
                  cp.o.begin() + ptrdiff_t(size_t(b[r]) * s.v_row() + n), a.o.begin());
        model::kda_output(w, d, a, out.out.data() + size_t(b[r]) * D, impl);
        append_core_inputs(out, a, s);
    }
}

}  // namespace

LayerRun layer_single_rank(const model::KdaWeights& w, const KdaDims& d, const float* x, int T,
                           const float* start, int chunk, Impl impl) {
    LayerRun r;
    r.state = start_state(d, start);
    r.out.assign(size_t(T) * d.d_model, 0.0f);
    KdaActs a;
    model::kda_forward(w, d, KdaState::at(d, r.state.data()), x, T, a, r.out.data(), model::CoreMode::chunked,
                       chunk, impl);
    const kda::Shape& s = d.s;
    append_rows(r.q, a.q, T, int(s.qk_row()));
    append_rows(r.k, a.k, T, int(s.qk_row()));
    append_rows(r.v, a.v, T, int(s.v_row()));
    append_rows(r.g, a.g, T, int(s.g_row()));
    append_rows(r.beta, a.beta, T, s.HV);
    return r;
}

LayerRun layer_context_parallel(const model::KdaWeights& w, const KdaDims& d, const float* x, const Bounds& b,
                                const float* start, const LayerCpOptions& o) {
    LayerRun out;
    const FloatBuf st0 = start_state(d, start);
    const KdaState init = KdaState::at(d, const_cast<float*>(st0.data()));
    std::vector<KdaActs> acts = project_ranks(w, d, x, b, o.impl);
    const RawRows raw(d, b, acts, init);
    conv_ranks(w, d, b, o, raw, acts, out);
    const CpResult cp = core_over_ranks(d, acts, init, o);
    output_ranks(w, d, b, cp, o.impl, acts, out);
    // Final state: S from the combination, the windows are the sequence's last W-1 raw rows.
    out.state.assign(d.layer_floats(), 0.0f);
    std::copy(cp.S.begin(), cp.S.end(), out.state.begin());
    raw.window_before(b.back(), out.state);
    return out;
}

}  // namespace k3::cp
