#include "core/modules/shared/runnable_cost.h"

#include <algorithm>

#include "core/base/numfmt.h"

namespace k3 {

namespace {

// Per-token costs of k3-tiny (the default runnable model), native build, measured with
// `/usr/bin/time -f '%U %S'` on `k3cli run prefix workload=system requests=1 user_tokens=1` at
// shared_tokens 16 ... 2,048 with gen 1 and 64 (six passes over one prompt), and `k3cli run migrate`
// at prompt 1 ... 2,048 and after 1 ... 512; CPU time on a loaded 2-core machine. Each is doubled
// (kRunnableMargin) for a slower machine.
constexpr double kInstanceSeconds = 0.2;     // seeded weights generated, per model made
constexpr double kPrefillSeconds = 0.45e-3;  // per token in a batched call (compute bound)
constexpr double kDecodeSeconds = 2.1e-3;    // per token fed alone (every weight streamed once)
constexpr double kPairSeconds = 0.5e-6;      // per attention pair: 0.46 us fitted on prefill, 0.6 on decode
constexpr double kRunnableMargin = 2;

// Weights a token passes through (MLP, projections, embedding and head), the measure the costs above
// scale with for the other runnable models (small: 5.3 x k3-tiny; `k3cli run ring model=small` took
// 4.5 x the default's time).
double weights_per_token(const ModelConfig& c) {
    const double d = c.d_model;
    return c.n_layers() * (3.0 * d * c.mlp_hidden + 4.0 * d * d) + 2.0 * c.vocab * d;
}

double scale_of(const ModelConfig& c) {
    static const double k3_tiny = weights_per_token(default_runnable_config());
    return weights_per_token(c) / k3_tiny;
}

}  // namespace

void ForwardWork::add_prefill(double tokens, double context, double times) {
    prefill += times * tokens;
    pairs += times * tokens * (context + tokens / 2);
    widest = std::max(widest, tokens * (context + tokens));
}

void ForwardWork::add_decode(double tokens, double context, double times) {
    decode += times * tokens;
    pairs += times * tokens * (context + tokens / 2);
    widest = std::max(widest, context + tokens);
}

double forward_seconds(const ForwardWork& w, const ModelConfig& c) {
    const double per_model = w.prefill * kPrefillSeconds + w.decode * kDecodeSeconds + w.pairs * kPairSeconds;
    return kRunnableMargin * (w.instances * kInstanceSeconds * scale_of(c) + per_model * scale_of(c));
}

// The process and its tables, fp32 weights per model, and the widest call's attention scores and
// probabilities (fp32, per attention head). `k3cli run migrate prompt=2048` held 134 MiB of this
// bound's 220 MiB.
double forward_bytes(const ForwardWork& w, const ModelConfig& c) {
    constexpr double kProcessBytes = 24.0 * 1024 * 1024;
    return kProcessBytes + w.instances * 4.0 * weights_per_token(c) + w.widest * 8.0 * c.attn_heads;
}

std::string forward_counted(const ForwardWork& w, const ModelConfig& c) {
    auto count = [](double v) { return v < 1000 ? format_grouped(v) : format_si(v); };
    return count(w.prefill) + " prefill + " + count(w.decode) + " decode tokens on " + c.id;
}

}  // namespace k3
