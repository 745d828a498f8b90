#include "core/cp/variants.h"

#include <algorithm>

#include "core/base/fmath.h"
#include "core/kda/affine.h"
#include "core/kda/chunked.h"

namespace k3::cp {

const char* variant_id(Variant v) {
    switch (v) {
        case Variant::linear: return "linear";
        case Variant::diagonal: return "diagonal";
        case Variant::kda: return "kda";
    }
    return "?";
}

const char* variant_title(Variant v) {
    switch (v) {
        case Variant::linear: return "plain linear attention (M = I)";
        case Variant::diagonal: return "diagonal gate (M = Diag)";
        case Variant::kda: return "KDA (M dense: decay and delta erasure)";
    }
    return "?";
}

uint64_t map_floats_per_head(Variant v, const Shape& s) {
    switch (v) {
        case Variant::linear: return 0;
        case Variant::diagonal: return uint64_t(s.K);
        case Variant::kda: return uint64_t(s.K) * uint64_t(s.K);
    }
    return 0;
}

namespace {

// Linear and diagonal recurrences, one token at a time, every head. With `gamma` (the running product
// of the decays since the segment start, [HV][K]) and `eo`, also the output sensitivities
// eo_t = scale q_t ⊙ gamma_t.
void gated_sequence(bool decay, const Shape& s, float* S, const Tokens& x, float scale, float* o,
                    float* gamma, float* eo) {
    const int K = s.K, V = s.V, grp = s.group();
    for (int t = 0; t < x.T; ++t) {
        for (int h = 0; h < s.HV; ++h) {
            float* Sh = S + size_t(h) * s.head_state();
            const size_t qk = size_t(t) * s.qk_row() + size_t(h / grp) * K;
            const float* q = x.q + qk;
            const float* k = x.k + qk;
            const float* v = x.v + size_t(t) * s.v_row() + size_t(h) * V;
            const float* g = x.g + size_t(t) * s.g_row() + size_t(h) * K;
            for (int i = 0; i < K; ++i) {
                const float a = decay ? exp_f32(g[i]) : 1.0f;
                float* row = Sh + size_t(i) * V;
                if (decay)
                    for (int j = 0; j < V; ++j) row[j] = row[j] * a;
                for (int j = 0; j < V; ++j) row[j] = row[j] + k[i] * v[j];
                if (gamma) {
                    float& gm = gamma[size_t(h) * K + i];
                    gm = gm * a;
                    if (eo) eo[size_t(t) * s.g_row() + size_t(h) * K + i] = (scale * q[i]) * gm;
                }
            }
            if (!o) continue;
            float* oh = o + size_t(t) * s.v_row() + size_t(h) * V;
            std::fill(oh, oh + V, 0.0f);
            for (int i = 0; i < K; ++i) {
                const float qi = scale * q[i];
                const float* row = Sh + size_t(i) * V;
                for (int j = 0; j < V; ++j) oh[j] = oh[j] + qi * row[j];
            }
        }
    }
}

}  // namespace

void run(Variant v, const Shape& s, float* S, const Tokens& x, float scale, int C, float* o, Impl impl) {
    if (x.T <= 0) return;
    if (v == Variant::kda) return kda::chunked(s, S, x, scale, C, o, impl);
    gated_sequence(v == Variant::diagonal, s, S, x, scale, o, nullptr, nullptr);
}

void segment_map(Variant v, const Shape& s, const Tokens& x, float scale, int C, float* M, float* B,
                 float* o0, float* eo, Impl impl) {
    if (v == Variant::kda) return kda::segment_map(s, x, scale, C, M, B, o0, eo, impl);
    const int K = s.K;
    std::fill(B, B + s.state_floats(), 0.0f);
    FloatBuf gamma(s.g_row(), 1.0f);
    gated_sequence(v == Variant::diagonal, s, B, x, scale, o0, gamma.data(), eo);
    for (int h = 0; h < s.HV; ++h) {
        float* Mh = M + size_t(h) * K * K;
        std::fill(Mh, Mh + size_t(K) * K, 0.0f);
        for (int i = 0; i < K; ++i) Mh[size_t(i) * K + i] = gamma[size_t(h) * K + i];
    }
}

}  // namespace k3::cp
