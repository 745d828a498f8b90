// Module 2 `memory`: its parameters, validation and declaration.
#include "core/modules/memory/memory.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

void custom_params(ParamList<CustomModel>& l) {
    auto custom = [](ParamSpec& s) -> ParamSpec& {
        return s.in_group("Custom model").active_when("preset", "custom");
    };
    const auto dtypes = dtype_choices({DType::fp32, DType::bf16, DType::fp16});
    custom(l.integer(&CustomModel::layers, "layers", "Layers", "", 1, 256)).describe("Total decoder layers.");
    custom(l.integer(&CustomModel::attn_every, "attn_every", "Attention every", "layers", 0, 64));
    custom(l.flag(&CustomModel::attn_last, "attn_last", "Last layer is attention"))
        .describe("Kimi Linear's 27th layer is MLA (20 KDA + 7 MLA).");
    custom(l.integer(&CustomModel::heads, "heads", "Linear q/k heads", "heads", 1, 256))
        .describe("Query/key heads of each linear-attention (KDA or GDN) layer.");
    custom(l.integer(&CustomModel::v_heads, "v_heads", "Linear value heads", "", 1, 256));
    custom(l.integer(&CustomModel::head_k, "head_k", "Key head dim K", "", 1, 1024))
        .describe("Rows of each head's K x V state matrix.");
    custom(l.integer(&CustomModel::head_v, "head_v", "Value head dim V", "", 1, 1024))
        .describe("Columns of each head's K x V state matrix.");
    custom(l.integer(&CustomModel::conv_width, "conv_width", "Short conv width", "", 1, 16))
        .describe("The conv window keeps width - 1 raw projection rows per stream.");
    custom(l.choice(&CustomModel::state_dtype, "state_dtype", "State dtype", dtypes));
    custom(l.choice(&CustomModel::conv_dtype, "conv_dtype", "Conv window dtype", dtypes))
        .describe("Element type of the short-conv windows (the raw q/k/v projections).");
    custom(l.choice(
        &CustomModel::attn_kind, "attn_kind", "Attention cache",
        Choices<AttnKind>{{AttnKind::mla, "mla", "MLA latent"}, {AttnKind::gqa, "gqa", "GQA K/V heads"}}));
    custom(l.integer(&CustomModel::mla_latent, "mla_latent", "MLA latent dim", "", 0, 8192))
        .describe("kv_lora_rank: the compressed latent cached per token (MLA only).");
    custom(l.integer(&CustomModel::mla_rope, "mla_rope", "MLA rope dims", "", 0, 1024))
        .describe("The shared key part cached next to the latent (MLA only).");
    custom(l.integer(&CustomModel::kv_heads, "kv_heads", "KV heads", "", 1, 256)).describe("GQA only.");
    custom(l.integer(&CustomModel::attn_head_dim, "attn_head_dim", "Attention head dim", "", 1, 1024))
        .describe("GQA only.");
}

std::vector<Falsifier<MemoryParams>> memory_falsifiers() {
    auto set = [](MemoryFalsify f) { return [f](MemoryParams& p) { p.falsify = f; }; };
    return {
        {"state_size",
         "the accounting counts each linear layer's state 64 B too large",
         {"accounting_equals_tensor_recount"},
         set(MemoryFalsify::state_size)},
        {"kv_dtype",
         "the accounting counts the KV cache in fp32 while it is stored in bf16",
         {"accounting_equals_tensor_recount", "break_even_matches_search", "crossover_matches_search"},
         set(MemoryFalsify::kv_dtype)},
        {"wrong_model_kimi",
         "the accounting is given Qwen3-Next's configuration for Kimi-Linear",
         {"kimi_linear_reference_figures"},
         set(MemoryFalsify::wrong_model),
         {{"preset", "kimi-linear-48b"}}},
        {"wrong_model_k3",
         "the accounting is given Qwen3-Next's configuration for Kimi-K3",
         {"kimi_k3_reference_figures"},
         set(MemoryFalsify::wrong_model),
         {{"preset", "kimi-k3"}}},
        {"wrong_model_qwen",
         "the accounting is given Kimi-Linear's configuration for Qwen3-Next",
         {"qwen3_next_reference_figures"},
         set(MemoryFalsify::wrong_model),
         {{"preset", "qwen3-next-80b"}}},
    };
}

// The accounting and its recount walk the model's layers once each; the break-even and crossover
// searches take under 90 steps. `k3cli run memory` took under 10 ms and 8 MiB at every extreme of its
// parameters (256 layers of 256 heads of 1,024 x 1,024 included: tests/cli/hostile.mjs): the
// process's start-up and 1 us a layer bound it with room.
RunEstimate memory_estimate(const MemoryParams& p) {
    const double layers = double(memory_model_tp1(p).layers.size());
    return {.seconds = 0.05 + 1e-6 * layers,
            .bytes = 16.0 * 1024 * 1024,
            .counted = format_grouped(layers) + " layers accounted and recounted (closed form)",
            .on = &p.custom.layers};
}

}  // namespace

ParamList<MemoryParams> memory_params() {
    ParamList<MemoryParams> l;
    l.choice(&MemoryParams::preset, "preset", "Model",
             preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b,
                             ModelPreset::k3_tiny, ModelPreset::tiny, ModelPreset::custom}))
        .in_group("Model")
        .describe(
            "Published configurations for the accounting, the runnable models, or custom dimensions "
            "(below).");
    l.choice(&MemoryParams::kv_dtype, "kv_dtype", "KV dtype", kv_dtype_choices()).in_group("Model");
    l.integer(&MemoryParams::tp, "tp", "Tensor parallel", "ranks", 1, 64).log().in_group("Model");
    l.integer(&MemoryParams::context, "context", "Context length", "tokens", 1, 16777216)
        .log()
        .in_group("Workload")
        .describe("Tokens held per sequence (prompt plus generated so far).");
    l.real(&MemoryParams::budget_gib, "budget_gib", "Cache memory budget", "GiB", 0.01, 4096)
        .log()
        .in_group("Workload")
        .describe("Device memory left for per-sequence state and KV after weights and activations.");
    l.group(&MemoryParams::custom, custom_params);
    return l;
}

void validate_memory(const MemoryParams& p, Issues& issues) {
    const ModelConfig whole = memory_model_tp1(p);
    if (const std::string e = tp_shard_error(whole, p.tp); !e.empty()) issues.error(p.tp, e);
    if (p.preset != ModelPreset::custom) return;
    if (p.custom.v_heads % p.custom.heads != 0)
        issues.error(p.custom.v_heads, "value heads (" + std::to_string(p.custom.v_heads) +
                                           ") must be a multiple of q/k heads (" +
                                           std::to_string(p.custom.heads) + ")");
    if (memory_model(p).n_linear() == 0)
        issues.warning(p.custom.attn_every, "every layer is attention: there is no fixed state");
}

Experiment make_memory_experiment() {
    return make_experiment(Module<MemoryParams>{
        .number = 2,
        .id = "memory",
        .title = "Fixed state vs growing KV",
        .component = "foundation",
        .purpose = "How much memory one sequence needs in a hybrid model, against an all-attention model, as "
                   "the context grows.",
        .params = memory_params(),
        .validate = validate_memory,
        .estimate = memory_estimate,
        .start = [](const MemoryParams& p, const Params& raw) -> std::unique_ptr<Run> {
            return one_step_run("memory", raw, "accounting",
                                [p](Report& r) { report_memory(p, run_memory(p), r); });
        },
        .headlines =
            {
                {"One Kimi-K3 sequence's KDA state (69 layers of 96 heads, fp32)",
                 {{"preset", "kimi-k3"}},
                 "state_bytes",
                 true},
                {"Kimi-K3 at 1M tokens needs this fraction of an all-MLA model's cache memory",
                 {{"preset", "kimi-k3"}, {"context", "1048576"}},
                 "ratio_vs_baseline",
                 true},
                {"One Kimi-K3 state weighs as much as this many tokens of its MLA cache (bf16)",
                 {{"preset", "kimi-k3"}},
                 "break_even_tokens",
                 true},
                {"Kimi-Linear at 1M tokens needs this fraction of an all-attention model's cache memory",
                 {{"preset", "kimi-linear-48b"}, {"context", "1048576"}},
                 "ratio_vs_baseline"},
                {"One Kimi-Linear state weighs as much as this many tokens of its MLA cache",
                 {{"preset", "kimi-linear-48b"}},
                 "break_even_tokens"},
            },
        .falsifiers = memory_falsifiers(),
        // Kimi-K3's figures also per GPU at TP8 and with an fp8 cache.
        .audit_params = {{{"preset", "kimi-k3"}, {"kv_dtype", "fp8"}},
                         {{"preset", "kimi-k3"}, {"tp", "8"}, {"kv_dtype", "fp8"}}}});
}

K3_REGISTER_EXPERIMENT(make_memory_experiment);

}  // namespace k3
