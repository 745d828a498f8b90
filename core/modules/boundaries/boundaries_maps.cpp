#include "core/modules/boundaries/boundaries_maps.h"

#include <algorithm>
#include <cmath>

#include "core/base/fmath.h"
#include "core/boundaries/economics.h"
#include "core/boundaries/grid.h"
#include "core/cp/variants.h"
#include "core/cp/work.h"
#include "core/fleet/fleet_metrics.h"
#include "core/model/accounting.h"
#include "core/modules/boundaries/boundaries_ledger.h"
#include "core/modules/boundaries/boundaries_serving_maps.h"
#include "core/modules/shared/fleet_report.h"
#include "core/spec/storage.h"

namespace k3 {

using namespace k3::boundaries;

namespace {

constexpr double kMaxPrompt = 1048576;  // the longest prompt on the CP map (Kimi Linear's context)
constexpr int kMaxDraft = 16;
// Cells and their second count take different paths through floating point; beyond this (relative to
// the terms netted) they disagree.
constexpr double kLedgerTolerance = 1e-9;

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
// The cell a falsifier damages: the middle of an axis.
double log10_of(double x) { return log_f64(x) / log_f64(10.0); }
// The boundary of a sign change that pays above it, if there is one.
std::optional<double> pays_above(const std::optional<SignChange>& c) {
    return c && c->pays_above ? std::optional<double>(c->x) : std::nullopt;
}

}  // namespace

// ---- 1. prefix caching with a checkpoint ----

PrefixMap prefix_map(const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    PrefixMap m;
    HeatMap& h = m.heat =
        heat("1. Prefix caching with a checkpoint: net saving per cached token", "prefix length (tokens)",
             "reuse probability", "GPU-us saved per prefix token (estimate)",
             integer_log_axis(64, 262144, in.resolution), linear_axis(0, 1, in.resolution), true, false, 0);
    for (size_t ix = 0; ix < h.x.size(); ++ix) {
        const PrefixCacheValue v = prefix_cache_value(c, hw, h.x[ix], in.residence_s, in.eff);
        for (size_t iy = 0; iy < h.y.size(); ++iy) {
            PrefixCacheValue cell = v;
            if (in.falsify == BoundariesFalsify::prefix_cell && is_middle(ix, h.x) && is_middle(iy, h.y))
                cell.checkpoint = 0;
            at(h, ix, iy) = cell.net(h.y[iy]) / h.x[ix] * 1e6;
        }
    }
    m.ledger = agree(
        h, [&](double P, double p) { return prefix_ledger(in, P, p); }, kLedgerTolerance);
    m.checkpoint_s = checkpoint_cost(c, hw, in.residence_s, in.eff);
    m.checkpoint_tokens = std::floor(m.checkpoint_s / recompute_seconds_per_token(c, hw, 0, in.eff));
    m.shortest = pays_above(first_sign_change_int(
        [&](double P) { return prefix_cache_value(c, hw, P, in.residence_s, in.eff).net(1.0); }, 1, 1 << 24));
    m.reuse_needed = prefix_cache_value(c, hw, in.context, in.residence_s, in.eff).break_even_reuse();
    return m;
}

// ---- 2. checkpoint interval ----

namespace {

// Map 2's title and x axis: a free interval (the idealised placement) or the engine's setting.
std::pair<std::string, std::string> interval_axis(CacheEngine e) {
    if (e == CacheEngine::sglang)
        return {"2. SGLang's chunked prefill: does halving it (from 2 C to C) pay?",
                "chunked_prefill_tokens C (tokens; SGLang tracks one state per extend)"};
    if (e == CacheEngine::vllm)
        return {"2. vLLM's block: does halving it (from 2 B to B) pay?",
                "block B (tokens; vLLM keeps states where chunks end on a block boundary)"};
    return {"2. Checkpoint interval: does halving it (from 2 I to I) pay?", "checkpoint interval I (tokens)"};
}

// Per request: the recompute of the replay's tokens and its states written and held for the residence.
double spacing_cost(const BoundaryInputs& in, const ReplayTotals& t, double requests, double context) {
    const double ck = checkpoint_cost(in.model, in.hardware, in.residence_s, in.eff);
    const double tok = recompute_seconds_per_token(in.model, in.hardware, context, in.eff);
    return (double(t.recomputed_tokens) * tok + double(t.states_added) * ck) / requests;
}

}  // namespace

IntervalMap interval_map(const BoundaryInputs& in, const Workload& w, const std::vector<ReplayResult>& runs) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    IntervalMap m;
    const double n = double(std::max<size_t>(w.requests.size(), 1)), ctx = double(w.prompt_tokens()) / n;
    m.workload = w.name;
    m.requests = n;
    m.state_bytes = double(account_memory(c).state_bytes);
    m.engine = in.engine;
    std::vector<double> xs;
    for (size_t i = 0; i + 1 < runs.size(); ++i) xs.push_back(runs[i].x);
    const auto [title, x_label] = interval_axis(in.engine);
    HeatMap& h = m.heat = heat(title, x_label, "residence of a checkpoint (s)",
                               "log10(recompute avoided / cost of the extra checkpoints) (estimate)", xs,
                               log_axis(0.1, 1000, in.resolution), true, true, 0);
    auto total = [&](size_t i) { return spacing_cost(in, runs[i].t, n, ctx); };
    m.nested = !runs.empty();
    size_t best = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        const ReplayTotals& a = runs[i].t;
        m.rows.push_back({runs[i].x, double(a.recomputed_tokens) / n, double(a.states_added) / n,
                          a.token_hit_state(), total(i)});
        if (i + 1 < runs.size())
            m.nested = m.nested && a.recomputed_tokens <= runs[i + 1].t.recomputed_tokens &&
                       a.states_added >= runs[i + 1].t.states_added;
        if (total(i) < total(best)) best = i;
    }
    for (size_t ix = 0; ix < xs.size(); ++ix) {
        const ReplayTotals &fine = runs[ix].t, &coarse = runs[ix + 1].t;
        for (size_t iy = 0; iy < h.y.size(); ++iy) {
            // Signed: under an engine the finer setting may hold fewer states or recompute more.
            const Densify x =
                densify(c, hw, (double(coarse.recomputed_tokens) - double(fine.recomputed_tokens)) / n,
                        (double(fine.states_added) - double(coarse.states_added)) / n, ctx, h.y[iy], in.eff);
            // No difference at all between the two intervals: no cell.
            at(h, ix, iy) = x.saved > 0 || x.cost > 0 ? log10_of(x.saved / x.cost) : NAN;
        }
    }
    m.best_interval = runs.empty() ? NAN : runs[best].x;
    m.best_cost_s = runs.empty() ? NAN : total(best);
    return m;
}

IntervalMap engine_spacing_map(const BoundaryInputs& in, const Workload& w,
                               const std::vector<EngineSpacingRun>& runs, size_t axis_runs,
                               uint32_t setting) {
    std::vector<ReplayResult> axis;
    std::optional<ReplayTotals> at_setting;
    for (size_t i = 0; i < runs.size(); ++i) {
        const EngineSpacingRun& r = runs[i];
        ReplayResult x;
        x.x = r.spacing;
        x.t.requests = r.requests;
        x.t.prompt_tokens = r.prompt_tokens;
        x.t.state_hit_tokens = r.state_hit_tokens;
        x.t.recomputed_tokens = r.recomputed_tokens;
        x.t.states_added = r.states_held;
        if (r.spacing == setting && !at_setting) at_setting = x.t;
        if (i < axis_runs) axis.push_back(x);
    }
    IntervalMap m = interval_map(in, w, axis);
    m.engine_runs = runs.size();
    for (const EngineSpacingRun& r : runs) {
        m.off_setting += r.off_setting;
        if (m.first_broken.empty() && !r.invariants.empty())
            m.first_broken = std::to_string(r.spacing) + " tokens: " + r.invariants;
    }
    m.setting = setting;
    const double n = double(std::max<size_t>(w.requests.size(), 1)), ctx = double(w.prompt_tokens()) / n;
    m.setting_cost_s = at_setting ? spacing_cost(in, *at_setting, n, ctx) : NAN;
    return m;
}

// ---- 3. projection replay vs snapshots ----

namespace {

// One cell of map 3: N tokens per verification (module 7's replay) or N draft tokens (RecoverSSM).
ReplayVsSnapshots replay_cell(const BoundaryInputs& in, int N, double accept, double step_s, bool damaged) {
    using spec::RecordVariant;
    if (in.variant == RecordVariant::recoverssm)
        return recoverssm_vs_snapshots(in.model, in.hardware, N + (damaged ? 1 : 0), accept, step_s, in.align,
                                       in.eff);
    const RecordVariant v = damaged ? RecordVariant::core_only : RecordVariant::minimal_exact;
    return replay_vs_snapshots(in.model, in.hardware, N, accept, step_s, in.eff, v);
}

// Kimi-K3's RecoverSSM storage at N = 7 (reference/kimi_k3.md §3.3), from the map's accounting.
void k3_recoverssm_storage(const BoundaryInputs& in, double step_s, ReplayMap& m) {
    const ModelConfig k3 = *model_preset("kimi-k3");
    const int n = in.falsify == BoundariesFalsify::recoverssm_k3_window ? 8 : 7;
    const double L = double(k3.n_linear());
    const ReplayVsSnapshots none = recoverssm_vs_snapshots(k3, in.hardware, n, 0.5, step_s, false, in.eff);
    const ReplayVsSnapshots align = recoverssm_vs_snapshots(k3, in.hardware, n, 0.5, step_s, true, in.eff);
    m.k3_snapshot_none = none.snapshot_bytes / L;
    m.k3_recoverssm_none = none.replay_bytes / L;
    m.k3_snapshot_align = align.snapshot_bytes / L;
    m.k3_recoverssm_align = align.replay_bytes / L;
    m.k3_record_per_head =
        double(spec::record_bytes_per_token_per_layer(k3, spec::RecordVariant::recoverssm)) / k3.lin_v_heads;
}

}  // namespace

ReplayMap replay_map(const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    ReplayMap m;
    m.recoverssm = in.variant == spec::RecordVariant::recoverssm;
    m.step_s = decode_step_cost(c, hw, in.batch, in.context, in.eff).seconds;
    const double step = m.step_s;
    std::vector<double> ns;
    for (int N = 1; N <= kMaxDraft; ++N) ns.push_back(N);
    HeatMap& h = m.heat = m.recoverssm
                              ? heat("3. RecoverSSM vs per-token snapshots (vLLM): saving per kept token",
                                     "draft tokens N (1 + N verified)", "draft acceptance probability",
                                     "GPU-us saved per kept token by RecoverSSM (estimate)", ns,
                                     linear_axis(0, 1, in.resolution), false, false, 0)
                              : heat("3. Projection replay vs per-token snapshots: saving per kept token",
                                     "tokens per verification N", "draft acceptance probability",
                                     "GPU-us saved per kept token by replay (estimate)", ns,
                                     linear_axis(0, 1, in.resolution), false, false, 0);
    using spec::RecordVariant;
    for (size_t iy = 0; iy < h.y.size(); ++iy) {
        const bool damaged =
            is_middle(iy, h.y) && (in.falsify == (m.recoverssm ? BoundariesFalsify::recoverssm_row_window
                                                               : BoundariesFalsify::replay_row_records));
        for (size_t ix = 0; ix < ns.size(); ++ix) {
            const ReplayVsSnapshots x = replay_cell(in, int(ns[ix]), h.y[iy], step, damaged);
            at(h, ix, iy) = x.net() / x.kept * 1e6;
        }
    }
    k3_recoverssm_storage(in, step, m);
    m.ledger = agree(
        h, [&](double N, double a) { return replay_ledger(in, int(N), a); }, kLedgerTolerance);
    // Module 7's storage figures (Kimi-Linear, minimal exact records, N = 4) from the map's own accounting.
    const ModelConfig kimi = *model_preset("kimi-linear-48b");
    const RecordVariant kimi_records = in.falsify == BoundariesFalsify::module7_record_size
                                           ? RecordVariant::core_only
                                           : RecordVariant::minimal_exact;
    const spec::SpecStorage ks = spec::spec_storage(kimi, kimi_records, 4, 1);
    const ReplayVsSnapshots k = replay_vs_snapshots(kimi, hw, 4, 0.5, step, in.eff, kimi_records);
    m.snapshot_bytes = k.snapshot_bytes;
    m.replay_bytes = k.replay_bytes;
    m.ratio_counting_confirmed = ks.ratio_counting_confirmed;
    m.ratio_n_snapshots = ks.ratio_n_snapshots;
    // Read-offs: the smallest N from which replay pays at every acceptance; the batch below which a
    // snapshot beats replay at N = 1 (a short step: holding a second state costs less than re-reading it).
    int from = kMaxDraft + 1;
    for (int N = kMaxDraft; N >= 1; --N) {
        bool all = true;
        for (size_t iy = 0; iy < h.y.size(); ++iy) all = all && at(h, size_t(N - 1), iy) >= 0;
        if (!all) break;
        from = N;
    }
    if (from <= kMaxDraft) m.pays_from = from;
    m.snapshot_below_batch = pays_above(first_sign_change_int(
        [&](double b) {
            return replay_cell(in, 1, 0, decode_step_cost(c, hw, b, in.context, in.eff).seconds, false).net();
        },
        1, 4096));
    return m;
}

// ---- 4. context parallelism ----

CpMap cp_map(const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    CpMap m;
    std::vector<double> ranks;
    for (int R = 1; R <= 64; R *= 2) ranks.push_back(R);
    HeatMap& h = m.heat =
        heat("4. Context parallelism: speed-up of a prefill over one rank", "tokens per rank", "ranks R",
             "speed-up (estimate)", integer_log_axis(256, 262144, in.resolution), ranks, true, true, 1);
    m.tokens_per_rank_at_8 = NAN;
    Link link = in.cp_link;
    if (in.falsify == BoundariesFalsify::cp_link) link.bytes_per_s *= 2;
    for (size_t iy = 0; iy < ranks.size(); ++iy) {
        const int R = int(ranks[iy]);
        for (size_t ix = 0; ix < h.x.size(); ++ix) {
            if (h.x[ix] * R > kMaxPrompt) continue;  // longer than any prompt on the map
            at(h, ix, iy) = cp_prefill(c, hw, link, int(h.x[ix]), R, in.eff).speedup();
        }
        if (R == 1) continue;
        auto gain = [&](double n) { return cp_prefill(c, hw, link, int(n), R, in.eff).speedup() - 1; };
        // The read-off looks below and beyond the map's columns too.
        const auto be = first_sign_change_int(gain, 1, kMaxPrompt / R);
        const double from = be ? (be->pays_above ? be->x : NAN) : (gain(1) >= 0 ? 1.0 : NAN);
        if (R == 8) m.tokens_per_rank_at_8 = from;
        m.rows.push_back(
            {double(R), from, from * R, cp_prefill(c, hw, link, int(kMaxPrompt / R), R, in.eff).speedup()});
    }
    m.ledger = agree(
        h, [&](double n, double R) { return cp_ledger(in, n, int(R)); }, kLedgerTolerance);
    const kda::Shape s{c.lin_heads, c.lin_v_heads, c.head_k, c.head_v};
    m.map_bytes_per_round = cp::map_bytes(cp::Variant::kda, s) * c.n_linear();
    return m;
}

// ---- 5. migration vs recompute ----

MigrationMap migration_map(const BoundaryInputs& in) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    MigrationMap m;
    const double d = in.dest_checkpoint ? in.checkpoint_distance : -1;
    HeatMap& h = m.heat = heat(
        "5. Moving a request vs recomputing it: log10(recompute time / best move time)", "context (tokens)",
        "link bandwidth (B/s)", "log10 of the time ratio (estimate)",
        integer_log_axis(256, 1048576, in.resolution), log_axis(1e8, 1e12, in.resolution), true, true, 0);
    for (size_t iy = 0; iy < h.y.size(); ++iy) {
        const bool wrong_bandwidth =
            in.falsify == BoundariesFalsify::migration_row_bandwidth && is_middle(iy, h.y);
        const double bandwidth = wrong_bandwidth ? 2 * h.y[iy] : h.y[iy];
        for (size_t ix = 0; ix < h.x.size(); ++ix)
            at(h, ix, iy) = log10_of(move_vs_recompute(c, hw, bandwidth, h.x[ix], d, in.eff).advantage());
    }
    const BlobSizes blobs = measure_blob_sizes(c);
    m.ledger = agree(
        h, [&](double P, double bw) { return migration_ledger(in, blobs, bw, P); }, kLedgerTolerance);
    // move_kv's own break-even distance, searched by core/lifecycle and solved in closed form.
    Link search_link = in.link;
    if (in.falsify == BoundariesFalsify::move_kv_link) search_link.bytes_per_s *= 2;
    m.break_even_distance = lifecycle::move_kv_break_even_distance(c, in.context, search_link, hw, in.eff,
                                                                   lifecycle::RecomputeRegime::in_batch);
    m.closed_form_distance = move_kv_break_even_closed_form(in, blobs);
    auto advantage = [&](double bw, double P) {
        return move_vs_recompute(c, hw, bw, P, d, in.eff).advantage() - 1;
    };
    m.min_bandwidth =
        pays_above(first_sign_change([&](double b) { return advantage(b, in.context); }, 1e6, 1e13, true));
    m.min_context = pays_above(
        first_sign_change_int([&](double P) { return advantage(in.link.bytes_per_s, P); }, 1, 1 << 24));
    m.state_bytes = double(account_memory(c).state_bytes);
    return m;
}

// ---- 6. affinity vs least loaded ----

namespace {

// Every run must account for every request and release its caches and pools (module 11's checks), and
// its records, as this map reads them, must hold one completed record per request of its workload.
void audit_runs(const AffinitySweep& s, const FleetRecords& records, AffinityMap& m) {
    const FleetRunsAudit a = audit_fleet_runs(s);
    m.runs = a.runs;
    m.failed_checks = a.failed_checks;
    m.first_failure = a.first_failure;
    for (size_t ix = 0; ix < records.size(); ++ix)
        for (size_t iy = 0; iy < records[ix].size(); ++iy)
            for (size_t aff = 0; aff < 2; ++aff) {
                const std::vector<RequestOutcome>& v = records[ix][iy][aff];
                const size_t requests = s.run(ix, iy, aff == 1).workload().requests.size();
                m.missing += v.size() > requests ? v.size() - requests : requests - v.size();
                for (const RequestOutcome& o : v) m.incomplete += !o.completed;
            }
}

}  // namespace

FleetRecords fleet_records(const AffinitySweep& s) {
    const AffinitySweepConfig& c = s.affinity_config();
    FleetRecords r(c.reuse.size(), std::vector<std::array<std::vector<RequestOutcome>, 2>>(c.load.size()));
    for (size_t ix = 0; ix < c.reuse.size(); ++ix)
        for (size_t iy = 0; iy < c.load.size(); ++iy)
            for (size_t aff = 0; aff < 2; ++aff) r[ix][iy][aff] = s.run(ix, iy, aff == 1).outcomes();
    return r;
}

AffinityMap affinity_map(const AffinitySweep& s, const FleetRecords& records) {
    const AffinitySweepConfig& c = s.affinity_config();
    AffinityMap m;
    m.instances = c.fleet.instances;
    m.requests = c.workload.requests;
    m.capacity_per_s = s.capacity_per_s();
    HeatMap& h = m.heat =
        heat("6. Affinity vs least loaded: mean TTFT of least loaded / mean TTFT of affinity",
             "share of requests with a shared prefix", "load (arrivals / prefill capacity without reuse)",
             "TTFT ratio (simulated, estimate)", c.reuse, c.load, false, false, 1);
    for (size_t ix = 0; ix < c.reuse.size(); ++ix)
        for (size_t iy = 0; iy < c.load.size(); ++iy) {
            const auto &oa = records[ix][iy][0], &ob = records[ix][iy][1];
            const RequestSummary a = summarize_requests(oa), b = summarize_requests(ob);
            at(h, ix, iy) = a.ttft_ms.mean / b.ttft_ms.mean;
            m.rows.push_back({c.reuse[ix], c.load[iy], a.ttft_ms.mean, b.ttft_ms.mean, at(h, ix, iy),
                              a.hit_state(), b.hit_state()});
            if (c.reuse[ix] == 0)
                for (size_t i = 0; i < oa.size() && i < ob.size(); ++i)
                    m.same_without_reuse = m.same_without_reuse && oa[i].instance == ob[i].instance &&
                                           oa[i].first_token_ms == ob[i].first_token_ms;
        }
    audit_runs(s, records, m);
    m.has_no_reuse_column = !c.reuse.empty() && c.reuse[0] == 0;
    // Read-offs: how often and by how much affinity wins; the smallest reuse share where it wins at every
    // load.
    for (size_t i = 0; i < h.z.size(); ++i) {
        m.wins += h.z[i] > 1;
        if (h.z[i] < h.z[m.worst]) m.worst = i;
        if (h.z[i] > h.z[m.best]) m.best = i;
    }
    m.wins_everywhere_from = wins_everywhere_from(c.reuse, h.z, 1);
    return m;
}

}  // namespace k3
