#include "core/experiments/boundaries_maps.h"

#include <algorithm>
#include <cmath>

#include "core/base/fmath.h"
#include "core/base/numfmt.h"
#include "core/boundaries/economics.h"
#include "core/boundaries/grid.h"
#include "core/cp/variants.h"
#include "core/cp/work.h"
#include "core/model/accounting.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

using namespace k3::boundaries;
using lifecycle::MigrationStrategy;

namespace {

constexpr double kMaxPrompt = 1048576;  // the longest prompt on the CP map (Kimi Linear's context)
constexpr int kMaxDraft = 16;

HeatMap heat(std::string name, std::string xl, std::string yl, std::string zl, std::vector<double> x,
             std::vector<double> y, bool log_x, bool log_y, double contour) {
    HeatMap h;
    h.name = std::move(name);
    h.x_label = std::move(xl);
    h.y_label = std::move(yl);
    h.z_label = std::move(zl);
    h.x = std::move(x);
    h.y = std::move(y);
    h.z.assign(h.x.size() * h.y.size(), NAN);  // NaN: no cell (drawn empty, null in JSON)
    h.log_x = log_x;
    h.log_y = log_y;
    h.contour = contour;
    return h;
}
double& at(HeatMap& h, size_t ix, size_t iy) { return h.z[iy * h.x.size() + ix]; }
double at(const HeatMap& h, size_t ix, size_t iy) { return h.z[iy * h.x.size() + ix]; }
std::vector<double> row(const HeatMap& h, size_t iy) {
    return {h.z.begin() + ptrdiff_t(iy * h.x.size()), h.z.begin() + ptrdiff_t((iy + 1) * h.x.size())};
}
std::vector<double> column(const HeatMap& h, size_t ix) {
    std::vector<double> v;
    for (size_t iy = 0; iy < h.y.size(); ++iy) v.push_back(at(h, ix, iy));
    return v;
}
std::string crossing(const HeatMap& h) {
    return has_both_signs(h.z, *h.contour) ? "the break-even contour crosses the map"
                                           : "the map does not reach its break-even (" +
                                                 format_number(*h.contour) + ") anywhere on the grid";
}
std::string tokens(double v) { return format_grouped(v) + " tokens"; }
std::string gbs(double bytes_per_s) { return format_sig(bytes_per_s / 1e9, 3) + " GB/s"; }
double log10_of(double x) { return log_f64(x) / log_f64(10.0); }
std::string wrong(int n) { return std::to_string(n) + (n == 1 ? " cell" : " cells") + " on the wrong side"; }

}  // namespace

// ---- 1. prefix caching with a checkpoint ----

Verdict prefix_map(Report& r, const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    HeatMap h =
        heat("1. Prefix caching with a checkpoint: net saving per cached token", "prefix length (tokens)",
             "reuse probability", "GPU-us saved per prefix token (estimate)",
             integer_log_axis(64, 262144, in.resolution), linear_axis(0, 1, in.resolution), true, false, 0);
    int mismatched = 0;
    for (size_t ix = 0; ix < h.x.size(); ++ix) {
        const PrefixCacheValue v = prefix_cache_value(c, hw, h.x[ix], in.residence_s, in.eff);
        for (size_t iy = 0; iy < h.y.size(); ++iy) at(h, ix, iy) = v.net(h.y[iy]) / h.x[ix] * 1e6;
        const double p = v.break_even_reuse();  // the closed form, against the cells of this column
        mismatched += line_agrees(
                          column(h, ix), h.y, 0, [&](double y) { return y - p; }, false)
                          .mismatches;
    }
    r.check(
        "Map 1: every cell lies on the side of the closed-form break-even reuse (KV rent + checkpoint) / "
        "saving",
        mismatched == 0, wrong(mismatched) + "; " + crossing(h));
    const double ck = checkpoint_cost(c, hw, in.residence_s, in.eff);
    const auto shortest = first_sign_change_int(
        [&](double P) { return prefix_cache_value(c, hw, P, in.residence_s, in.eff).net(1.0); }, 1, 1 << 24);
    const bool pays = shortest && shortest->pays_above;
    const double p_ctx = prefix_cache_value(c, hw, in.context, in.residence_s, in.eff).break_even_reuse();
    r.scalar("prefix_min_tokens", "Shortest prefix worth caching (surely reused)", "tokens",
             pays ? shortest->x : NAN, true)
        .help =
        "Below this the checkpoint's write and the memory rent of KV and state over the residence cost "
        "more than the prefill a hit saves (roofline estimate; null: no length up to 16 M tokens pays).";
    r.scalar("prefix_reuse_needed", "Reuse probability a prefix of the chosen context needs", "fraction",
             p_ctx, true)
        .help = "(KV rent + checkpoint) / prefill saved; above 1 caching it never pays.";
    r.scalar("checkpoint_cost_gpu_ms", "One checkpoint written and held for the residence", "GPU-ms",
             ck * 1e3);
    Verdict v{"Prefix caching with checkpoints", "", "", "", "prefix"};
    v.use = pays ? "the prefix is " + tokens(shortest->x) + " or longer and likely to be reused within " +
                       format_sig(in.residence_s, 3) + " s"
                 : "never at this residence: the rent outweighs the prefill at every length";
    v.dont = "prompts are unique or short, or entries stay long: one checkpoint held " +
             format_sig(in.residence_s, 3) + " s costs as much as " +
             tokens(std::floor(ck / recompute_seconds_per_token(c, hw, 0, in.eff))) + " of prefill";
    v.break_even = (pays ? tokens(shortest->x) + " at reuse 1; " : "no length pays; ") + "a prefix of " +
                   tokens(in.context) + " needs reuse >= " + format_sig(p_ctx, 3) +
                   (p_ctx > 1 ? " (never)" : "");
    r.heatmaps.push_back(std::move(h));
    return v;
}

// ---- 2. checkpoint interval ----

Verdict interval_map(Report& r, const BoundaryInputs& in, const Workload& w,
                     const std::vector<ReplayResult>& runs) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    const double n = double(std::max<size_t>(w.requests.size(), 1)), ctx = double(w.prompt_tokens()) / n;
    std::vector<double> xs;
    for (size_t i = 0; i + 1 < runs.size(); ++i) xs.push_back(runs[i].x);
    HeatMap h = heat("2. Checkpoint interval: does halving it (from 2 I to I) pay?",
                     "checkpoint interval I (tokens)", "residence of a checkpoint (s)",
                     "log10(recompute avoided / cost of the extra checkpoints) (estimate)", xs,
                     log_axis(0.1, 1000, in.resolution), true, true, 0);
    Table t{"Map 2: replays of the " + w.name + " workload (" + format_grouped(n) +
                " requests) through one instance's cache, interval policy, unbounded capacity",
            {"interval", "recomputed per request", "checkpoints per request", "state-usable hit",
             "cost per request at the chosen residence"},
            {},
            {"tokens", "tokens", "count", "fraction", "GPU-s"}};
    const double ck = checkpoint_cost(c, hw, in.residence_s, in.eff);
    const double tok = recompute_seconds_per_token(c, hw, ctx, in.eff);
    auto total = [&](size_t i) {
        return (double(runs[i].t.recomputed_tokens) * tok + double(runs[i].t.states_added) * ck) / n;
    };
    bool nested = !runs.empty();
    size_t best = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        const ReplayTotals& a = runs[i].t;
        t.rows.push_back({runs[i].x, double(a.recomputed_tokens) / n, double(a.states_added) / n,
                          a.token_hit_state(), total(i)});
        if (i + 1 < runs.size())
            nested = nested && a.recomputed_tokens <= runs[i + 1].t.recomputed_tokens &&
                     a.states_added >= runs[i + 1].t.states_added;
        if (total(i) < total(best)) best = i;
    }
    for (size_t ix = 0; ix < xs.size(); ++ix) {
        const ReplayTotals &fine = runs[ix].t, &coarse = runs[ix + 1].t;
        for (size_t iy = 0; iy < h.y.size(); ++iy) {
            const Densify x =
                densify(c, hw, double(coarse.recomputed_tokens - fine.recomputed_tokens) / n,
                        double(fine.states_added - coarse.states_added) / n, ctx, h.y[iy], in.eff);
            // No difference at all between the two intervals: no cell.
            at(h, ix, iy) = x.saved > 0 || x.cost > 0 ? log10_of(x.saved / x.cost) : NAN;
        }
    }
    r.check("Map 2: a finer nested interval never recomputes more and never writes fewer checkpoints", nested,
            "replays at intervals " + format_grouped(runs.empty() ? 0 : runs.front().x) + " .. " +
                format_grouped(runs.empty() ? 0 : runs.back().x) +
                " tokens, unbounded capacity (module 5's monotone case); " + crossing(h));
    r.tables.push_back(std::move(t));
    const double I = runs.empty() ? NAN : runs[best].x;
    r.scalar("best_interval", "Cheapest checkpoint interval at the chosen residence", "tokens", I, true)
        .help =
        "Least recompute + checkpoint cost per request over the replayed intervals: denser than this, "
        "halving the "
        "interval stops paying (roofline estimate on a synthetic workload).";
    r.scalar("best_interval_cost_gpu_ms", "Its cost per request (recompute + checkpoints)", "GPU-ms",
             runs.empty() ? NAN : total(best) * 1e3);
    Verdict v{"Dense checkpoint intervals", "", "", "", "checkpoints"};
    v.use = "checkpoints live briefly and requests resume mid-path or branch; at " +
            format_sig(in.residence_s, 3) + " s an interval of " + tokens(I) +
            " costs least on this workload";
    v.dont = "checkpoints are held long: each rents " + format_bytes(double(account_memory(c).state_bytes)) +
             " for its whole residence, while halving the interval saves about I / 2 tokens per resume";
    v.break_even = "cheapest interval " + tokens(I) + " at " + format_sig(in.residence_s, 3) + " s";
    r.heatmaps.push_back(std::move(h));
    return v;
}

// ---- 3. projection replay vs snapshots ----

Verdict replay_map(Report& r, const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    const double step = decode_step_cost(c, hw, in.batch, in.context, in.eff).seconds;
    std::vector<double> ns;
    for (int N = 1; N <= kMaxDraft; ++N) ns.push_back(N);
    HeatMap h = heat("3. Projection replay vs per-token snapshots: saving per kept token",
                     "tokens per verification N", "draft acceptance probability",
                     "GPU-us saved per kept token by replay (estimate)", ns, linear_axis(0, 1, in.resolution),
                     false, false, 0);
    int mismatched = 0;
    for (size_t iy = 0; iy < h.y.size(); ++iy) {
        for (size_t ix = 0; ix < ns.size(); ++ix) {
            const ReplayVsSnapshots x = replay_vs_snapshots(c, hw, int(ns[ix]), h.y[iy], step, in.eff);
            at(h, ix, iy) = x.net() / x.kept * 1e6;
        }
        auto net = [&](double N) { return replay_vs_snapshots(c, hw, int(N), h.y[iy], step, in.eff).net(); };
        mismatched += line_agrees(row(h, iy), ns, 0, net, false, true).mismatches;
    }
    r.check("Map 3: every row changes sign where the replay and snapshot costs cross", mismatched == 0,
            wrong(mismatched) + "; " + crossing(h));
    // Module 7's storage figures (Kimi-Linear, minimal exact records, N = 4) from the map's own accounting.
    const spec::SpecStorage ks =
        spec::spec_storage(*model_preset("kimi-linear-48b"), spec::RecordVariant::minimal_exact, 4, 1);
    const ReplayVsSnapshots k =
        replay_vs_snapshots(*model_preset("kimi-linear-48b"), hw, 4, 0.5, step, in.eff);
    r.check(
        "Map 3 holds module 7's storage: at Kimi-Linear dimensions and N = 4, 4.65:1 counting the confirmed "
        "state and 3.72:1 for N snapshots",
        k.snapshot_bytes == 20.0 * 10854400 && k.replay_bytes == 20.0 * 2335232 &&
            format_sig(ks.ratio_counting_confirmed, 3) == "4.65" &&
            format_sig(ks.ratio_n_snapshots, 3) == "3.72",
        "per request " + format_grouped(k.snapshot_bytes) + " B vs " + format_grouped(k.replay_bytes) +
            " B (reference/kda.md §6: 10,854,400 vs 2,335,232 B per layer, 20 layers): " +
            format_sig(ks.ratio_counting_confirmed, 4) + ":1 and " + format_sig(ks.ratio_n_snapshots, 4) +
            ":1");
    // Read-offs: the smallest N from which replay pays at every acceptance; the batch below which a
    // snapshot beats replay at N = 1 (a short step: holding a second state costs less than re-reading it).
    int from = kMaxDraft + 1;
    for (int N = kMaxDraft; N >= 1; --N) {
        bool all = true;
        for (size_t iy = 0; iy < h.y.size(); ++iy) all = all && at(h, size_t(N - 1), iy) >= 0;
        if (!all) break;
        from = N;
    }
    const auto batch_be = first_sign_change_int(
        [&](double b) {
            return replay_vs_snapshots(c, hw, 1, 0, decode_step_cost(c, hw, b, in.context, in.eff).seconds,
                                       in.eff)
                .net();
        },
        1, 4096);
    const bool found = from <= kMaxDraft;
    r.scalar("replay_min_draft", "Replay pays from this many tokens per verification", "tokens",
             found ? double(from) : NAN, true)
        .help = "At every acceptance on the map, at the chosen batch and context (null: not within N <= 16).";
    r.scalar("decode_step_ms", "Decode step the rollback storage is held for (estimate)", "ms", step * 1e3);
    Verdict v{"Projection replay instead of snapshots", "", "", "", "spec-storage"};
    v.use = found
                ? "verifying " + std::to_string(from) + " or more tokens per step at " +
                      format_grouped(in.batch) +
                      " running requests: snapshots write and hold N states where replay writes small records"
                : "not within N <= 16 at this batch";
    v.dont = batch_be && batch_be->pays_above
                 ? "N = 1 with fewer than " + format_grouped(batch_be->x) +
                       " running requests: the step is short, so re-reading and rewriting the state costs "
                       "more than "
                       "holding a second one"
                 : "one token per verification: the saving is under 2x and the replay re-reads the state";
    v.break_even = found ? "from N = " + std::to_string(from) + " at every acceptance" : "none on the map";
    r.heatmaps.push_back(std::move(h));
    return v;
}

// ---- 4. context parallelism ----

Verdict cp_map(Report& r, const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    std::vector<double> ranks;
    for (int R = 1; R <= 64; R *= 2) ranks.push_back(R);
    HeatMap h =
        heat("4. Context parallelism: speed-up of a prefill over one rank", "tokens per rank", "ranks R",
             "speed-up (estimate)", integer_log_axis(256, 262144, in.resolution), ranks, true, true, 1);
    Table t{"Map 4: the shortest slice at which R ranks beat one (" + in.cp_link.name + ")",
            {"ranks", "tokens per rank", "prompt", "speed-up at a 1 M-token prompt"},
            {},
            {"ranks", "tokens", "tokens", "ratio"}};
    bool one_rank = true;
    int mismatched = 0;
    double n8 = NAN;
    for (size_t iy = 0; iy < ranks.size(); ++iy) {
        const int R = int(ranks[iy]);
        for (size_t ix = 0; ix < h.x.size(); ++ix) {
            if (h.x[ix] * R > kMaxPrompt) continue;  // longer than any prompt on the map
            const CpPrefill x = cp_prefill(c, hw, in.cp_link, int(h.x[ix]), R, in.eff);
            at(h, ix, iy) = x.speedup();
            if (R == 1)
                one_rank = one_rank && x.speedup() == 1 &&
                           x.cp_s() == prefill_cost(c, hw, h.x[ix], 0, in.eff).seconds;
        }
        if (R == 1) continue;
        auto gain = [&](double n) { return cp_prefill(c, hw, in.cp_link, int(n), R, in.eff).speedup() - 1; };
        mismatched += line_agrees(row(h, iy), h.x, 1, gain, true, true).mismatches;
        // The read-off looks below and beyond the map's columns too.
        const auto be = first_sign_change_int(gain, 1, kMaxPrompt / R);
        const double from = be ? (be->pays_above ? be->x : NAN) : (gain(1) >= 0 ? 1.0 : NAN);
        if (R == 8) n8 = from;
        t.rows.push_back({double(R), from, from * R,
                          cp_prefill(c, hw, in.cp_link, int(kMaxPrompt / R), R, in.eff).speedup()});
    }
    r.check("Map 4: one rank is exactly the single-rank prefill (speed-up 1 in the R = 1 row)", one_rank,
            "cp_prefill with R = 1 against prefill_cost of the same tokens, every column");
    r.check("Map 4: every row changes sign where bisection on the speed-up puts the break-even",
            mismatched == 0, wrong(mismatched) + "; " + crossing(h));
    r.tables.push_back(std::move(t));
    r.scalar("cp_min_tokens_per_rank", "Context parallelism over 8 ranks pays from", "tokens", n8, true)
        .help =
        "Tokens per rank. Below this each rank is bound by streaming all the weights, as one rank would be, "
        "and the "
        "affine scan and the exchanges only add (roofline estimate; null: no slice up to a 1 M-token prompt "
        "pays).";
    const kda::Shape s{c.lin_heads, c.lin_v_heads, c.head_k, c.head_v};
    Verdict v{"Context parallelism of a prefill (affine scan)", "", "", "", "cp"};
    v.use = std::isnan(n8) ? "never up to a 1 M-token prompt"
                           : "slices of " + tokens(n8) + " or more per rank (8 ranks)";
    v.dont =
        "short prompts: every rank streams all the weights as one rank would, and the scan sends " +
        format_bytes(cp::map_bytes(cp::Variant::kda, s) * c.n_linear()) +
        " per round; long prompts gain less than R because the last rank's causal attention spans the whole "
        "prompt";
    v.break_even = std::isnan(n8) ? "none" : tokens(n8) + " per rank at R = 8";
    r.heatmaps.push_back(std::move(h));
    return v;
}

// ---- 5. migration vs recompute ----

Verdict migration_map(Report& r, const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    const double d = in.dest_checkpoint ? in.checkpoint_distance : -1;
    HeatMap h = heat("5. Moving a request vs recomputing it: log10(recompute time / best move time)",
                     "context (tokens)", "link bandwidth (B/s)", "log10 of the time ratio (estimate)",
                     integer_log_axis(256, 1048576, in.resolution), log_axis(1e8, 1e12, in.resolution), true,
                     true, 0);
    int mismatched = 0;
    bool monotone = true;
    for (size_t iy = 0; iy < h.y.size(); ++iy) {
        for (size_t ix = 0; ix < h.x.size(); ++ix) {
            at(h, ix, iy) = log10_of(move_vs_recompute(c, hw, h.y[iy], h.x[ix], d, in.eff).advantage());
            if (iy > 0) monotone = monotone && at(h, ix, iy) >= at(h, ix, iy - 1);
        }
        // Directly from core/lifecycle: recompute time over the faster move, minus 1.
        const Link l{"", "", h.y[iy]};
        auto direct = [&](double P) {
            const bool ck = d >= 0 && d < std::floor(P);
            const lifecycle::MigrationCosts m = lifecycle::migration_costs(
                c, {P, ck ? d : P}, l, hw, in.eff, lifecycle::RecomputeRegime::in_batch);
            double move = m[MigrationStrategy::move_all].total_s;
            if (ck) move = std::min(move, m[MigrationStrategy::move_kv].total_s);
            return m[MigrationStrategy::recompute].total_s / move - 1;
        };
        mismatched += line_agrees(row(h, iy), h.x, 0, direct, true, true).mismatches;
    }
    r.check("Map 5: every bandwidth row changes sign where lifecycle::migration_costs puts the break-even",
            mismatched == 0, wrong(mismatched) + "; " + crossing(h));
    r.check("Map 5: more bandwidth never makes moving worse", monotone,
            "every context column, bottom to top");
    // move_kv's own break-even distance against the strategies compared at the chosen context and link.
    const double dist = std::min(in.checkpoint_distance, in.context);
    const double be = lifecycle::move_kv_break_even_distance(c, in.context, in.link, hw, in.eff,
                                                             lifecycle::RecomputeRegime::in_batch);
    const lifecycle::MigrationCosts m = lifecycle::migration_costs(c, {in.context, dist}, in.link, hw, in.eff,
                                                                   lifecycle::RecomputeRegime::in_batch);
    const bool kv_wins = m[MigrationStrategy::move_kv].total_s <= m[MigrationStrategy::move_all].total_s;
    r.check(
        "Map 5: move_kv_break_even_distance agrees with the strategy costs at the chosen context and link",
        kv_wins == (dist <= be),
        "checkpoint " + tokens(dist) + " back, break-even distance " + tokens(be) + ": moving only the KV " +
            (kv_wins ? "wins" : "loses"));
    r.scalar("move_kv_break_even_distance", "Moving only the KV beats moving everything up to", "tokens", be)
        .help =
        "Checkpoint distance at the destination (chosen context and instance link, recompute inside running "
        "batches).";
    auto adv = [&](double bw, double P) {
        return move_vs_recompute(c, hw, bw, P, d, in.eff).advantage() - 1;
    };
    const auto bw = first_sign_change([&](double b) { return adv(b, in.context); }, 1e6, 1e13, true);
    const auto shortest =
        first_sign_change_int([&](double P) { return adv(in.link.bytes_per_s, P); }, 1, 1 << 24);
    const bool bw_ok = bw && bw->pays_above, short_ok = shortest && shortest->pays_above;
    r.scalar("migration_min_bandwidth", "Moving a request of the chosen context pays above", "GB/s",
             bw_ok ? bw->x / 1e9 : NAN, true)
        .help =
        "Link bandwidth above which sending the request (state and KV) is faster than recomputing it at the "
        "destination inside its running batches (estimate; line rate, no latency).";
    r.scalar("migration_min_context", "Over the instance link, moving pays from", "tokens",
             short_ok ? shortest->x : NAN);
    Verdict v{"Migrating a request instead of recomputing it", "", "", "", "migrate"};
    v.use = "links of " + (bw_ok ? gbs(bw->x) + " or more" : std::string("any speed")) + " for " +
            tokens(in.context) + "; over " + in.link.id + " from " +
            (short_ok ? tokens(shortest->x) : "no length");
    v.dont = "short requests on slow links: the " + format_bytes(double(account_memory(c).state_bytes)) +
             " state travels whatever the length, while recomputing a short context is cheap";
    v.break_even = (bw_ok ? gbs(bw->x) : std::string("none")) + " at " + tokens(in.context) + "; " +
                   (short_ok ? tokens(shortest->x) : std::string("none")) + " over " + in.link.id;
    r.heatmaps.push_back(std::move(h));
    return v;
}

// ---- 6. affinity vs least loaded ----

Verdict affinity_map(Report& r, const AffinitySweep& s) {
    const AffinitySweepConfig& c = s.config();
    HeatMap h =
        heat("6. Affinity vs least loaded: mean TTFT of least loaded / mean TTFT of affinity",
             "share of requests with a shared prefix", "load (arrivals / prefill capacity without reuse)",
             "TTFT ratio (simulated, estimate)", c.reuse, c.load, false, false, 1);
    Table t{"Map 6: the fleet runs (" + std::to_string(c.fleet.instances) + " instances, " +
                std::to_string(c.workload.requests) + " requests each)",
            {"reuse share", "load", "TTFT mean, least loaded", "TTFT mean, affinity", "ratio",
             "state hit, least loaded", "state hit, affinity"},
            {},
            {"fraction", "ratio", "ms", "ms", "ratio", "fraction", "fraction"}};
    bool same_without_reuse = true;
    for (size_t ix = 0; ix < c.reuse.size(); ++ix)
        for (size_t iy = 0; iy < c.load.size(); ++iy) {
            const RequestSummary a = s.summary(ix, iy, false), b = s.summary(ix, iy, true);
            at(h, ix, iy) = a.ttft_ms.mean / b.ttft_ms.mean;
            t.rows.push_back({c.reuse[ix], c.load[iy], a.ttft_ms.mean, b.ttft_ms.mean, at(h, ix, iy),
                              a.hit_state(), b.hit_state()});
            if (c.reuse[ix] == 0) {
                const auto &oa = s.run(ix, iy, false).outcomes(), &ob = s.run(ix, iy, true).outcomes();
                for (size_t i = 0; i < oa.size() && i < ob.size(); ++i)
                    same_without_reuse = same_without_reuse && oa[i].instance == ob[i].instance &&
                                         oa[i].first_token_ms == ob[i].first_token_ms;
            }
        }
    // Every run must account for every request and release its caches and pools (module 11's checks).
    size_t bad = 0;
    uint64_t failed = 0;
    std::string first;
    for (size_t i = 0; i < s.runs(); ++i) {
        Report scratch;
        report_fleet_checks(scratch, s.run(i));
        for (const Check& k : scratch.checks)
            if (!k.passed && bad++ == 0) first = k.name + ": " + k.detail;
        for (const RequestOutcome& o : s.run(i).outcomes()) failed += !o.completed;
    }
    r.check("Map 6: every fleet run completes every request, accounts for its work and releases its caches",
            bad == 0 && failed == 0,
            std::to_string(s.runs()) + " runs: " + std::to_string(bad) + " failed checks, " +
                format_grouped(double(failed)) + " requests not completed" +
                (first.empty() ? "" : "; first: " + first));
    if (!c.reuse.empty() && c.reuse[0] == 0)
        r.check("Map 6: with no shared prefix the affinity router routes exactly as least loaded",
                same_without_reuse,
                "instance and first-token time of every request, at every load of the reuse-0 column");
    r.tables.push_back(std::move(t));
    // Read-offs: how often and by how much affinity wins; the smallest reuse share where it wins at every
    // load.
    size_t wins = 0, lo = 0, hi = 0;
    for (size_t i = 0; i < h.z.size(); ++i) {
        wins += h.z[i] > 1;
        if (h.z[i] < h.z[lo]) lo = i;
        if (h.z[i] > h.z[hi]) hi = i;
    }
    double every = NAN;
    for (size_t ix = c.reuse.size(); ix-- > 0;) {
        bool all = true;
        for (size_t iy = 0; iy < c.load.size(); ++iy) all = all && at(h, ix, iy) > 1;
        if (!all) break;
        every = c.reuse[ix];
    }
    auto cell = [&](size_t i) {
        return "reuse " + format_sig(c.reuse[i % c.reuse.size()], 2) + ", load " +
               format_sig(c.load[i / c.reuse.size()], 2);
    };
    r.scalar("affinity_win_share", "Cells where affinity has the lower mean TTFT", "fraction",
             double(wins) / double(h.z.size()), true);
    r.scalar("affinity_best_ratio", "Best TTFT ratio (least loaded / affinity)", "ratio", h.z[hi]);
    r.scalar("affinity_worst_ratio", "Worst TTFT ratio (least loaded / affinity)", "ratio", h.z[lo]);
    r.scalar("affinity_min_reuse", "Affinity wins at every load from this reuse share", "fraction", every);
    r.scalar("fleet_capacity_per_s", "Prefill capacity of the fleet without reuse (load 1)", "requests/s",
             s.capacity_per_s());
    Verdict v{"Affinity routing instead of least loaded", "", "", "", "fleet"};
    const size_t losses = h.z.size() - wins - size_t(std::count(h.z.begin(), h.z.end(), 1.0));
    v.use = "requests share prefixes and caches are bounded: up to " + format_sig(h.z[hi], 3) +
            "x lower mean TTFT (" + cell(hi) + ")";
    v.dont = "prompts share nothing (it then routes as least loaded); it loses in " + std::to_string(losses) +
             " of " + std::to_string(h.z.size()) + " cells, down to " + format_sig(h.z[lo], 3) + "x (" +
             cell(lo) + "): a prefix's requests queue on one instance while others have room";
    v.break_even = std::isnan(every)
                       ? "wins in " + std::to_string(wins) + " of " + std::to_string(h.z.size()) + " cells"
                       : "wins at every load from reuse " + format_sig(every, 2) + " (" +
                             std::to_string(wins) + " of " + std::to_string(h.z.size()) + " cells)";
    r.heatmaps.push_back(std::move(h));
    return v;
}

void verdict_table(Report& r, const std::vector<Verdict>& rows) {
    Table t{"Verdict: when to use each method and when not (this model and hardware, roofline estimates)",
            {"method", "use when", "don't use when", "break-even here", "module"},
            {},
            {}};
    for (const Verdict& v : rows) t.rows.push_back({v.method, v.use, v.dont, v.break_even, v.module});
    r.tables.insert(r.tables.begin(), std::move(t));
}

}  // namespace k3
