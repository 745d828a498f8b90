// Module 2 `memory`: fixed recurrent state against a growing KV cache, per sequence.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b", "tiny", "custom"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B", "tiny (runnable)",
                                                "custom"};
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<ParamSpec> memory_params() {
    auto custom = [](ParamSpec s) {
        return s.in_group("Custom model").active_when("preset", "custom");
    };
    return {
        ParamSpec::choice("preset", "Model", kPresets, "kimi-linear-48b", kPresetLabels)
            .in_group("Model")
            .describe("Published configurations for the accounting, the runnable tiny model, or custom "
                      "dimensions (below)."),
        ParamSpec::integer("context", "Context length", "tokens", 1, 16777216, 131072)
            .log()
            .in_group("Workload")
            .describe("Tokens held per sequence (prompt plus generated so far)."),
        ParamSpec::real("budget_gib", "Cache memory budget", "GiB", 0.01, 4096, 40)
            .log()
            .in_group("Workload")
            .describe("Device memory left for per-sequence state and KV after weights and activations."),
        custom(ParamSpec::integer("layers", "Layers", "", 1, 256, 27).describe("Total decoder layers.")),
        custom(ParamSpec::integer("attn_every", "Attention every", "layers", 0, 64, 4)
                   .describe("Layer i (1-indexed) is attention when i is a multiple of this; 0 = none "
                             "periodic. Kimi Linear and Qwen3-Next use 4 (3:1).")),
        custom(ParamSpec::flag("attn_last", "Last layer is attention", true)
                   .describe("Kimi Linear's 27th layer is MLA (20 KDA + 7 MLA).")),
        custom(ParamSpec::integer("heads", "Linear q/k heads", "heads", 1, 256, 32)
                   .describe("Query/key heads of each linear-attention (KDA or GDN) layer.")),
        custom(ParamSpec::integer("v_heads", "Linear value heads", "", 1, 256, 32)
                   .describe("One state matrix per value head; a multiple of the q/k heads (GDN uses "
                             "32 value heads over 16 q/k heads).")),
        custom(ParamSpec::integer("head_k", "Key head dim K", "", 1, 1024, 128)
                   .describe("Rows of each head's K x V state matrix.")),
        custom(ParamSpec::integer("head_v", "Value head dim V", "", 1, 1024, 128)
                   .describe("Columns of each head's K x V state matrix.")),
        custom(ParamSpec::integer("conv_width", "Short conv width", "", 1, 16, 4)
                   .describe("The conv window keeps width - 1 raw projection rows per stream.")),
        custom(ParamSpec::choice("state_dtype", "State dtype", {"fp32", "bf16", "fp16"}, "fp32")
                   .describe("Element type of the recurrent state: fp32 for the presets (SGLang's --mamba-ssm-dtype, "
                             "Qwen configs set mamba_ssm_dtype float32); bf16 halves it.")),
        custom(ParamSpec::choice("conv_dtype", "Conv window dtype", {"fp32", "bf16", "fp16"}, "bf16")
                   .describe("Element type of the short-conv windows (the raw q/k/v projections).")),
        custom(ParamSpec::choice("attn_kind", "Attention cache", {"mla", "gqa"}, "mla",
                                 {"MLA latent", "GQA K/V heads"})
                   .describe("What the attention layers cache per token: MLA's compressed latent plus the "
                             "shared rope key (Kimi Linear), or K and V per KV head (Qwen3-Next).")),
        custom(ParamSpec::integer("mla_latent", "MLA latent dim", "", 0, 8192, 512)
                   .describe("kv_lora_rank: the compressed latent cached per token (MLA only).")),
        custom(ParamSpec::integer("mla_rope", "MLA rope dims", "", 0, 1024, 64)
                   .describe("The shared key part cached next to the latent (MLA only).")),
        custom(ParamSpec::integer("kv_heads", "KV heads", "", 1, 256, 2).describe("GQA only.")),
        custom(ParamSpec::integer("attn_head_dim", "Attention head dim", "", 1, 1024, 256).describe("GQA only.")),
        custom(ParamSpec::choice("kv_dtype", "KV dtype", {"fp32", "bf16", "fp16", "fp8"}, "bf16")
                   .describe("Element type of the attention cache.")),
    };
}

ModelConfig config_from(const Params& p) {
    if (p.str("preset") != "custom") return *model_preset(p.str("preset"));
    ModelConfig c;
    c.id = "custom";
    c.name = "custom";
    c.layers = hybrid_pattern(p.i("layers"), p.i("attn_every"), p.flag("attn_last"));
    c.lin_heads = p.i("heads");
    c.lin_v_heads = p.i("v_heads");
    c.head_k = p.i("head_k");
    c.head_v = p.i("head_v");
    c.conv_width = p.i("conv_width");
    c.state_dtype = *parse_dtype(p.str("state_dtype"));
    c.conv_dtype = *parse_dtype(p.str("conv_dtype"));
    c.attn_kind = p.str("attn_kind") == "gqa" ? AttnKind::gqa : AttnKind::mla;
    c.mla_latent = p.i("mla_latent");
    c.mla_rope = p.i("mla_rope");
    c.kv_heads = p.i("kv_heads");
    c.attn_head_dim = p.i("attn_head_dim");
    c.kv_dtype = *parse_dtype(p.str("kv_dtype"));
    return c;
}

std::vector<ParamIssue> validate_memory(const Params& p) {
    std::vector<ParamIssue> out;
    if (p.str("preset") != "custom") return out;
    if (p.i("v_heads") % p.i("heads") != 0)
        out.push_back({ParamIssue::error, "v_heads",
                       "value heads (" + p.text("v_heads") + ") must be a multiple of q/k heads (" + p.text("heads") +
                           ")"});
    const ModelConfig c = config_from(p);
    if (c.n_linear() == 0)
        out.push_back({ParamIssue::warning, "attn_every", "every layer is attention: there is no fixed state"});
    return out;
}

// Geometric sweep of context lengths for the plots, always containing `extra`.
std::vector<double> context_sweep(double extra) {
    std::vector<double> x;
    for (double c = 64; c <= 16777216.0 * 1.0001; c *= std::pow(2.0, 0.25)) x.push_back(std::round(c));
    x.push_back(extra);
    std::sort(x.begin(), x.end());
    x.erase(std::unique(x.begin(), x.end()), x.end());
    return x;
}

class MemoryRun : public StagedRun {
public:
    explicit MemoryRun(const Params& p) : StagedRun("memory", p), p_(p) {
        add_step("accounting", 1, [this] { compute(); });
    }

private:
    void compute();
    Params p_;
};

void MemoryRun::compute() {
    Report& r = report_;
    const ModelConfig c = config_from(p_);
    const MemoryAccount a = account_memory(c);
    const double ctx = p_.num("context");
    const double budget = p_.num("budget_gib") * kGiB;
    const double total = a.total_bytes(ctx), base = a.baseline_bytes(ctx);
    const std::string lin = c.linear_name;

    r.scalar("state_bytes", lin + " state per sequence (fixed)", "B", double(a.state_bytes), true).help =
        "Recurrent state S plus short-conv windows of all " + std::to_string(a.linear_layers) + " " + lin +
        " layers. Independent of context length.";
    r.scalar("kv_bytes_per_token", "Attention cache per token", "B", double(a.kv_bytes_per_token), true).help =
        "Cache of all " + std::to_string(a.attention_layers) + " attention layers for one token.";
    r.scalar("total_bytes", "Hybrid per sequence at context", "B", total, true);
    r.scalar("baseline_bytes", "All-attention baseline at context", "B", base).help =
        "The same model with every layer an attention layer of the same cache geometry.";
    r.scalar("ratio_vs_baseline", "Hybrid / all-attention", "ratio", base > 0 ? total / base : 0, true);
    r.scalar("break_even_tokens", "State equals attention cache at", "tokens", std::round(a.state_equivalent_tokens()),
             true)
        .help = "Context at which the attention layers' cache weighs as much as the fixed state.";
    r.scalar("baseline_crossover_tokens", "Hybrid smaller than all-attention above", "tokens",
             std::ceil(a.baseline_crossover_tokens()));
    r.scalar("sequences_in_budget", "Sequences in budget (hybrid)", "sequences", std::floor(budget / total));
    r.scalar("baseline_sequences_in_budget", "Sequences in budget (all-attention)", "sequences",
             base > 0 ? std::floor(budget / base) : 0);
    r.scalar("saving_bytes", "Saved per sequence vs all-attention", "B", base - total);
    r.scalar("state_bytes_per_layer", lin + " state per layer", "B", double(a.state_bytes_per_layer));
    r.scalar("linear_layers", lin + " layers", "count", a.linear_layers);
    r.scalar("attention_layers", "Attention layers", "count", a.attention_layers);

    // ---- plots ----
    const auto xs = context_sweep(ctx);
    Series hy{"hybrid total", "context (tokens)", "bytes per sequence", {}, {}, "Memory per sequence", true, true};
    hy.x_unit = "tokens";
    hy.y_unit = "B";
    Series bl = hy, st = hy, kv = hy;
    bl.name = "all-attention baseline";
    st.name = lin + " state (fixed)";
    kv.name = "attention KV of the hybrid";
    Series fit{"hybrid", "context (tokens)", "sequences", {}, {}, "Sequences that fit in the budget", true, true};
    fit.x_unit = "tokens";
    fit.y_unit = "sequences";
    Series fitb = fit;
    fitb.name = "all-attention";
    Series ratio{"hybrid / all-attention", "context (tokens)", "ratio", {}, {}, "Hybrid / all-attention memory",
                 true, false};
    ratio.x_unit = "tokens";
    ratio.y_unit = "ratio";
    for (double x : xs) {
        hy.x.push_back(x), hy.y.push_back(a.total_bytes(x));
        bl.x.push_back(x), bl.y.push_back(a.baseline_bytes(x));
        st.x.push_back(x), st.y.push_back(double(a.state_bytes));
        kv.x.push_back(x), kv.y.push_back(double(a.kv_bytes_per_token) * x);
        fit.x.push_back(x), fit.y.push_back(std::floor(budget / a.total_bytes(x)));
        fitb.x.push_back(x), fitb.y.push_back(a.baseline_bytes(x) > 0 ? std::floor(budget / a.baseline_bytes(x)) : 0);
        ratio.x.push_back(x), ratio.y.push_back(a.baseline_bytes(x) > 0 ? a.total_bytes(x) / a.baseline_bytes(x) : 0);
    }
    r.series = {hy, bl, st, kv, fit, fitb, ratio};

    // ---- tables ----
    Table parts{"Per-sequence memory by part", {"part", "layers", "bytes per layer", "bytes per sequence", "grows with"},
                {}, {"", "count", "B", "B", ""}};
    const double rows = c.conv_width > 1 ? c.conv_width - 1 : 0;
    parts.rows.push_back({lin + " recurrent state S [" + std::to_string(c.lin_v_heads) + "][" +
                              std::to_string(c.head_k) + "][" + std::to_string(c.head_v) + "] " +
                              dtype_name(c.state_dtype),
                          double(a.linear_layers), double(a.recurrent_bytes_per_layer),
                          double(a.recurrent_bytes_per_layer) * a.linear_layers, std::string("fixed")});
    parts.rows.push_back({"short-conv windows " + format_number(rows) + " x " + std::to_string(c.conv_channels()) +
                              " " + dtype_name(c.conv_dtype),
                          double(a.linear_layers), double(a.conv_bytes_per_layer),
                          double(a.conv_bytes_per_layer) * a.linear_layers, std::string("fixed")});
    const std::string kvdesc = c.attn_kind == AttnKind::mla
                                   ? "MLA latent " + std::to_string(c.mla_latent) + " + rope " +
                                         std::to_string(c.mla_rope)
                                   : "GQA K+V 2 x " + std::to_string(c.kv_heads) + " x " + std::to_string(c.attn_head_dim);
    parts.rows.push_back({kvdesc + " " + dtype_name(c.kv_dtype) + ", per token", double(a.attention_layers),
                          double(a.kv_bytes_per_token_per_layer), double(a.kv_bytes_per_token) * ctx,
                          std::string("context")});
    r.tables.push_back(parts);

    Table at{"At typical context lengths",
             {"context", "hybrid", "all-attention", "hybrid / all-attention", "sequences in budget",
              "all-attention sequences"},
             {},
             {"tokens", "B", "B", "ratio", "sequences", "sequences"}};
    std::vector<double> marks = {4096, 32768, 131072, 1048576};
    if (std::find(marks.begin(), marks.end(), ctx) == marks.end()) marks.push_back(ctx);
    std::sort(marks.begin(), marks.end());
    for (double m : marks)
        at.rows.push_back({m, a.total_bytes(m), a.baseline_bytes(m),
                           a.baseline_bytes(m) > 0 ? a.total_bytes(m) / a.baseline_bytes(m) : 0.0,
                           std::floor(budget / a.total_bytes(m)),
                           a.baseline_bytes(m) > 0 ? std::floor(budget / a.baseline_bytes(m)) : 0.0});
    r.tables.push_back(at);

    // ---- checks ----
    // Sum the layers one by one (the way the pool allocates them) and compare with the closed form.
    double by_layer = 0;
    for (LayerKind k : c.layers)
        by_layer += k == LayerKind::linear ? double(a.state_bytes_per_layer) : double(a.kv_bytes_per_token_per_layer) * ctx;
    r.check("Layer-by-layer sum equals fixed state + KV x context", by_layer == total,
            format_grouped(by_layer) + " B vs " + format_grouped(total) + " B");
    const double be = a.state_equivalent_tokens();
    if (std::isfinite(be))
        r.check("At the break-even length the attention cache equals the state",
                std::fabs(double(a.kv_bytes_per_token) * be - double(a.state_bytes)) <= double(a.kv_bytes_per_token),
                format_number(std::round(be)) + " tokens x " + format_grouped(double(a.kv_bytes_per_token)) +
                    " B = " + format_grouped(std::round(be) * double(a.kv_bytes_per_token)) + " B vs state " +
                    format_grouped(double(a.state_bytes)) + " B");
    const double xo = a.baseline_crossover_tokens();
    if (std::isfinite(xo))
        r.check("Above the crossover the hybrid is smaller than all-attention",
                a.total_bytes(std::ceil(xo) + 1) < a.baseline_bytes(std::ceil(xo) + 1) &&
                    a.total_bytes(std::floor(xo) - 1) >= a.baseline_bytes(std::floor(xo) - 1),
                "crossover at " + format_sig(xo, 6) + " tokens");
    if (c.id == "kimi-linear-48b") {
        const double r1m = a.total_bytes(1048576) / a.baseline_bytes(1048576);
        r.check("Kimi-Linear reference figures (reference/kda.md §5)",
                a.state_bytes == 43417600 && a.kv_bytes_per_token == 8064 && std::fabs(r1m - 0.261) < 0.0005 &&
                    std::round(be) == 5384,
                "state " + format_grouped(double(a.state_bytes)) + " B (expect 43,417,600), KV " +
                    format_grouped(double(a.kv_bytes_per_token)) + " B/token (expect 8,064), ratio at 1,048,576 " +
                    format_sig(r1m, 4) + " (expect 0.261), break-even " + format_number(std::round(be)) +
                    " (expect 5,384)");
    }
    if (c.id == "qwen3-next-80b") {
        const double mib = double(a.state_bytes) / (1024.0 * 1024.0);
        r.check("Qwen3-Next reference figures (reference/serving.md §7)",
                std::fabs(mib - 73.7) < 0.05 && a.kv_bytes_per_token == 24576 && std::round(be) == 3144,
                "state " + format_sig(mib, 4) + " MiB (expect 73.7), KV " + format_grouped(double(a.kv_bytes_per_token)) +
                    " B/token (expect 24 KiB), one state = " + format_number(std::round(be)) +
                    " tokens of KV (expect 3,144)");
    }

    // ---- notes ----
    r.notes.push_back(c.name + ": " + std::to_string(a.linear_layers) + " " + lin + " + " +
                      std::to_string(a.attention_layers) + " attention layers.");
    if (c.attn_kind == AttnKind::mla)
        r.notes.push_back("Attention cache assumes an absorbed-MLA latent cache (latent + rope elements per token per "
                          "layer), as vLLM stores it; HF eager caching of decompressed K and V is much larger.");
    r.notes.push_back("Per sequence, tensor parallelism 1. With TP the head-sharded state divides by TP.");
    if (p_.str("preset") != "custom") {
        bool ignored = false;
        for (const auto& s : p_.specs())
            if (s.active_key == "preset" && !p_.is_default(s.key)) ignored = true;
        if (ignored) r.notes.push_back("Custom dimensions are set but ignored: they apply only with preset=custom.");
    }
}

}  // namespace

Experiment make_memory_experiment() {
    Experiment e;
    e.number = 2;
    e.id = "memory";
    e.title = "Fixed state vs growing KV";
    e.component = "foundation";
    e.purpose = "How much memory one sequence needs in a hybrid model, against an all-attention model, as the "
                "context grows.";
    e.how_it_works =
        "A KDA layer keeps one fixed-size state per sequence: for every value head a K x V matrix S (fp32 in "
        "every implementation read), plus the last W-1 raw q/k/v projection rows for the short causal conv. "
        "It does not grow with the context. An attention layer keeps a cache entry for every past token; "
        "Kimi Linear's MLA layers cache a 512-element latent plus a 64-element shared key part (576 elements, "
        "bf16: 1,152 B per token per layer).\n\n"
        "So a hybrid pays a fixed entry fee (Kimi-Linear-48B-A3B: 20 KDA layers x 2,170,880 B = 43,417,600 B) "
        "plus 8,064 B per token for its 7 MLA layers, where an all-attention model of the same geometry pays "
        "27 x 1,152 = 31,104 B per token and no fee.\n\n"
        "- Break-even: the context at which the hybrid's attention cache weighs as much as its fixed state "
        "(Kimi Linear: about 5,384 tokens).\n"
        "- Crossover: the context above which the hybrid needs less memory than the all-attention model.\n"
        "- At 1,048,576 tokens the hybrid needs 0.261 of the baseline: the paper's \"up to 75 % less KV "
        "cache\".\n\n"
        "Sources: HF config.json of moonshotai/Kimi-Linear-48B-A3B-Instruct; vLLM's MLA cache format and "
        "kda_state_shape (mamba_utils.py); Qwen3-Next config (36 Gated DeltaNet + 12 attention layers).";
    e.where_it_does_not_pay =
        "Below the break-even length the fixed state costs more than the KV it replaces: a Kimi-Linear "
        "sequence of 1,000 tokens holds 43 MB of state against 8 MB of MLA cache. Short chat turns and "
        "batch classification never reach the regime where the hybrid saves memory.\n\n"
        "The state also changes what caching costs: one state checkpoint weighs as much as about 5,384 "
        "tokens of Kimi-Linear's MLA cache (3,144 for Qwen3-Next), so caching a state every 256 tokens "
        "costs far more than the KV it protects (modules 4 and 5).";
    e.params = memory_params();
    e.validate = validate_memory;
    e.headlines = {
        {"Kimi-Linear at 1M tokens needs this fraction of an all-attention model's cache memory",
         {{"preset", "kimi-linear-48b"}, {"context", "1048576"}}, "ratio_vs_baseline"},
        {"One Kimi-Linear state weighs as much as this many tokens of its MLA cache", {}, "break_even_tokens"},
    };
    e.start = [](const Params& p) { return std::make_unique<MemoryRun>(p); };
    return e;
}

K3_REGISTER_EXPERIMENT(make_memory_experiment);

}  // namespace k3
