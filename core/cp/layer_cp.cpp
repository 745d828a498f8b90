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
    const kda::Shape& s = d.s;
    const int R = int(b.size()) - 1, T = b.back(), W1 = d.window_rows(), D = d.d_model;
    const int QK = d.qk_channels(), VC = d.v_channels();
    LayerRun out;
    const FloatBuf st0 = start_state(d, start);
    const KdaState init = KdaState::at(d, const_cast<float*>(st0.data()));

    // ---- project, every rank on its own rows ----
    std::vector<KdaActs> acts(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) {
        acts[size_t(r)].resize(d, b[r + 1] - b[r]);
        model::kda_project(w, d, x + size_t(b[r]) * D, b[r + 1] - b[r], acts[size_t(r)], o.impl);
    }
    // Raw row `t` of a stream (t < 0: row W-1+t of the start window).
    auto raw_row = [&](int stream, int t) -> const float* {
        const int ch = stream == 2 ? VC : QK;
        if (t < 0) {
            const float* win = stream == 0 ? init.win_q : stream == 1 ? init.win_k : init.win_v;
            return win + size_t(W1 + t) * ch;
        }
        const int r = int(std::upper_bound(b.begin(), b.end(), t) - b.begin()) - 1;
        const KdaActs& a = acts[size_t(r)];
        const FloatBuf& buf = stream == 0 ? a.raw_q : stream == 1 ? a.raw_k : a.raw_v;
        return buf.data() + size_t(t - b[r]) * ch;
    };
    // The W-1 raw rows before token t0, row 0 the oldest, into a window of a KdaState layout.
    auto window_before = [&](int t0, FloatBuf& state) {
        const KdaState st = KdaState::at(d, state.data());
        for (int i = 0; i < W1; ++i) {
            const int t = t0 - W1 + i;
            std::memcpy(st.win_q + size_t(i) * QK, raw_row(0, t), sizeof(float) * QK);
            std::memcpy(st.win_k + size_t(i) * QK, raw_row(1, t), sizeof(float) * QK);
            std::memcpy(st.win_v + size_t(i) * VC, raw_row(2, t), sizeof(float) * VC);
        }
    };

    // ---- halo exchange, then conv and activation per rank ----
    for (int r = 0; r < R; ++r) {
        FloatBuf local(d.layer_floats(), 0.0f);
        if (r == 0 || o.halo) {
            window_before(b[r], local);
            std::set<int> from;
            for (int t = std::max(0, b[r] - W1); t < b[r]; ++t) {
                from.insert(int(std::upper_bound(b.begin(), b.end(), t) - b.begin()) - 1);
                out.halo_bytes += 4.0 * (2 * QK + VC);
            }
            out.halo_max_ranks = std::max(out.halo_max_ranks, int(from.size()));
        }
        KdaActs& a = acts[size_t(r)];
        model::kda_conv(w, d, KdaState::at(d, local.data()), a, o.impl);
        model::kda_activate(w, d, a);
    }

    // ---- the KDA core over the ranks ----
    std::vector<Tokens> slices;
    for (const KdaActs& a : acts) slices.push_back(a.tokens());
    const std::vector<RankMap> maps =
        local_maps(Variant::kda, s, slices, d.scale, o.chunk, o.fixup == Fixup::linear, o.impl);
    const CpResult cp =
        combine(Variant::kda, s, slices, maps, init.S, d.scale, o.chunk, o.combiner, o.fixup, o.impl);

    // ---- output, per rank ----
    out.out.assign(size_t(T) * D, 0.0f);
    for (int r = 0; r < R; ++r) {
        KdaActs& a = acts[size_t(r)];
        const size_t n = size_t(a.T) * s.v_row();
        std::copy(cp.o.begin() + ptrdiff_t(size_t(b[r]) * s.v_row()),
                  cp.o.begin() + ptrdiff_t(size_t(b[r]) * s.v_row() + n), a.o.begin());
        model::kda_output(w, d, a, out.out.data() + size_t(b[r]) * D, o.impl);
        append_rows(out.q, a.q, a.T, int(s.qk_row()));
        append_rows(out.k, a.k, a.T, int(s.qk_row()));
        append_rows(out.v, a.v, a.T, int(s.v_row()));
        append_rows(out.g, a.g, a.T, int(s.g_row()));
        append_rows(out.beta, a.beta, a.T, s.HV);
    }
    // Final state: S from the combination, the windows are the sequence's last W-1 raw rows.
    out.state.assign(d.layer_floats(), 0.0f);
    std::copy(cp.S.begin(), cp.S.end(), out.state.begin());
    window_before(T, out.state);
    return out;
}

}  // namespace k3::cp
