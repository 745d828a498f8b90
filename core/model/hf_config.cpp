#include "core/model/hf_config.h"

#include <cmath>
#include <optional>

#include "core/base/numfmt.h"
#include "core/model/config.h"

namespace k3 {

namespace {

// A sanity bound on num_hidden_layers before anything is sized by it (the memory module takes far
// fewer: its own range check then names the field).
constexpr int kMaxLayers = 4096;

enum class Dialect { kimi, qwen };
struct Family {
    const char* model_type;
    Dialect dialect;
    const char* label;
    bool wrapper;  // keeps its dimensions in text_config
};
constexpr Family kFamilies[] = {
    {"kimi_linear", Dialect::kimi, "Kimi Linear", false},
    {"kimi_k3", Dialect::kimi, "Kimi K3", true},
    {"qwen3_next", Dialect::qwen, "Qwen3-Next", false},
    {"qwen3_5", Dialect::qwen, "Qwen3.5", true},
    {"qwen3_5_moe", Dialect::qwen, "Qwen3.5 MoE", true},
    {"qwen3_5_text", Dialect::qwen, "Qwen3.5", false},
    {"qwen3_5_moe_text", Dialect::qwen, "Qwen3.5 MoE", false},
};

const Family* family_of(std::string_view model_type) {
    for (const Family& f : kFamilies)
        if (model_type == f.model_type) return &f;
    return nullptr;
}

// The fields of one JSON object, named by their path in the file in every message; the first error
// is kept in `error` and later reads return nothing.
class Fields {
  public:
    Fields(const JsonValue* obj, std::string prefix, std::string& error)
        : obj_(obj), prefix_(std::move(prefix)), error_(error) {}

    std::string path(std::string_view key) const { return prefix_ + std::string(key); }
    const JsonValue* get(std::string_view key) const { return obj_ ? obj_->find(key) : nullptr; }
    bool failed() const { return !error_.empty(); }

    bool bad(std::string_view key, const std::string& what, const JsonValue* at = nullptr) {
        if (error_.empty())
            error_ =
                path(key) + ": " + what +
                (at ? " (line " + std::to_string(at->line) + ", column " + std::to_string(at->column) + ")"
                    : "");
        return false;
    }

    // A whole number from `min` to `max`; 0 (with the error set) when missing or bad.
    int count(std::string_view key, int min, int max = 1 << 30) {
        const JsonValue* v = get(key);
        if (!v) return bad(key, "missing"), 0;
        if (v->is(JsonType::number) && v->number == std::floor(v->number) && v->number >= min &&
            v->number <= max)
            return int(v->number);
        const std::string want = min == 0 ? "a whole number from 0" : "a positive integer";
        bad(key,
            "expected " + want + (max < (1 << 30) ? " to " + format_grouped(max) : "") + ", got " +
                json_shown(*v),
            v);
        return 0;
    }

    // A nested object, as Fields named under this one's path.
    Fields object(std::string_view key) {
        const JsonValue* v = get(key);
        if (!v)
            bad(key, "missing");
        else if (!v->is(JsonType::object))
            bad(key, "expected an object, got " + json_shown(*v), v);
        return Fields(v && v->is(JsonType::object) ? v : nullptr, path(key) + ".", error_);
    }

  private:
    const JsonValue* obj_;
    std::string prefix_;
    std::string& error_;
};

// "1, 2, 7, 9, 10, ..." (at most 8 numbers).
std::string layer_numbers(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return v.size() > 8 ? s + ", ..." : s;
}

// A dtype string ("bfloat16", "float16", "float32") as the module's choice key.
std::optional<std::string> dtype_key(Fields& f, std::string_view key) {
    const JsonValue* v = f.get(key);
    if (!v) return std::nullopt;
    if (v->is(JsonType::string)) {
        if (v->text == "bfloat16") return "bf16";
        if (v->text == "float16") return "fp16";
        if (v->text == "float32") return "fp32";
    }
    f.bad(key, "expected \"bfloat16\", \"float16\" or \"float32\", got " + json_shown(*v), v);
    return std::nullopt;
}

// What the import reads, before it becomes parameters.
struct ReadModel {
    std::vector<LayerKind> layers;
    std::string pattern_field;  // the field the layer pattern came from
    std::vector<HfParam> dims;  // heads, head sizes, conv, attention cache
};

// 1-based layer numbers from `key`, each from 1 to `n` and listed once.
std::vector<int> layer_list(Fields& f, std::string_view key, int n) {
    std::vector<int> out;
    const JsonValue* v = f.get(key);
    if (!v) return f.bad(key, "missing"), out;
    if (!v->is(JsonType::array))
        return f.bad(key, "expected an array of layer numbers, got " + json_shown(*v), v), out;
    std::vector<bool> seen(size_t(n) + 1, false);
    for (size_t i = 0; i < v->items.size(); ++i) {
        const JsonValue& x = v->items[i];
        const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
        if (!x.is(JsonType::number) || x.number != std::floor(x.number) || x.number < 1 || x.number > n)
            return f.bad(at,
                         "expected a layer number from 1 to " + std::to_string(n) + ", got " + json_shown(x),
                         &x),
                   std::vector<int>{};
        if (seen[size_t(x.number)])
            return f.bad(at, "layer " + json_shown(x) + " is listed twice", &x), std::vector<int>{};
        seen[size_t(x.number)] = true;
        out.push_back(int(x.number));
    }
    return out;
}

// Kimi Linear's pattern: the KDA layers listed, MLA elsewhere; full_attn_layers, when given, must
// list exactly the rest (vLLM reads kda_layers alone: is_kda_layer).
void kimi_pattern(Fields& lac, int n, ReadModel& m) {
    const std::vector<int> kda = layer_list(lac, "kda_layers", n);
    if (lac.failed()) return;
    m.layers.assign(size_t(n), LayerKind::attention);
    for (int i : kda) m.layers[size_t(i - 1)] = LayerKind::linear;
    m.pattern_field = lac.path("kda_layers");
    if (!lac.get("full_attn_layers")) return;
    const std::vector<int> full = layer_list(lac, "full_attn_layers", n);
    std::vector<bool> listed(size_t(n), false);
    for (int i : kda) listed[size_t(i - 1)] = true;
    for (int i : full) {
        if (listed[size_t(i - 1)])
            return (void)lac.bad("full_attn_layers", "layer " + std::to_string(i) + " is also in kda_layers");
        listed[size_t(i - 1)] = true;
    }
    std::vector<int> neither;
    for (int i = 1; i <= n; ++i)
        if (!listed[size_t(i - 1)]) neither.push_back(i);
    if (!neither.empty() && !lac.failed())
        lac.bad("full_attn_layers", (neither.size() == 1 ? "layer " : "layers ") + layer_numbers(neither) +
                                        (neither.size() == 1 ? " is" : " are") +
                                        " in neither it nor kda_layers");
}

void read_kimi(Fields& text, ReadModel& m) {
    const int n = text.count("num_hidden_layers", 1, kMaxLayers);
    Fields lac = text.object("linear_attn_config");
    if (text.failed()) return;
    kimi_pattern(lac, n, m);
    const int heads = lac.count("num_heads", 1), dim = lac.count("head_dim", 1);
    const int conv = lac.count("short_conv_kernel_size", 1);
    const int latent = text.count("kv_lora_rank", 1), rope = text.count("qk_rope_head_dim", 0);
    m.dims = {{"heads", std::to_string(heads), lac.path("num_heads")},
              {"v_heads", std::to_string(heads), lac.path("num_heads") + " (one value head per q/k head)"},
              {"head_k", std::to_string(dim), lac.path("head_dim")},
              {"head_v", std::to_string(dim), lac.path("head_dim")},
              {"conv_width", std::to_string(conv), lac.path("short_conv_kernel_size")},
              {"state_dtype", "fp32", "not in config.json: vLLM keeps KDA's recurrent state in fp32"},
              {"attn_kind", "mla", "model_type: MLA caches the latent and the rope dims"},
              {"mla_latent", std::to_string(latent), text.path("kv_lora_rank")},
              {"mla_rope", std::to_string(rope), text.path("qk_rope_head_dim")}};
}

// Qwen's pattern: layer_types, or HF's rule from full_attention_interval when there is none.
void qwen_pattern(Fields& text, int n, ReadModel& m) {
    const JsonValue* types = text.get("layer_types");
    if (!types) {
        if (!text.get("full_attention_interval"))
            return (void)text.bad("layer_types", "missing, and so is full_attention_interval");
        const int every = text.count("full_attention_interval", 1);
        if (text.failed()) return;
        m.layers = hybrid_pattern(n, every, false);
        m.pattern_field = text.path("full_attention_interval");
        return;
    }
    m.pattern_field = text.path("layer_types");
    if (!types->is(JsonType::array))
        return (void)text.bad("layer_types", "expected an array of strings, got " + json_shown(*types),
                              types);
    if (types->items.size() != size_t(n))
        return (void)text.bad("layer_types",
                              std::to_string(types->items.size()) + " entries for " + std::to_string(n) +
                                  " layers (num_hidden_layers)",
                              types);
    for (size_t i = 0; i < types->items.size(); ++i) {
        const JsonValue& t = types->items[i];
        const bool lin = t.is(JsonType::string) && t.text == "linear_attention";
        if (!lin && !(t.is(JsonType::string) && t.text == "full_attention"))
            return (void)text.bad("layer_types[" + std::to_string(i) + "]",
                                  "expected \"linear_attention\" or \"full_attention\", got " + json_shown(t),
                                  &t);
        m.layers.push_back(lin ? LayerKind::linear : LayerKind::attention);
    }
}

void read_qwen(Fields& text, ReadModel& m) {
    const int n = text.count("num_hidden_layers", 1, kMaxLayers);
    if (text.failed()) return;
    qwen_pattern(text, n, m);
    auto dim = [&](const char* key, const char* field) {
        return HfParam{key, std::to_string(text.count(field, 1)), text.path(field)};
    };
    m.dims = {dim("heads", "linear_num_key_heads"), dim("v_heads", "linear_num_value_heads"),
              dim("head_k", "linear_key_head_dim"), dim("head_v", "linear_value_head_dim"),
              dim("conv_width", "linear_conv_kernel_dim")};
    if (const auto s = dtype_key(text, "mamba_ssm_dtype"))
        m.dims.push_back({"state_dtype", *s, text.path("mamba_ssm_dtype")});
    else
        m.dims.push_back(
            {"state_dtype", "fp32", "not in config.json: fp32, as the Qwen3-Next preset keeps it"});
    m.dims.push_back({"attn_kind", "gqa", "model_type: gated attention caches K and V per KV head"});
    m.dims.push_back(dim("kv_heads", "num_key_value_heads"));
    m.dims.push_back(dim("attn_head_dim", "head_dim"));
}

// The conv windows hold raw projections in the model's dtype (vLLM's mamba_cache_dtype "auto").
HfParam conv_dtype(Fields& text, Fields& top) {
    for (Fields* f : {&text, &top})
        for (const char* key : {"dtype", "torch_dtype"})
            if (f->get(key)) {
                const auto d = dtype_key(*f, key);
                return {"conv_dtype", d.value_or("bf16"), f->path(key)};
            }
    return {"conv_dtype", "bf16", "not in config.json: bf16, the published checkpoints' dtype"};
}

// The custom model's attn_every and attn_last that give `layers`: the interval can only be 0 or the
// first attention layer's number, and attn_last is set only when needed.
bool fit_pattern(const std::vector<LayerKind>& layers, int& every, bool& last) {
    const int n = int(layers.size());
    int first = 0;
    while (first < n && layers[size_t(first)] != LayerKind::attention) ++first;
    for (const int e : {0, first + 1})
        for (const bool l : {false, true})
            if (hybrid_pattern(n, e, l) == layers) return every = e, last = l, true;
    return false;
}

std::string model_name(const Family& f, const ReadModel& m) {
    int lin = 0;
    for (LayerKind k : m.layers) lin += k == LayerKind::linear;
    const bool kimi = f.dialect == Dialect::kimi;
    return std::string(f.label) + ", " + std::to_string(m.layers.size()) + " layers (" + std::to_string(lin) +
           (kimi ? " KDA + " : " Gated DeltaNet + ") + std::to_string(int(m.layers.size()) - lin) +
           (kimi ? " MLA)" : " attention)");
}

// The family from model_type: text_config's decides the fields, the top level's names the model.
const Family* find_family(const JsonValue& root, const JsonValue* text, std::string& error) {
    const JsonValue* top = root.find("model_type");
    const JsonValue* inner = text ? text->find("model_type") : nullptr;
    const JsonValue* mt = inner ? inner : top;
    if (!mt) return error = "model_type: missing (a config.json names its model type)", nullptr;
    const Family* f = mt->is(JsonType::string) ? family_of(mt->text) : nullptr;
    if (!f) {
        error = std::string(inner ? "text_config." : "") + "model_type: " + json_shown(*mt) +
                " is not a hybrid model this import reads (kimi_linear, kimi_k3, qwen3_next, qwen3_5, "
                "qwen3_5_moe)";
        return nullptr;
    }
    return f;
}

}  // namespace

bool is_hf_config(const JsonValue& root) {
    return root.is(JsonType::object) && (root.find("model_type") || root.find("text_config"));
}

HfConfigImport read_hf_config(const JsonValue& root) {
    HfConfigImport out;
    if (!root.is(JsonType::object)) return out.error = "a config.json holds one JSON object", out;
    const JsonValue* text = root.find("text_config");
    if (text && !text->is(JsonType::object))
        return out.error = text->where() + "text_config: expected an object, got " + json_shown(*text), out;
    const Family* f = find_family(root, text, out.error);
    if (!f) return out;
    const JsonValue* top_type = root.find("model_type");
    const Family* named = top_type && top_type->is(JsonType::string) ? family_of(top_type->text) : nullptr;
    if (named && named->wrapper && !text)
        return out.error = std::string("text_config: missing (model_type ") + named->model_type +
                           " keeps its dimensions there)",
               out;
    Fields top(&root, "", out.error), inner(text ? text : &root, text ? "text_config." : "", out.error);
    ReadModel m;
    if (f->dialect == Dialect::kimi)
        read_kimi(inner, m);
    else
        read_qwen(inner, m);
    const HfParam conv = conv_dtype(inner, top);
    if (!out.error.empty()) return out;
    int every = 0;
    bool last = false;
    if (!fit_pattern(m.layers, every, last)) {
        std::vector<int> attn;
        for (size_t i = 0; i < m.layers.size(); ++i)
            if (m.layers[i] == LayerKind::attention) attn.push_back(int(i + 1));
        out.error = m.pattern_field + ": attention at layers " + layer_numbers(attn) +
                    " is not a pattern the memory module's custom model holds (every attn_every-th layer, "
                    "and the last one if attn_last); nothing was applied";
        return out;
    }
    const std::string lf = inner.path("num_hidden_layers");
    out.params = {{"layers", std::to_string(m.layers.size()), lf},
                  {"attn_every", std::to_string(every), m.pattern_field},
                  {"attn_last", last ? "1" : "0", m.pattern_field}};
    out.params.insert(out.params.end(), m.dims.begin(), m.dims.end());
    out.params.push_back(conv);
    out.name = model_name(named ? *named : *f, m);
    return out;
}

}  // namespace k3
