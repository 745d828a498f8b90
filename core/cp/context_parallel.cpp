#include "core/cp/context_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/rng.h"
#include "core/kda/affine.h"

namespace k3::cp {

const char* combiner_id(Combiner c) {
    switch (c) {
        case Combiner::naive_sum: return "naive_sum";
        case Combiner::serial: return "serial";
        case Combiner::scan: return "scan";
    }
    return "?";
}

const char* combiner_title(Combiner c) {
    switch (c) {
        case Combiner::naive_sum: return "naive sum of zero-start states (wrong)";
        case Combiner::serial: return "serial state passing";
        case Combiner::scan: return "affine scan (log depth)";
    }
    return "?";
}

const char* fixup_id(Fixup f) { return f == Fixup::rerun ? "rerun" : "linear"; }

std::string check_bounds(const Bounds& b, int T) {
    if (b.size() < 2) return "need at least one slice (two bounds)";
    if (b.front() != 0) return "the first bound must be 0, not " + std::to_string(b.front());
    if (b.back() != T)
        return "the last bound must be T = " + std::to_string(T) + ", not " + std::to_string(b.back());
    for (size_t r = 0; r + 1 < b.size(); ++r)
        if (b[r + 1] <= b[r])
            return "slice " + std::to_string(r) + " [" + std::to_string(b[r]) + ", " +
                   std::to_string(b[r + 1]) + ") is empty";
    return {};
}

Bounds even_bounds(int T, int R) {
    Bounds b{0};
    for (int r = 0; r < R; ++r) b.push_back(b.back() + T / R + (r < T % R ? 1 : 0));
    return b;
}

Bounds uneven_bounds(int T, int R, int chunk, int short_len, uint64_t seed) {
    const Bounds even = even_bounds(T, R);
    if (R < 2 || T < 4 * R + short_len) return even;
    Bounds b = even;
    Rng rng(seed);
    const double step = double(T) / R;
    for (int r = 1; r < R; ++r) b[size_t(r)] = int(std::floor(step * (r + rng.uniform(-0.3, 0.3))));
    if (R >= 3) b[2] = b[1] + short_len;
    auto on_grid = [&](int x) { return chunk > 1 && x % chunk == 0; };
    for (int r = 1; r < R; ++r)
        if (on_grid(b[size_t(r)])) {
            if (R >= 3 && (r == 1 || r == 2))
                b[1] += 1, b[2] += 1;  // keep the short slice's length
            else
                b[size_t(r)] += 1;
        }
    for (int r = 1; r < R; ++r)
        if (on_grid(b[size_t(r)])) return even;
    return check_bounds(b, T).empty() ? b : even;
}

std::vector<Tokens> split(const Shape& s, const Tokens& x, const Bounds& bounds) {
    std::vector<Tokens> out;
    for (size_t r = 0; r + 1 < bounds.size(); ++r)
        out.push_back(x.slice(s, bounds[r], bounds[r + 1] - bounds[r]));
    return out;
}

std::vector<RankMap> local_maps(Variant v, const Shape& s, const std::vector<Tokens>& slices, float scale,
                                int C, bool outputs, Impl impl) {
    std::vector<RankMap> maps(slices.size());
    int t0 = 0;
    for (size_t r = 0; r < slices.size(); ++r) {
        RankMap& m = maps[r];
        m.t0 = t0;
        m.T = slices[r].T;
        t0 += m.T;
        m.M.assign(size_t(s.HV) * s.K * s.K, 0.0f);
        m.B.assign(s.state_floats(), 0.0f);
        if (outputs) {
            m.o0.assign(size_t(m.T) * s.v_row(), 0.0f);
            m.eo.assign(size_t(m.T) * s.g_row(), 0.0f);
        }
        segment_map(v, s, slices[r], scale, C, m.M.data(), m.B.data(), outputs ? m.o0.data() : nullptr,
                    outputs ? m.eo.data() : nullptr, impl);
    }
    return maps;
}

namespace {

double buffer_bytes(const FloatBuf& b) { return 4.0 * double(b.size()); }

// S_in of every rank and the final state from the maps (step 2), counting into sent[r] the bytes rank
// r sends. For naive_sum the final state is the sum; for the exact combiners it is left to the fix-up
// (the last rank's S_out).
std::vector<FloatBuf> start_states(const Shape& s, const std::vector<RankMap>& maps, const float* S0,
                                   Combiner c, FloatBuf* naive_final, std::vector<double>& sent, Impl impl) {
    const size_t R = maps.size(), n = s.state_floats();
    std::vector<FloatBuf> S_in(R, FloatBuf(S0, S0 + n));
    sent.assign(R, 0.0);
    switch (c) {
        case Combiner::naive_sum: {
            FloatBuf acc(S0, S0 + n);
            for (size_t r = 0; r < R; ++r) {
                S_in[r] = acc;
                for (size_t e = 0; e < n; ++e) acc[e] = acc[e] + maps[r].B[e];
                if (r + 1 < R) sent[r] += buffer_bytes(acc);
            }
            *naive_final = acc;
            break;
        }
        case Combiner::serial:
            for (size_t r = 0; r + 1 < R; ++r) {
                kda::affine_apply(s, maps[r].M.data(), maps[r].B.data(), S_in[r].data(), S_in[r + 1].data(),
                                  impl);
                sent[r] += buffer_bytes(S_in[r + 1]);
            }
            break;
        case Combiner::scan: {
            // Hillis-Steele: after the round with offset d, P[r] = map_r ∘ ... ∘ map_{max(0, r-2d+1)}.
            std::vector<kda::AffineMap> P(R), next(R);
            for (size_t r = 0; r < R; ++r) P[r] = {s, maps[r].M, maps[r].B};
            for (size_t d = 1; d < R; d *= 2) {
                for (size_t r = 0; r < R; ++r) {
                    if (r < d) {
                        next[r] = P[r];
                        continue;
                    }
                    sent[r - d] += buffer_bytes(P[r - d].M) + buffer_bytes(P[r - d].B);  // to rank r
                    next[r] = kda::compose(P[r], P[r - d], impl);
                }
                std::swap(P, next);
            }
            for (size_t r = 0; r + 1 < R; ++r)
                kda::affine_apply(s, P[r].M.data(), P[r].B.data(), S0, S_in[r + 1].data(), impl);
            break;
        }
    }
    return S_in;
}

}  // namespace

CpResult combine(Variant v, const Shape& s, const std::vector<Tokens>& slices,
                 const std::vector<RankMap>& maps, const float* S0, float scale, int C, Combiner c, Fixup f,
                 Impl impl) {
    CpResult out;
    FloatBuf naive_final;
    out.S_in = start_states(s, maps, S0, c, &naive_final, out.bytes_sent, impl);
    const size_t R = maps.size();
    int T = 0;
    for (const RankMap& m : maps) T += m.T;
    out.o.assign(size_t(T) * s.v_row(), 0.0f);
    out.S.assign(s.state_floats(), 0.0f);
    for (size_t r = 0; r < R; ++r) {
        const RankMap& m = maps[r];
        float* o = out.o.data() + size_t(m.t0) * s.v_row();
        FloatBuf S_out(s.state_floats());
        if (f == Fixup::rerun) {
            S_out = out.S_in[r];
            run(v, s, S_out.data(), slices[r], scale, C, o, impl);
        } else {
            kda::affine_outputs(s, m.T, m.o0.data(), m.eo.data(), out.S_in[r].data(), o, impl);
            kda::affine_apply(s, m.M.data(), m.B.data(), out.S_in[r].data(), S_out.data(), impl);
        }
        if (r + 1 == R) out.S = c == Combiner::naive_sum ? naive_final : S_out;
    }
    return out;
}

CpResult context_parallel(Variant v, const Shape& s, const Tokens& x, const Bounds& bounds, const float* S0,
                          float scale, int C, Combiner c, Fixup f, Impl impl) {
    const std::vector<Tokens> slices = split(s, x, bounds);
    const std::vector<RankMap> maps = local_maps(v, s, slices, scale, C, f == Fixup::linear, impl);
    return combine(v, s, slices, maps, S0, scale, C, c, f, impl);
}

}  // namespace k3::cp
