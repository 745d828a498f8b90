// Model configurations: the published hybrid models (for accounting) and the runnable presets.
// Layer geometry follows reference/kda.md §0 and reference/serving.md §7.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

enum class DType : uint8_t { fp32, bf16, fp16, fp8, int8 };
size_t dtype_bytes(DType t);
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);

enum class LayerKind : uint8_t { linear, attention };  // linear = KDA (or GDN) with a fixed state
enum class AttnKind : uint8_t { mla, gqa };            // MLA latent cache or grouped K/V heads
// The MLP's gated activation: SwiGLU silu(gate) * up, or Kimi K3's SiTU (reference/kimi_k3.md §1.3)
// beta tanh(gate / beta) sigmoid(gate) * beta_lin tanh(up / beta_lin).
enum class Activation : uint8_t { swiglu, situ };

struct ModelConfig {
    std::string id, name;
    std::string linear_name = "KDA";  // what the linear layers are called ("KDA", "GDN")
    std::vector<LayerKind> layers;    // in order; pattern of linear and attention layers
    int d_model = 0;

    // Linear-attention (KDA / GDN) layers. State per value head is head_k x head_v.
    int lin_heads = 0;    // H: query/key heads
    int lin_v_heads = 0;  // HV: value heads (a multiple of H); one state matrix each
    int head_k = 0, head_v = 0;
    int conv_width = 4;  // short causal conv; the window keeps conv_width - 1 raw rows
    DType state_dtype = DType::fp32, conv_dtype = DType::bf16;

    // Attention layers.
    AttnKind attn_kind = AttnKind::mla;
    int attn_heads = 0;
    int mla_latent = 0, mla_rope = 0;     // MLA: cached elements per token = latent + rope
    int kv_heads = 0, attn_head_dim = 0;  // GQA: cached elements per token = 2 * kv_heads * dim
    DType kv_dtype = DType::bf16;

    // Parameter counts (published for the accounting presets; counted for the runnable ones):
    // what a roofline estimate of compute and weight traffic needs (core/model/roofline.h).
    double total_params = 0, active_params = 0;

    // Mixture of experts (published presets that have one; what a cost estimate of expert traffic
    // needs): routed experts, experts per token, shared experts, the width experts run in, their
    // intermediate size, and the leading dense layers.
    struct Moe {
        int experts = 0, top_k = 0, shared = 0, latent = 0, intermediate = 0, dense_layers = 0;
    } moe;
    int64_t max_context = 0;  // published maximum positions (0: not stated)

    // Runnable-model sizes (only for presets that can run).
    bool runnable = false;
    int vocab = 0, mlp_hidden = 0, gate_rank = 0;
    int mla_nope_dim = 0, mla_v_dim = 0;  // per-head query/key (no-RoPE part) and value dims

    // Kimi K3's layer design (reference/kimi_k3.md §1.2-1.3); the defaults are Kimi Linear's.
    // KDA forget gate: 0 = unbounded, g = -exp(A_log) softplus(z + dt_bias); below 0 the bounded
    // g = gate_lower_bound * sigmoid(exp(A_log) (z + dt_bias)) ("gate_lower_bound": -5.0).
    float gate_lower_bound = 0;
    // KDA output gate ("use_full_rank_gate"): g_proj d -> HV*V in place of the rank-gate_rank g_a/g_b.
    bool full_rank_output_gate = false;
    // MLA "mla_use_output_gate": sigmoid(x g_proj) [H*v] times each head's attention output before o_proj.
    bool mla_output_gate = false;
    Activation activation = Activation::swiglu;
    float situ_beta = 4, situ_linear_beta = 25;  // "activation_situ_beta" / "activation_situ_linear_beta"
    // Attention residuals over depth ("attn_res_block_size"; 0 = the plain residual stream): every
    // sub-layer's input is a softmax over depth of the committed block sums and the running sum
    // (core/model/attn_res.h). Per token, an activation bank, no sequence state.
    int attn_res_block = 0;

    int n_layers() const { return int(layers.size()); }
    int n_linear() const;
    int n_attention() const;
    int conv_channels() const { return 2 * lin_heads * head_k + lin_v_heads * head_v; }
};

// Layer i (1-indexed) is attention iff i % attn_every == 0, or it is the last layer and attn_last.
// Kimi-Linear: 27 layers, every 4th and the last -> 20 KDA + 7 MLA.
std::vector<LayerKind> hybrid_pattern(int n_layers, int attn_every, bool attn_last);

// Presets by id: "kimi-k3", "kimi-linear-48b", "qwen3-next-80b" (accounting only), "k3-tiny", "tiny",
// "small" (runnable).
std::optional<ModelConfig> model_preset(std::string_view id);
std::vector<std::string> model_preset_ids();

// The presets as the modules' `preset` parameter names them; `custom` stands for dimensions a
// module takes from parameters of its own (model_preset(custom) is empty).
enum class ModelPreset : uint8_t { kimi_linear_48b, qwen3_next_80b, tiny, small, custom, kimi_k3, k3_tiny };
const char* preset_id(ModelPreset m);     // "kimi-linear-48b", ..., "custom"
const char* preset_label(ModelPreset m);  // "Kimi-Linear-48B-A3B", ..., "k3-tiny (runnable)", "custom"
std::optional<ModelConfig> model_preset(ModelPreset m);

// THE runnable model: what the modules and commands that run one model use unless told otherwise.
// k3-tiny, Kimi K3's layer design at the size of `tiny`.
inline constexpr ModelPreset kDefaultRunnablePreset = ModelPreset::k3_tiny;
inline const char* default_runnable_id() { return preset_id(kDefaultRunnablePreset); }
ModelConfig default_runnable_config();

}  // namespace k3
