// Hugging Face config.json files of hybrid models read into the memory module's custom model
// (core/model/hf_config.h): the published files of tests/data/configs, and every field refused by name.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "core/model/hf_config.h"
#include "tests/unit/test_files.h"

using namespace k3;

namespace {

HfConfigImport read_text(const std::string& text) {
    const JsonParse p = parse_json(text);
    REQUIRE_MESSAGE(p.ok(), p.error);
    CHECK(is_hf_config(p.value));
    return read_hf_config(p.value);
}

std::map<std::string, std::string> values(const std::string& file) {
    const HfConfigImport c = read_text(test::data_file("configs/" + file));
    REQUIRE_MESSAGE(c.ok(), c.error);
    std::map<std::string, std::string> m;
    for (const HfParam& p : c.params) {
        CHECK_MESSAGE(!p.source.empty(), p.key);
        CHECK_MESSAGE(m.emplace(p.key, p.value).second, p.key << " given twice");
    }
    return m;
}

std::string error_of(const std::string& text) {
    const HfConfigImport c = read_text(text);
    CHECK_FALSE(c.ok());
    CHECK(c.params.empty());  // nothing comes with an error
    return c.error;
}

const std::string kKimi = "configs/Kimi-Linear-48B-A3B-Instruct.config.json";
const std::string kQwen = "configs/Qwen3-Next-80B-A3B-Instruct.config.json";

}  // namespace

// What a Kimi family config.json gives: KDA heads of 128 with a width-4 conv, MLA 512 + 64.
static std::map<std::string, std::string> kimi_like(const char* layers, const char* heads) {
    return {{"layers", layers},      {"attn_every", "4"},    {"attn_last", "1"},   {"heads", heads},
            {"v_heads", heads},      {"head_k", "128"},      {"head_v", "128"},    {"conv_width", "4"},
            {"state_dtype", "fp32"}, {"conv_dtype", "bf16"}, {"attn_kind", "mla"}, {"mla_latent", "512"},
            {"mla_rope", "64"}};
}

// What a Qwen3-Next / Qwen3.5 config.json gives: 16 q/k heads of 128, GQA with 2 KV heads of 256.
static std::map<std::string, std::string> qwen_like(const char* layers, const char* v_heads) {
    return {{"layers", layers},      {"attn_every", "4"},    {"attn_last", "0"},   {"heads", "16"},
            {"v_heads", v_heads},    {"head_k", "128"},      {"head_v", "128"},    {"conv_width", "4"},
            {"state_dtype", "fp32"}, {"conv_dtype", "bf16"}, {"attn_kind", "gqa"}, {"kv_heads", "2"},
            {"attn_head_dim", "256"}};
}

TEST_CASE("hf_config: Kimi-Linear-48B-A3B-Instruct and Kimi K3's text_config") {
    CHECK(values("Kimi-Linear-48B-A3B-Instruct.config.json") == kimi_like("27", "32"));
    CHECK(values("Kimi-K3.config.json") == kimi_like("93", "96"));
    const HfConfigImport k3 = read_text(test::data_file("configs/Kimi-K3.config.json"));
    CHECK(k3.name == "Kimi K3, 93 layers (69 KDA + 24 MLA)");
    for (const HfParam& p : k3.params)
        if (p.key == "heads") CHECK(p.source == "text_config.linear_attn_config.num_heads");
}

TEST_CASE("hf_config: Qwen3-Next-80B-A3B (full_attention_interval) and Qwen3.5 (layer_types)") {
    CHECK(values("Qwen3-Next-80B-A3B-Instruct.config.json") == qwen_like("48", "32"));
    CHECK(values("Qwen3.5-0.8B.config.json") == qwen_like("24", "16"));
    const HfConfigImport q = read_text(test::data_file("configs/Qwen3.5-0.8B.config.json"));
    CHECK(q.name == "Qwen3.5, 24 layers (18 Gated DeltaNet + 6 attention)");
    for (const HfParam& p : q.params) {
        if (p.key == "attn_every") CHECK(p.source == "text_config.layer_types");
        if (p.key == "state_dtype") CHECK(p.source == "text_config.mamba_ssm_dtype");
    }
    // The state dtype follows mamba_ssm_dtype when a config gives it.
    const std::string bf16 =
        test::replaced(test::data_file("configs/Qwen3.5-0.8B.config.json"),
                       "\"mamba_ssm_dtype\": \"float32\"", "\"mamba_ssm_dtype\": \"bfloat16\"");
    for (const HfParam& p : read_text(bf16).params)
        if (p.key == "state_dtype") CHECK(p.value == "bf16");
}

TEST_CASE("hf_config: every bad or missing field is named, with its place in the file") {
    const std::string kimi = test::data_file(kKimi), qwen = test::data_file(kQwen);
    CHECK(error_of(test::replaced(kimi, "\"num_heads\": 32", "\"num_heads\": \"abc\"")) ==
          "linear_attn_config.num_heads: expected a positive integer, got \"abc\" (line 53, column 18)");
    CHECK(error_of(test::replaced(kimi, "\"kv_lora_rank\": 512,", "")) == "kv_lora_rank: missing");
    CHECK(error_of(test::replaced(kimi, "\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": -1")) ==
          "qk_rope_head_dim: expected a whole number from 0, got -1 (line 74, column 23)");
    CHECK(error_of(test::replaced(kimi, "      26\n", "      30\n")) ==
          "linear_attn_config.kda_layers[19]: expected a layer number from 1 to 27, got 30 (line 51, column "
          "7)");
    CHECK(error_of(test::replaced(kimi, "      26\n", "      25\n")) ==
          "linear_attn_config.kda_layers[19]: layer 25 is listed twice (line 51, column 7)");
    CHECK(error_of(test::replaced(kimi, "      27\n", "      26\n")) ==
          "linear_attn_config.full_attn_layers: layer 26 is also in kda_layers");
    CHECK(error_of(test::replaced(kimi, "      24,\n", "")) ==
          "linear_attn_config.full_attn_layers: layer 24 is in neither it nor kda_layers");
    CHECK(error_of(test::replaced(kimi, "\"linear_attn_config\"", "\"linear_attn\"")) ==
          "linear_attn_config: missing");
    CHECK(error_of(test::replaced(kimi, "\"num_hidden_layers\": 27", "\"num_hidden_layers\": 5000")) ==
          "num_hidden_layers: expected a positive integer to 4,096, got 5000 (line 67, column 24)");
    CHECK(error_of(test::replaced(kimi, "\"dtype\": \"bfloat16\"", "\"dtype\": \"float8\"")) ==
          "dtype: expected \"bfloat16\", \"float16\" or \"float32\", got \"float8\" (line 11, column 12)");
    CHECK(error_of(test::replaced(qwen, "\"linear_num_value_heads\": 32", "\"linear_num_value_heads\": 0")) ==
          "linear_num_value_heads: expected a positive integer, got 0 (line 18, column 29)");
    CHECK(error_of(test::replaced(qwen, "\"head_dim\": 256,", "")) == "head_dim: missing");
    CHECK(error_of(test::replaced(qwen, "\"full_attention_interval\": 4,", "")) ==
          "layer_types: missing, and so is full_attention_interval");
    CHECK(error_of(test::replaced(qwen, "\"model_type\": \"qwen3_next\"", "\"model_type\": \"llama\"")) ==
          "model_type: \"llama\" is not a hybrid model this import reads (kimi_linear, kimi_k3, qwen3_next, "
          "qwen3_5, qwen3_5_moe)");
    CHECK(error_of("{\"model_type\": \"kimi_k3\"}") ==
          "text_config: missing (model_type kimi_k3 keeps its dimensions there)");
    CHECK(error_of("{\"text_config\": []}") ==
          "line 1, column 17: text_config: expected an object, got an array");
    CHECK(error_of("{\"text_config\": {}}") == "model_type: missing (a config.json names its model type)");
}

TEST_CASE(
    "hf_config: layer_types is checked entry by entry, and a pattern the module cannot hold is refused") {
    const std::string q35 = test::data_file("configs/Qwen3.5-0.8B.config.json");
    const std::string first = "            \"linear_attention\",\n            \"linear_attention\",\n";
    CHECK(error_of(test::replaced(q35, first, "            \"linear_attention\",\n")) ==
          "text_config.layer_types: 23 entries for 24 layers (num_hidden_layers) (line 19, column 24)");
    CHECK(error_of(test::replaced(
              q35, first, "            \"sliding_attention\",\n            \"linear_attention\",\n")) ==
          "text_config.layer_types[0]: expected \"linear_attention\" or \"full_attention\", got "
          "\"sliding_attention\" (line 20, column 13)");
    // Full attention at layers 1, 4, 8, ...: no attn_every / attn_last gives it, and nothing is approximated.
    CHECK(
        error_of(test::replaced(q35, first,
                                "            \"full_attention\",\n            \"linear_attention\",\n")) ==
        "text_config.layer_types: attention at layers 1, 4, 8, 12, 16, 20, 24 is not a pattern the memory "
        "module's custom model holds (every attn_every-th layer, and the last one if attn_last); nothing was "
        "applied");
    // Attention only in the last layer, and no attention at all, are patterns it holds.
    std::string last = test::data_file(kQwen);
    last = test::replaced(last, "\"full_attention_interval\": 4", "\"full_attention_interval\": 48");
    for (const HfParam& p : read_text(last).params)
        if (p.key == "attn_every" || p.key == "attn_last")
            CHECK(p.value == (p.key == "attn_every" ? "0" : "1"));
}
