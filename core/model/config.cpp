#include "core/model/config.h"

namespace k3 {

size_t dtype_bytes(DType t) {
    switch (t) {
        case DType::fp32: return 4;
        case DType::bf16:
        case DType::fp16: return 2;
        case DType::fp8:
        case DType::int8: return 1;
    }
    return 4;
}

const char* dtype_name(DType t) {
    switch (t) {
        case DType::fp32: return "fp32";
        case DType::bf16: return "bf16";
        case DType::fp16: return "fp16";
        case DType::fp8: return "fp8";
        case DType::int8: return "int8";
    }
    return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
    for (DType t : {DType::fp32, DType::bf16, DType::fp16, DType::fp8, DType::int8})
        if (s == dtype_name(t)) return t;
    return std::nullopt;
}

int ModelConfig::n_linear() const {
    int n = 0;
    for (auto k : layers) n += k == LayerKind::linear;
    return n;
}

int ModelConfig::n_attention() const { return n_layers() - n_linear(); }

std::vector<LayerKind> hybrid_pattern(int n_layers, int attn_every, bool attn_last) {
    std::vector<LayerKind> v(size_t(n_layers > 0 ? n_layers : 0), LayerKind::linear);
    for (int i = 1; i <= n_layers; ++i)
        if ((attn_every > 0 && i % attn_every == 0) || (attn_last && i == n_layers))
            v[size_t(i - 1)] = LayerKind::attention;
    return v;
}

namespace {

// What the Kimi family shares (reference/kda.md §0, reference/kimi_k3.md §1.3): KDA heads of 128
// without value-head grouping, a width-4 conv, the recurrent state in fp32 (vLLM keeps it so whatever
// the cache dtype) and bf16 conv windows; MLA with a 512 latent plus 64 cached rope dims in bf16.
ModelConfig kimi_family(int layers, int d_model, int heads) {
    ModelConfig c;
    c.layers = hybrid_pattern(layers, 4, true);
    c.d_model = d_model;
    c.lin_heads = c.lin_v_heads = heads;
    c.head_k = c.head_v = 128;
    c.conv_width = 4;
    c.state_dtype = DType::fp32;
    c.conv_dtype = DType::bf16;
    c.attn_kind = AttnKind::mla;
    c.attn_heads = heads;
    c.mla_latent = 512;
    c.mla_rope = 64;
    c.mla_nope_dim = 128;
    c.mla_v_dim = 128;
    c.kv_dtype = DType::bf16;
    return c;
}

// Kimi K3's layer design on top of the family's (reference/kimi_k3.md §1.2-1.3): the bounded forget
// gate, the full-rank KDA output gate, the MLA output gate, SiTU, attention residuals.
void k3_design(ModelConfig& c, int attn_res_block) {
    c.gate_lower_bound = -5.0f;
    c.full_rank_output_gate = true;
    c.mla_output_gate = true;
    c.activation = Activation::situ;
    c.situ_beta = 4.0f;
    c.situ_linear_beta = 25.0f;
    c.attn_res_block = attn_res_block;
}

ModelConfig kimi_linear_48b_preset() {
    // HF moonshotai/Kimi-Linear-48B-A3B config (reference/kda.md §0): 20 KDA + 7 MLA layers.
    ModelConfig c = kimi_family(27, 2304, 32);
    c.id = "kimi-linear-48b";
    c.name = "Kimi-Linear-48B-A3B";
    c.vocab = 163840;       // "vocab_size" (the fleet's logits; not runnable)
    c.total_params = 48e9;  // "48B total, 3B activated" (model card)
    c.active_params = 3e9;
    // config.json: "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1,
    // "moe_intermediate_size": 1024, "first_k_dense_replace": 1 (experts at the full 2304 width).
    c.moe = {256, 8, 1, 0, 1024, 1};
    return c;
}

ModelConfig kimi_k3_preset() {
    // moonshotai/Kimi-K3 config.json (reference/kimi_k3.md §1.2-1.3): 69 KDA + 24 NoPE MLA layers,
    // MLA at 1-based 4, 8, ..., 92 and 93 (the rope dims are cached, not rotated).
    ModelConfig c = kimi_family(93, 7168, 96);
    c.id = "kimi-k3";
    c.name = "Kimi-K3";
    c.vocab = 163840;
    c.max_context = 1048576;
    c.moe = {896, 16, 2, 3584, 3072, 1};
    c.total_params = 2.78e12;  // "2.78T" total, "104.2B" active (reference/kimi_k3.md §1.3)
    c.active_params = 104.2e9;
    k3_design(c, 12);
    return c;
}

ModelConfig qwen3_next_80b_preset() {
    ModelConfig c;
    // Qwen3-Next-80B-A3B: 48 layers, 36 Gated DeltaNet + 12 gated attention (reference/serving.md §7).
    c.id = "qwen3-next-80b";
    c.name = "Qwen3-Next-80B-A3B";
    c.vocab = 151936;  // "vocab_size" (the fleet's logits; not runnable)
    c.linear_name = "GDN";
    c.layers = hybrid_pattern(48, 4, false);
    c.d_model = 2048;
    c.lin_heads = 16;
    c.lin_v_heads = 32;
    c.head_k = c.head_v = 128;
    c.conv_width = 4;
    c.state_dtype = DType::fp32;
    c.conv_dtype = DType::bf16;
    c.attn_kind = AttnKind::gqa;
    c.attn_heads = 16;
    c.kv_heads = 2;
    c.attn_head_dim = 256;
    c.kv_dtype = DType::bf16;
    c.total_params = 80e9;  // "80B total, 3B activated" (model card)
    c.active_params = 3e9;
    // Qwen/Qwen3-Next-80B-A3B-Instruct config.json: "num_experts": 512, "num_experts_per_tok": 10,
    // "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512 (one shared expert),
    // "decoder_sparse_step": 1 (every layer MoE).
    c.moe = {512, 10, 1, 0, 512, 0};
    return c;
}

ModelConfig runnable_preset(std::string_view id) {
    ModelConfig c;
    // The runnable models (README, "What it is"): same layer design, small sizes; fp32 state, conv
    // windows and KV, bf16 weights (core/model/weights.h).
    const bool tiny = id == "tiny";
    c.id = std::string(id);
    c.name = tiny ? "tiny (runnable)" : "small (runnable)";
    c.runnable = true;
    c.layers = hybrid_pattern(tiny ? 8 : 12, 4, false);
    c.d_model = tiny ? 256 : 512;
    c.lin_heads = c.lin_v_heads = tiny ? 4 : 8;
    c.head_k = c.head_v = 64;
    c.conv_width = 4;
    c.state_dtype = DType::fp32;
    c.conv_dtype = DType::fp32;
    c.attn_kind = AttnKind::mla;
    c.attn_heads = tiny ? 4 : 8;
    c.mla_latent = tiny ? 128 : 256;
    c.mla_rope = 32;
    c.mla_nope_dim = 64;
    c.mla_v_dim = 64;
    c.kv_dtype = DType::fp32;
    c.vocab = tiny ? 512 : 1024;
    c.mlp_hidden = tiny ? 768 : 1536;
    c.gate_rank = 64;
    return c;
}

// k3-tiny: tiny's sizes with K3's design. 9 layers, MLA at 1-based 4, 8 and 9 (K3's 4, ..., 92 and
// 93); attention residuals in blocks of 3 layers, so 3 blocks (K3: 93 layers in blocks of 12, 8 blocks).
ModelConfig k3_tiny_preset() {
    ModelConfig c = runnable_preset("tiny");
    c.id = "k3-tiny";
    c.name = "k3-tiny (runnable)";
    c.layers = hybrid_pattern(9, 4, true);
    k3_design(c, 3);
    return c;
}

}  // namespace

std::optional<ModelConfig> model_preset(std::string_view id) {
    if (id == "kimi-linear-48b") return kimi_linear_48b_preset();
    if (id == "kimi-k3") return kimi_k3_preset();
    if (id == "qwen3-next-80b") return qwen3_next_80b_preset();
    if (id == "k3-tiny") return k3_tiny_preset();
    if (id == "tiny" || id == "small") return runnable_preset(id);
    return std::nullopt;
}

std::vector<std::string> model_preset_ids() {
    return {"kimi-k3", "kimi-linear-48b", "qwen3-next-80b", "k3-tiny", "tiny", "small"};
}

const char* preset_id(ModelPreset m) {
    switch (m) {
        case ModelPreset::kimi_k3: return "kimi-k3";
        case ModelPreset::kimi_linear_48b: return "kimi-linear-48b";
        case ModelPreset::qwen3_next_80b: return "qwen3-next-80b";
        case ModelPreset::k3_tiny: return "k3-tiny";
        case ModelPreset::tiny: return "tiny";
        case ModelPreset::small: return "small";
        case ModelPreset::custom: return "custom";
    }
    return "?";
}

const char* preset_label(ModelPreset m) {
    switch (m) {
        case ModelPreset::kimi_k3: return "Kimi-K3";
        case ModelPreset::kimi_linear_48b: return "Kimi-Linear-48B-A3B";
        case ModelPreset::qwen3_next_80b: return "Qwen3-Next-80B-A3B";
        case ModelPreset::k3_tiny: return "k3-tiny (runnable)";
        case ModelPreset::tiny: return "tiny (runnable)";
        case ModelPreset::small: return "small (runnable)";
        case ModelPreset::custom: return "custom";
    }
    return "?";
}

std::optional<ModelConfig> model_preset(ModelPreset m) {
    return model_preset(std::string_view(preset_id(m)));
}

ModelConfig default_runnable_config() { return *model_preset(kDefaultRunnablePreset); }

}  // namespace k3
