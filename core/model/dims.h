// Shapes of the runnable model's layers, derived from a ModelConfig (config.h).
#pragma once

#include <cstddef>

#include "core/kda/layout.h"
#include "core/model/config.h"

namespace k3::model {

using kda::Impl;

// One KDA layer (reference/kda.md §1). q/k have H heads of K, v/g/beta/o have HV heads (HV = H here
// unless the config groups value heads).
struct KdaDims {
    kda::Shape s;
    int d_model = 0;
    int rank = 0;        // low rank of the forget-gate projections (and of the output gate unless full rank)
    int conv_width = 4;  // W; the window keeps W - 1 raw rows per stream
    float scale = 0;     // K^-0.5, applied to q inside the KDA kernels
    float gate_lower_bound = 0;   // 0: the softplus gate; below 0: the bounded gate (core/kda/gates.h)
    bool full_rank_gate = false;  // output gate g_proj [d][HV*V] instead of g_a [d][rank] g_b [rank][HV*V]

    int qk_channels() const { return s.H * s.K; }  // raw q (and raw k) row
    int v_channels() const { return s.HV * s.V; }  // raw v row, core output row
    int g_channels() const { return s.HV * s.K; }  // gate row
    int window_rows() const { return conv_width - 1; }
    // The per-layer state in floats: S [HV][K][V], then the conv windows of q, k, v in that order,
    // each [W-1][channels] with row 0 the oldest raw row (reference/kda.md §5).
    size_t state_floats() const { return s.state_floats(); }
    size_t window_floats() const { return size_t(window_rows()) * size_t(2 * qk_channels() + v_channels()); }
    size_t layer_floats() const { return state_floats() + window_floats(); }
};

// One MLA layer with the absorbed latent cache and no RoPE (reference/kda.md §0, §5). The cache row
// of a token is [normalised c_kv (latent) | k_pe (rope)]; the "rope" part is not rotated (NoPE).
struct MlaDims {
    int d_model = 0;
    int heads = 0;
    int nope = 0, rope = 0;    // per-head query/key dims: no-position part and the shared "rope" part
    int latent = 0;            // kv_lora_rank
    int v = 0;                 // per-head value dim
    float scale = 0;           // (nope + rope)^-0.5
    bool output_gate = false;  // sigmoid(x g_proj) [H*v] times the heads' outputs before o_proj

    int q_row() const { return heads * (nope + rope); }
    int cache_row() const { return latent + rope; }  // cached floats per token per layer
};

KdaDims kda_dims(const ModelConfig& c);
MlaDims mla_dims(const ModelConfig& c);

}  // namespace k3::model
