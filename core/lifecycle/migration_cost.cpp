#include "core/lifecycle/migration_cost.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/lifecycle/blob_layout.h"
#include "core/model/accounting.h"

namespace k3::lifecycle {

const char* strategy_id(MigrationStrategy s) {
    switch (s) {
        case MigrationStrategy::move_all: return "move_all";
        case MigrationStrategy::move_kv: return "move_kv";
        case MigrationStrategy::recompute: return "recompute";
    }
    return "?";
}

const char* strategy_title(MigrationStrategy s) {
    switch (s) {
        case MigrationStrategy::move_all: return "move everything";
        case MigrationStrategy::move_kv: return "move KV, recompute state from checkpoint";
        case MigrationStrategy::recompute: return "recompute everything";
    }
    return "?";
}

MigrationStrategy MigrationCosts::fastest() const {
    size_t best = 0;
    for (size_t i = 1; i < by.size(); ++i)
        if (by[i].total_s < by[best].total_s ||
            (by[i].total_s == by[best].total_s && by[i].bytes < by[best].bytes))
            best = i;
    return by[best].strategy;
}

namespace {

// Seconds and FLOPs of recomputing `tokens` tokens after `cached` ones.
struct Recompute {
    double seconds = 0, flops = 0;
};
using RecomputeFn = std::function<Recompute(double tokens, double cached)>;

MigrationCosts costs(const ModelConfig& cfg, const MigrationCase& mc, double link_bytes_per_s,
                     const RecomputeFn& recompute) {
    // The blob's size is the format's (blob_layout.h); the state and KV in it are the accounting's.
    const BlobLayout l = BlobLayout::of(cfg);
    const MemoryAccount a = account_memory(cfg);
    const double P = std::max(0.0, std::floor(mc.context));
    const double d = std::clamp(std::floor(mc.checkpoint_distance), 0.0, P);
    const double ids = P + 1;  // the blob carries the pending (sampled, not yet fed) token too
    const double state = double(a.state_bytes);
    const double kv_row = double(a.kv_bytes_per_token);
    MigrationCosts out;
    auto fill = [&](MigrationStrategy s, uint32_t contents, double kv_tokens, double re_tokens) {
        StrategyCost& c = out.by[size_t(s)];
        c.strategy = s;
        c.bytes = double(blob_bytes(l, uint64_t(kv_tokens), uint64_t(ids), contents));
        c.state_bytes = (contents & kBlobRecurrent) ? state : 0;
        c.kv_bytes = (contents & kBlobKv) ? kv_row * kv_tokens : 0;
        c.kv_tokens = (contents & kBlobKv) ? kv_tokens : 0;
        c.recompute_tokens = re_tokens;
        if (re_tokens > 0) {
            const Recompute r = recompute(re_tokens, P - re_tokens);
            c.recompute_s = r.seconds;
            c.recompute_flops = r.flops;
        }
        c.transfer_s = c.bytes / link_bytes_per_s;
        c.total_s = c.transfer_s + c.recompute_s;
    };
    fill(MigrationStrategy::move_all, kBlobAll, P, 0);
    fill(MigrationStrategy::move_kv, kBlobKv | kBlobTokens | kBlobSampler, P - d, d);
    fill(MigrationStrategy::recompute, kBlobTokens | kBlobSampler, 0, P);
    return out;
}

}  // namespace

MigrationCosts migration_costs(const ModelConfig& cfg, const MigrationCase& mc, const Link& link,
                               const Hardware& hw, const Efficiency& eff, RecomputeRegime regime) {
    return costs(cfg, mc, link.bytes_per_s, [&](double tokens, double cached) {
        const WorkCost w = regime == RecomputeRegime::in_batch
                               ? prefill_cost_in_batch(cfg, hw, tokens, cached, eff)
                               : prefill_cost(cfg, hw, tokens, cached, eff);
        return Recompute{w.seconds, w.flops};
    });
}

MigrationCosts migration_costs_measured(const ModelConfig& cfg, const MigrationCase& mc,
                                        double link_bytes_per_s, double prefill_tokens_per_s) {
    return costs(cfg, mc, link_bytes_per_s, [&](double tokens, double cached) {
        return Recompute{tokens / prefill_tokens_per_s, tokens * flops_per_token(cfg, cached + tokens / 2)};
    });
}

double move_kv_break_even_distance(const ModelConfig& cfg, double context, const Link& link,
                                   const Hardware& hw, const Efficiency& eff, RecomputeRegime regime) {
    const double P = std::max(0.0, std::floor(context));
    auto kv_wins = [&](double d) {
        const MigrationCosts c = migration_costs(cfg, {P, d}, link, hw, eff, regime);
        return c[MigrationStrategy::move_kv].total_s <= c[MigrationStrategy::move_all].total_s;
    };
    // Exponential search for the first losing distance, then bisection between the last win and it
    // (move_kv's total is not monotone in d everywhere: alone, the weight-streaming floor of the recompute
    // is paid in full from the first token).
    if (!kv_wins(0)) return 0;
    double lo = 0, hi = 1;  // kv_wins(lo)
    while (hi < P && kv_wins(hi)) lo = hi, hi *= 2;
    if (hi >= P) {
        if (kv_wins(P)) return P;
        hi = P;
    }
    while (hi - lo > 1) {  // kv_wins(lo), !kv_wins(hi)
        const double mid = std::floor((lo + hi) / 2);
        (kv_wins(mid) ? lo : hi) = mid;
    }
    return lo;
}

}  // namespace k3::lifecycle
