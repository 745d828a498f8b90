// One KDA layer of the runnable model (reference/kda.md §1), split into named stages so that later
// work can record per-token inputs, replay them, or run one stage alone:
//
//   project   x -> raw q/k/v (pre-conv), gate input z = f_b(f_a x), beta logit, output-gate input
//             (g_b(g_a x), or g_proj x with Kimi K3's full-rank output gate)
//   conv      raw q/k/v -> causal depthwise conv with the window state -> SiLU; the window advances
//   activate  normalize: L2-normalise q and k per head;
//             gates: g = -exp(A_log) softplus(z + dt_bias), or Kimi K3's bounded
//             g = lower_bound sigmoid(exp(A_log) (z + dt_bias)); beta = sigmoid(beta logit)
//   core      the KDA recurrence on S: chunked (prefill) or token by token (decode, replay)
//   output    per-head RMSNorm (o_norm) times sigmoid(output gate), then o_proj
//
// Every stage reads and writes the [T][...] buffers of KdaActs, so after a forward they hold all the
// per-token quantities of reference/kda.md §6 (raw rows, post-conv k and v, g, beta); the layer input
// x is the caller's. Stages hold no state of their own: the layer's state is the KdaState view.
#pragma once

#include "core/kda/layout.h"
#include "core/model/dims.h"
#include "core/model/weights.h"

namespace k3::model {

// How a multi-token call runs the KDA core. `chunked` is the prefill kernel (chunks restart at each
// call); `recurrent` gives the bits of the same tokens decoded one at a time.
enum class CoreMode : uint8_t { chunked, recurrent };

// A layer's state, pointing into a pool's state slot (or any buffer of layer_floats()).
struct KdaState {
    float* S = nullptr;      // [HV][K][V]
    float* win_q = nullptr;  // [W-1][H*K], row 0 oldest, raw pre-conv rows
    float* win_k = nullptr;  // [W-1][H*K]
    float* win_v = nullptr;  // [W-1][HV*V]
    // The layout of KdaDims::state_floats: S, then the q, k, v windows.
    static KdaState at(const KdaDims& d, float* base);
};

// Per-token buffers of one call, [T][channels] row-major. Only grows (reuse across calls is free).
struct KdaActs {
    int T = 0;
    FloatBuf raw_q, raw_k, raw_v;  // project: pre-conv projections (what the conv window keeps)
    FloatBuf z;                    // project: f_b(f_a x) [T][HV*K], before + dt_bias
    FloatBuf beta_logit;           // project: b x [T][HV]
    FloatBuf gate_out;             // project: g_b(g_a x) or g_proj x [T][HV*V], before the sigmoid
    FloatBuf low;                  // project: scratch for the rank-r intermediates [T][rank]
    FloatBuf q, k, v;              // conv: post-conv + SiLU; activate: q, k L2-normalised in place
    FloatBuf g, beta;              // activate: log-decay [T][HV*K], beta [T][HV]
    FloatBuf o;                    // core: [T][HV][V]
    FloatBuf y;                    // output: gated head norm [T][HV*V] (input of o_proj)
    void resize(const KdaDims& d, int T);
    kda::Tokens tokens() const { return {q.data(), k.data(), v.data(), g.data(), beta.data(), T}; }
};

void kda_project(const KdaWeights& w, const KdaDims& d, const float* x, int T, KdaActs& a, Impl impl);
void kda_conv(const KdaWeights& w, const KdaDims& d, const KdaState& st, KdaActs& a, Impl impl);
void kda_normalize(const KdaDims& d, KdaActs& a);
void kda_gates(const KdaWeights& w, const KdaDims& d, KdaActs& a);
void kda_activate(const KdaWeights& w, const KdaDims& d, KdaActs& a);  // kda_normalize, then kda_gates
void kda_core(const KdaDims& d, float* S, KdaActs& a, CoreMode mode, int chunk, Impl impl);
void kda_output(const KdaWeights& w, const KdaDims& d, KdaActs& a, float* out, Impl impl);

// All five stages: x [T][d] -> out [T][d] (may not alias x), updating S and the windows.
void kda_forward(const KdaWeights& w, const KdaDims& d, const KdaState& st, const float* x, int T, KdaActs& a,
                 float* out, CoreMode mode, int chunk, Impl impl);

// Replays recorded tokens into a state (reference/kda.md §6 variant (b), "minimal exact incl. conv"):
// a.T, the raw q/k/v rows and g, beta must be filled; runs conv, normalize and the recurrent core, no
// output. From the state the recording started from, this gives the bits of the recorded forward when
// that forward ran with CoreMode::recurrent (speculative verification), for any prefix of its tokens.
void kda_replay(const KdaWeights& w, const KdaDims& d, const KdaState& st, KdaActs& a, Impl impl);

}  // namespace k3::model
