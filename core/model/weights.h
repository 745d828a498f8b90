// Seeded weights of the runnable model, generated with the portable Rng (core/base/rng.h), so the
// same seed gives the same bits natively and in WebAssembly. Projection matrices are bf16 (as the real
// model's; see matmul.h), the small per-channel tensors fp32 (conv taps, A_log, dt_bias, norms: vLLM
// keeps the first three in fp32), the embedding fp32 (one row is read per token). Scales keep activations
// O(1) through the layers: projections N(0, 1/in), residual output projections further divided by sqrt(2
// n_layers) (GPT-2), and the gate initialised as Kimi Linear / Mamba train it: A_log = log U(1, 16), dt_bias
// = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1] (reference/kda.md §1).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/matmul.h"

#include "core/kda/layout.h"
#include "core/model/config.h"
#include "core/model/dims.h"

namespace k3::model {

using kda::FloatBuf;

// A projection y = x W, no bias: W [in][out] (the transpose of PyTorch's Linear.weight) in bf16, in
// the pair-of-rows layout of matmul.h.
struct Matrix {
    int in = 0, out = 0;
    std::vector<uint32_t, kda::AlignedAlloc<uint32_t>> pairs;  // [(in + 1) / 2][out]

    Matrix() = default;
    Matrix(int in, int out);          // zeros
    float at(int i, int o) const;     // W[i][o]
    void set(int i, int o, float v);  // rounds v to bf16
    Weights16 view() const { return {pairs.data(), in, out}; }
    uint64_t size() const { return uint64_t(in) * uint64_t(out); }
};

// reference/kda.md §1, checkpoint names in comments.
struct KdaWeights {
    Matrix q, k, v;  // q_proj, k_proj [d][H*K]; v_proj [d][HV*V]
    FloatBuf conv_q, conv_k,
        conv_v;        // q/k/v_conv1d, depthwise [channels][W]; [c][W-1] multiplies the current row
    Matrix f_a, f_b;   // f_a_proj [d][rank], f_b_proj [rank][HV*K]
    FloatBuf A_log;    // [HV]
    FloatBuf dt_bias;  // [HV*K], indexed h*K + i
    Matrix b;          // b_proj [d][HV]
    Matrix g_a, g_b;   // g_a_proj [d][rank], g_b_proj [rank][HV*V] (no bias, as HF/vLLM)
    Matrix g_proj;     // full-rank output gate g_proj [d][HV*V] (Kimi K3), in place of g_a / g_b
    FloatBuf o_norm;   // [V], shared by all heads
    Matrix o;          // o_proj [HV*V][d]
};

// DeepSeek-style MLA without RoPE. kv_b_proj is stored split per head in the layouts the absorbed
// form multiplies by: w_uk (key half) [H][nope][latent], w_uv (value half) [H][latent][v].
struct MlaWeights {
    Matrix q;                  // q_proj [d][H*(nope+rope)], per head [nope | rope]
    Matrix kv_a;               // kv_a_proj_with_mqa [d][latent + rope]
    FloatBuf kv_norm;          // kv_a_layernorm [latent]
    std::vector<Matrix> w_uk;  // [H] of [nope][latent]
    std::vector<Matrix> w_uv;  // [H] of [latent][v]
    Matrix g;                  // output gate g_proj [d][H*v] (Kimi K3's mla_use_output_gate), or empty
    Matrix o;                  // o_proj [H*v][d]
};

struct MlpWeights {
    Matrix gate, up, down;  // down(act(x gate, x up)): SwiGLU silu(g) u, or SiTU (core/base/fmath.h)
};

// Attention residuals (core/model/attn_res.h): the source RMSNorm weight and the pseudo-query of one
// mixing point, [d] each (vLLM's *_res_norm.weight and *_res_proj.weight).
struct AttnResWeights {
    FloatBuf norm, proj;
};

struct BlockWeights {
    LayerKind kind = LayerKind::linear;
    FloatBuf attn_norm, mlp_norm;  // [d]
    KdaWeights kda;                // when kind == linear
    MlaWeights mla;                // when kind == attention
    MlpWeights mlp;
    AttnResWeights attn_res, mlp_res;  // when the config has attention residuals
};

struct ModelWeights {
    FloatBuf embed;  // [vocab][d]
    std::vector<BlockWeights> blocks;
    AttnResWeights output_res;  // the mix before the final norm, with attention residuals
    FloatBuf final_norm;        // [d]
    Matrix lm_head;             // [d][vocab] (untied)
    uint64_t parameters() const;
};

// The config must be runnable (check_runnable in model.h says why not).
ModelWeights make_weights(const ModelConfig& c, uint64_t seed);

}  // namespace k3::model
