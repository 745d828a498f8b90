// Module 2 `memory`: the accounting as figures, plots over the context, tables and checks.
#include <algorithm>
#include <cmath>

#include "core/base/bytes.h"
#include "core/base/numfmt.h"
#include "core/modules/memory/memory.h"

namespace k3 {

namespace {

// Geometric sweep of context lengths for the plots, always containing `extra`.
std::vector<double> context_sweep(double extra) {
    std::vector<double> x;
    for (double c = 64; c <= 16777216.0 * 1.0001; c *= std::pow(2.0, 0.25)) x.push_back(std::round(c));
    x.push_back(extra);
    std::sort(x.begin(), x.end());
    x.erase(std::unique(x.begin(), x.end()), x.end());
    return x;
}

double ratio(const MemoryAccount& a, double ctx) {
    return a.baseline_bytes(ctx) > 0 ? a.total_bytes(ctx) / a.baseline_bytes(ctx) : 0;
}
double baseline_fit(const MemoryAccount& a, double ctx, double budget) {
    return a.baseline_bytes(ctx) > 0 ? std::floor(budget / a.baseline_bytes(ctx)) : 0;
}

void scalars(const MemoryParams& p, const MemoryResult& m, Report& r) {
    const MemoryAccount& a = m.account;
    const double ctx = double(p.context), budget = p.budget_gib * kGiB;
    const double total = a.total_bytes(ctx), base = a.baseline_bytes(ctx);
    const std::string& lin = m.model.linear_name;
    r.scalar("state_bytes", lin + " state per sequence (fixed)", "B", double(a.state_bytes), true).help =
        "Recurrent state S plus short-conv windows of all " + std::to_string(a.linear_layers) + " " + lin +
        " layers. Independent of context length.";
    r.scalar("kv_bytes_per_token", "Attention cache per token", "B", double(a.kv_bytes_per_token), true)
        .help = "Cache of all " + std::to_string(a.attention_layers) + " attention layers for one token.";
    r.scalar("total_bytes", "Hybrid per sequence at context", "B", total, true);
    r.scalar("baseline_kv_bytes_per_token", "All-attention cache per token", "B",
             double(a.baseline_kv_bytes_per_token));
    r.scalar("baseline_bytes", "All-attention baseline at context", "B", base).help =
        "The same model with every layer an attention layer of the same cache geometry.";
    r.scalar("ratio_vs_baseline", "Hybrid / all-attention", "ratio", ratio(a, ctx), true);
    r.scalar("break_even_tokens", "State equals attention cache at", "tokens",
             std::round(a.state_equivalent_tokens()), true)
        .help = "Context at which the attention layers' cache weighs as much as the fixed state.";
    r.scalar("baseline_crossover_tokens", "Hybrid smaller than all-attention above", "tokens",
             std::ceil(a.baseline_crossover_tokens()));
    r.scalar("sequences_in_budget", "Sequences in budget (hybrid)", "sequences", std::floor(budget / total));
    r.scalar("baseline_sequences_in_budget", "Sequences in budget (all-attention)", "sequences",
             baseline_fit(a, ctx, budget));
    r.scalar("saving_bytes", "Saved per sequence vs all-attention", "B", base - total);
    r.scalar("state_bytes_per_layer", lin + " state per layer", "B", double(a.state_bytes_per_layer));
    r.scalar("linear_layers", lin + " layers", "count", a.linear_layers);
    r.scalar("attention_layers", "Attention layers", "count", a.attention_layers);
}

void plots(const MemoryParams& p, const MemoryResult& m, Report& r) {
    const MemoryAccount& a = m.account;
    const double budget = p.budget_gib * kGiB;
    auto per_sequence = [](std::string name) {
        Series s = make_series(std::move(name), "Memory per sequence", "context (tokens)",
                               "bytes per sequence", "tokens", "B");
        s.log_x = s.log_y = true;
        return s;
    };
    auto fitting = [](std::string name) {
        Series s = make_series(std::move(name), "Sequences that fit in the budget", "context (tokens)",
                               "sequences", "tokens", "sequences");
        s.log_x = s.log_y = true;
        return s;
    };
    Series hy = per_sequence("hybrid total"), bl = per_sequence("all-attention baseline");
    Series st = per_sequence(m.model.linear_name + " state (fixed)"),
           kv = per_sequence("attention KV of the hybrid");
    Series fit = fitting("hybrid"), fitb = fitting("all-attention");
    Series rat = make_series("hybrid / all-attention", "Hybrid / all-attention memory", "context (tokens)",
                             "ratio", "tokens", "ratio");
    rat.log_x = true;
    for (double x : context_sweep(double(p.context))) {
        hy.add(x, a.total_bytes(x));
        bl.add(x, a.baseline_bytes(x));
        st.add(x, double(a.state_bytes));
        kv.add(x, double(a.kv_bytes_per_token) * x);
        fit.add(x, std::floor(budget / a.total_bytes(x)));
        fitb.add(x, baseline_fit(a, x, budget));
        rat.add(x, ratio(a, x));
    }
    r.series = {hy, bl, st, kv, fit, fitb, rat};
}

void tables(const MemoryParams& p, const MemoryResult& m, Report& r) {
    const ModelConfig& c = m.model;
    const MemoryAccount& a = m.account;
    const double ctx = double(p.context), budget = p.budget_gib * kGiB;
    Table& parts = r.add_table(make_table("Per-sequence memory by part", {{"part", ""},
                                                                          {"layers", "count"},
                                                                          {"bytes per layer", "B"},
                                                                          {"bytes per sequence", "B"},
                                                                          {"grows with", ""}}));
    const double rows = c.conv_width > 1 ? c.conv_width - 1 : 0;
    parts.add({c.linear_name + " recurrent state S [" + std::to_string(c.lin_v_heads) + "][" +
                   std::to_string(c.head_k) + "][" + std::to_string(c.head_v) + "] " +
                   dtype_name(c.state_dtype),
               double(a.linear_layers), double(a.recurrent_bytes_per_layer),
               double(a.recurrent_bytes_per_layer) * a.linear_layers, std::string("fixed")});
    parts.add({"short-conv windows " + format_number(rows) + " x " + std::to_string(c.conv_channels()) + " " +
                   dtype_name(c.conv_dtype),
               double(a.linear_layers), double(a.conv_bytes_per_layer),
               double(a.conv_bytes_per_layer) * a.linear_layers, std::string("fixed")});
    const std::string kv =
        c.attn_kind == AttnKind::mla
            ? "MLA latent " + std::to_string(c.mla_latent) + " + rope " + std::to_string(c.mla_rope)
            : "GQA K+V 2 x " + std::to_string(c.kv_heads) + " x " + std::to_string(c.attn_head_dim);
    parts.add({kv + " " + dtype_name(c.kv_dtype) + ", per token", double(a.attention_layers),
               double(a.kv_bytes_per_token_per_layer), double(a.kv_bytes_per_token) * ctx,
               std::string("context")});

    Table& at =
        r.add_table(make_table("At typical context lengths", {{"context", "tokens"},
                                                              {"hybrid", "B"},
                                                              {"all-attention", "B"},
                                                              {"hybrid / all-attention", "ratio"},
                                                              {"sequences in budget", "sequences"},
                                                              {"all-attention sequences", "sequences"}}));
    std::vector<double> marks = {4096, 32768, 131072, 1048576};
    if (std::find(marks.begin(), marks.end(), ctx) == marks.end()) marks.push_back(ctx);
    std::sort(marks.begin(), marks.end());
    for (double x : marks)
        at.add({x, a.total_bytes(x), a.baseline_bytes(x), ratio(a, x), std::floor(budget / a.total_bytes(x)),
                baseline_fit(a, x, budget)});
}

// Kimi-K3's published shapes, as vLLM allocates them (reference/kimi_k3.md §2.1-2.4): per GPU at TP1
// and TP8, the MLA cache in bf16 or fp8.
void kimi_k3_reference_check(const MemoryParams& p, const MemoryResult& m, Report& r) {
    const MemoryAccount& a = m.account;
    const DType kv = m.model.kv_dtype;
    if ((p.tp != 1 && p.tp != 8) || (kv != DType::bf16 && kv != DType::fp8)) return;
    const bool fp8 = kv == DType::fp8;
    const uint64_t layer = p.tp == 1 ? 6512640 : 814080, per_token = fp8 ? 13824 : 27648;
    bool ok =
        a.state_bytes_per_layer == layer && a.state_bytes == layer * 69 && a.kv_bytes_per_token == per_token;
    std::string detail = "state " + format_grouped(double(a.state_bytes_per_layer)) +
                         " B per layer (expect " + format_grouped(double(layer)) + "), " +
                         format_grouped(double(a.state_bytes)) + " B per sequence (expect " +
                         format_grouped(double(layer * 69)) + "), MLA " +
                         format_grouped(double(a.kv_bytes_per_token)) + " B/token (expect " +
                         format_grouped(double(per_token)) + ")";
    if (p.tp == 1) {
        // Break-even against its own MLA and the ratio to an all-MLA 93-layer model.
        const double be = std::round(a.state_equivalent_tokens());
        const double r128 = ratio(a, 131072), r1m = ratio(a, 1048576);
        const double want_be = fp8 ? 32507 : 16253, want128 = fp8 ? 0.322 : 0.290,
                     want1m = fp8 ? 0.266 : 0.262;
        ok = ok && be == want_be && std::fabs(r128 - want128) < 0.0005 && std::fabs(r1m - want1m) < 0.0005;
        detail += ", break-even " + format_grouped(be) + " tokens (expect " + format_grouped(want_be) +
                  "), hybrid / all-MLA " + format_sig(r128, 3) + " at 131,072 (expect " +
                  format_sig(want128, 3) + ") and " + format_sig(r1m, 3) + " at 1,048,576 (expect " +
                  format_sig(want1m, 3) + ")";
    }
    r.check("kimi_k3_reference_figures", "Kimi-K3 reference figures (reference/kimi_k3.md §2)", ok, detail);
}

void reference_checks(const MemoryParams& p, const MemoryResult& m, Report& r) {
    // Keyed on the preset asked for, so that an accounting fed another model's configuration fails.
    const MemoryAccount& a = m.account;
    const double be = a.state_equivalent_tokens();
    // The published figures are for one GPU and the preset's own KV dtype.
    const bool published = p.tp == 1 && p.kv_dtype == KvDtype::model;
    if (p.preset == ModelPreset::kimi_linear_48b && published) {
        const double r1m = a.total_bytes(1048576) / a.baseline_bytes(1048576);
        r.check("kimi_linear_reference_figures", "Kimi-Linear reference figures (reference/kda.md §5)",
                a.state_bytes == 43417600 && a.kv_bytes_per_token == 8064 &&
                    std::fabs(r1m - 0.261) < 0.0005 && std::round(be) == 5384,
                "state " + format_grouped(double(a.state_bytes)) + " B (expect 43,417,600), KV " +
                    format_grouped(double(a.kv_bytes_per_token)) +
                    " B/token (expect 8,064), ratio at 1,048,576 " + format_sig(r1m, 4) +
                    " (expect 0.261), break-even " + format_number(std::round(be)) + " (expect 5,384)");
    }
    if (p.preset == ModelPreset::kimi_k3) kimi_k3_reference_check(p, m, r);
    if (p.preset == ModelPreset::qwen3_next_80b && published) {
        const double mib = double(a.state_bytes) / (1024.0 * 1024.0);
        r.check("qwen3_next_reference_figures", "Qwen3-Next reference figures (reference/serving.md §7)",
                std::fabs(mib - 73.7) < 0.05 && a.kv_bytes_per_token == 24576 && std::round(be) == 3144,
                "state " + format_sig(mib, 4) + " MiB (expect 73.7), KV " +
                    format_grouped(double(a.kv_bytes_per_token)) + " B/token (expect 24 KiB), one state = " +
                    format_number(std::round(be)) + " tokens of KV (expect 3,144)");
    }
}

void checks(const MemoryParams& p, const MemoryResult& m, Report& r) {
    const MemoryAccount& a = m.account;
    const MemoryRecount& n = m.recount;
    r.check("accounting_equals_tensor_recount",
            "The accounting equals a recount of every cache tensor, layer by layer",
            a.state_bytes == n.fixed_bytes && a.kv_bytes_per_token == n.per_token_bytes &&
                a.baseline_kv_bytes_per_token == n.baseline_per_token_bytes,
            "fixed state " + format_grouped(double(a.state_bytes)) + " B vs " +
                format_grouped(double(n.fixed_bytes)) + " B recounted; KV per token " +
                format_grouped(double(a.kv_bytes_per_token)) + " vs " +
                format_grouped(double(n.per_token_bytes)) + " B; all-attention " +
                format_grouped(double(a.baseline_kv_bytes_per_token)) + " vs " +
                format_grouped(double(n.baseline_per_token_bytes)) + " B; at " +
                format_grouped(double(p.context)) + " tokens " +
                format_grouped(a.total_bytes(double(p.context))) + " vs " +
                format_grouped(n.bytes(p.context)) + " B");
    const double be = a.state_equivalent_tokens();
    if (std::isfinite(be)) {
        const int64_t found = n.first_kv_at_least_state();
        r.check("break_even_matches_search",
                "The closed-form break-even is where a search over the recount finds KV reaching the state",
                double(found) == std::ceil(be),
                "closed form " + format_sig(be, 7) + " tokens (first whole context " +
                    format_number(std::ceil(be)) + "); bisection over the recounted bytes " +
                    format_number(double(found)));
    }
    const double xo = a.baseline_crossover_tokens();
    if (std::isfinite(xo)) {
        const int64_t found = n.first_hybrid_smaller();
        r.check("crossover_matches_search",
                "The closed-form crossover is where a search over the recount finds the hybrid smaller",
                double(found) == std::floor(xo) + 1,
                "closed form " + format_sig(xo, 7) + " tokens (first whole context above it " +
                    format_number(std::floor(xo) + 1) + "); bisection over the recounted bytes " +
                    format_number(double(found)));
    }
    reference_checks(p, m, r);
}

void notes(const MemoryParams& p, const MemoryResult& m, Report& r) {
    const ModelConfig& c = m.model;
    r.notes.push_back(c.name + ": " + std::to_string(m.account.linear_layers) + " " + c.linear_name + " + " +
                      std::to_string(m.account.attention_layers) + " attention layers.");
    if (c.attn_kind == AttnKind::mla)
        r.notes.push_back(
            "Attention cache assumes an absorbed-MLA latent cache (latent + rope elements per token per "
            "layer), as vLLM stores it; HF eager caching of decompressed K and V is much larger.");
    r.notes.push_back(
        p.tp > 1 ? "Per sequence on one of " + std::to_string(p.tp) +
                       " tensor-parallel GPUs: the linear layers' heads are split between the ranks, an MLA "
                       "latent is kept whole on every rank, GQA K/V heads are split."
                 : "Per sequence on one GPU (tensor parallelism 1); `tp` shows one rank's share.");
    if (m.custom_ignored)
        r.notes.push_back("Custom dimensions are set but ignored: they apply only with preset=custom.");
}

}  // namespace

void report_memory(const MemoryParams& p, const MemoryResult& m, Report& r) {
    scalars(p, m, r);
    plots(p, m, r);
    tables(p, m, r);
    checks(p, m, r);
    notes(p, m, r);
}

}  // namespace k3
