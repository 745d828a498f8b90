// A Hugging Face config.json of a hybrid model, read into the custom model of the memory module
// (core/modules/memory/memory.h): its parameters' keys and text values, so that a link or a CLI
// line can hold them. Two dialects, read from the top level or from `text_config` when there is one:
//   Kimi Linear and Kimi K3 (model_type "kimi_linear", K3's text_config): linear_attn_config with
//     1-based kda_layers (and full_attn_layers, which must be the rest), num_heads, head_dim,
//     short_conv_kernel_size; MLA with kv_lora_rank + qk_rope_head_dim cached per token;
//   Qwen3-Next and Qwen3.5 ("qwen3_next", "qwen3_5", "qwen3_5_moe" and their *_text): layer_types
//     ("linear_attention" / "full_attention"), or full_attention_interval when there is none (HF's
//     rule: layer i, 1-based, is full attention when i is a multiple of it); linear_num_key_heads,
//     linear_num_value_heads, linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim;
//     GQA with num_key_value_heads heads of head_dim; mamba_ssm_dtype for the state when given.
// Nothing is approximated: a layer pattern the custom model cannot hold (every attn_every-th layer,
// plus the last one if attn_last) is refused naming the field, as is every missing or bad field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/json_read.h"

namespace k3 {

// One custom-model parameter: its key and text value, and the field it came from ("num_hidden_layers",
// "linear_attn_config.num_heads") or why it is what it is when config.json does not say.
struct HfParam {
    std::string key, value, source;
};

struct HfConfigImport {
    std::string name;             // "Kimi Linear, 27 layers (20 KDA + 7 MLA)"
    std::vector<HfParam> params;  // every dimension of the custom model
    std::string error;            // empty on success; otherwise names the field ("linear_attn_config...")
    bool ok() const { return error.empty(); }
};

// Whether a parsed JSON file is a model configuration (it has model_type or text_config), so that an
// import can tell it from a report.
bool is_hf_config(const JsonValue& root);
// The custom model of the configuration, or an error and no parameters.
HfConfigImport read_hf_config(const JsonValue& root);

}  // namespace k3
