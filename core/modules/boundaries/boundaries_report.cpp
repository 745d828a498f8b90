// Module 14 `boundaries`: each map's checks, read-offs, tables and heat map, the verdict table built
// from the read-offs, notes.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/boundaries/grid.h"
#include "core/modules/boundaries/boundaries.h"

namespace k3 {

namespace {

using Verdict = BoundaryVerdict;

std::string crossing(const HeatMap& h) {
    return boundaries::has_both_signs(h.z, *h.contour)
               ? "the break-even contour crosses the map"
               : "the map does not reach its break-even (" + format_number(*h.contour) +
                     ") anywhere on the grid";
}
std::string tokens(double v) { return format_grouped(v) + " tokens"; }
std::string gbs(double bytes_per_s) { return format_sig(bytes_per_s / 1e9, 3) + " GB/s"; }
std::string agreement(const LedgerAgreement& a) {
    return std::to_string(a.mismatches) + " of " + std::to_string(a.cells) +
           " cells differ from the recount by more than " + format_number(a.tolerance) +
           " of their terms (largest difference " + format_sig(a.worst, 2) + ")";
}
std::string seconds(double s) { return format_sig(s, 3) + " s"; }

Verdict prefix(const BoundaryInputs& in, const PrefixMap& m, Report& r) {
    r.check("map1_cells_match_entry_ledger",
            "Map 1: every cell equals a ledger of the cache entry: the prefill a hit skips (the fleet cost "
            "model), the rent of its blob-layout bytes and the checkpoint's copy",
            m.ledger.mismatches == 0, agreement(m.ledger) + "; " + crossing(m.heat));
    r.scalar("prefix_min_tokens", "Shortest prefix worth caching (surely reused)", "tokens",
             m.shortest ? *m.shortest : NAN, true);
    r.scalar("prefix_reuse_needed", "Reuse probability a prefix of the chosen context needs", "fraction",
             m.reuse_needed, true)
        .help = "(KV rent + checkpoint) / prefill saved; above 1 caching it never pays.";
    r.scalar("checkpoint_cost_gpu_ms", "One checkpoint written and held for the residence", "GPU-ms",
             m.checkpoint_s * 1e3);
    r.heatmaps.push_back(m.heat);
    const std::string residence = seconds(in.residence_s);
    return {"Prefix caching with checkpoints",
            m.shortest ? "the prefix is " + tokens(*m.shortest) +
                             " or longer and likely to be reused within " + residence
                       : "never at this residence: the rent outweighs the prefill at every length",
            "prompts are unique or short, or entries stay long: one checkpoint held " + residence +
                " costs as much as " + tokens(m.checkpoint_tokens) + " of prefill",
            (m.shortest ? tokens(*m.shortest) + " at reuse 1; " : "no length pays; ") + "a prefix of " +
                tokens(in.context) + " needs reuse >= " + format_sig(m.reuse_needed, 3) +
                (m.reuse_needed > 1 ? " (never)" : ""),
            "prefix"};
}

// Map 2's rows: the spacing (interval or engine setting), recompute, states, hit and cost per request.
void interval_table(std::string name, const std::string& spacing, const std::string& states,
                    const IntervalMap& m, Report& r) {
    Table& t =
        r.add_table(make_table(std::move(name), {{spacing, "tokens"},
                                                 {"recomputed per request", "tokens"},
                                                 {states, "count"},
                                                 {"state-usable hit", "fraction"},
                                                 {"cost per request at the chosen residence", "GPU-s"}}));
    for (const IntervalMap::Row& x : m.rows)
        t.add({x.interval, x.recomputed, x.checkpoints, x.hit_state, x.cost_s});
}

// Map 2 under an engine: its replays' invariants, that each followed the setting it is plotted at, its
// rows and read-offs.
Verdict engine_spacing(const BoundaryInputs& in, const IntervalMap& m, Report& r) {
    const bool sglang = m.engine == CacheEngine::sglang;
    const std::string engine = sglang ? "SGLang" : "vLLM", setting = sglang ? "chunked prefill" : "block";
    r.check(
        "map2_engine_invariants",
        "Map 2 (" + engine + "): every replay keeps the engine's invariants (" +
            (sglang ? "mamba slots = states in the tree, KV allocated - freed = tree, no locks left, "
                      "tree audits"
                    : "block references returned, hash map = hashed blocks, hits on the grid") +
            ")",
        m.first_broken.empty(),
        m.first_broken.empty() ? std::to_string(m.engine_runs) + " replays of the workload" : m.first_broken);
    r.check("map2_engine_follows_setting",
            "Map 2 (" + engine + "): every request of every replay follows the " + setting +
                " it is plotted at" +
                (sglang ? " (ceil((prompt - hit) / C) extends)"
                        : " (its hit on the block grid, below the prompt)"),
            m.off_setting == 0,
            format_grouped(double(m.off_setting)) + " requests off their run's setting, over " +
                std::to_string(m.engine_runs) + " replays; " + crossing(m.heat));
    interval_table("Map 2: " + engine + "'s own replay of the " + m.workload + " workload (" +
                       format_grouped(m.requests) + " requests) at each " + setting +
                       ", one request at a time, unbounded pools, prompts only",
                   setting, "states held per request", m, r);
    r.scalar("engine_best_spacing", "Cheapest " + setting + " at the chosen residence (" + engine + ")",
             "tokens", m.best_interval, true);
    r.scalar("engine_best_spacing_cost_gpu_ms", "Its cost per request (recompute + states held)", "GPU-ms",
             m.best_cost_s * 1e3);
    r.scalar("engine_setting", "The configured " + setting, "tokens", m.setting);
    r.scalar("engine_setting_cost_gpu_ms", "Cost per request at the configured " + setting, "GPU-ms",
             m.setting_cost_s * 1e3);
    r.scalar("engine_rows_nested", "Finer settings never recompute more nor hold fewer states", "flag",
             m.nested ? 1 : 0)
        .help = "Not a check: the engine places states relative to each request's hit, so nesting can fail.";
    r.heatmaps.push_back(m.heat);
    const std::string residence = seconds(in.residence_s);
    return {"Dense checkpoint intervals (" + engine + "'s " + setting + ")",
            "requests resume mid-path or branch; at " + residence + " a " + setting + " of " +
                tokens(m.best_interval) + " costs least on this workload under " + engine + "'s rules",
            "states are held long: each rents " + format_bytes(m.state_bytes) +
                " for its whole residence, and " + engine + " keeps one per " + setting,
            "cheapest " + setting + " " + tokens(m.best_interval) + " at " + residence + "; the configured " +
                tokens(m.setting) + " costs " + format_sig(m.setting_cost_s * 1e3, 3) + " GPU-ms per request",
            "checkpoints"};
}

Verdict interval(const BoundaryInputs& in, const IntervalMap& m, Report& r) {
    const double first = m.rows.empty() ? 0 : m.rows.front().interval,
                 last = m.rows.empty() ? 0 : m.rows.back().interval;
    r.check("map2_finer_interval_nested",
            "Map 2: a finer nested interval never recomputes more and never writes fewer checkpoints",
            m.nested,
            "replays at intervals " + format_grouped(first) + " .. " + format_grouped(last) +
                " tokens, unbounded capacity (module 5's monotone case); " + crossing(m.heat));
    interval_table("Map 2: replays of the " + m.workload + " workload (" + format_grouped(m.requests) +
                       " requests) through one instance's cache, interval policy, unbounded capacity",
                   "interval", "checkpoints per request", m, r);
    r.scalar("best_interval", "Cheapest checkpoint interval at the chosen residence", "tokens",
             m.best_interval, true);
    r.scalar("best_interval_cost_gpu_ms", "Its cost per request (recompute + checkpoints)", "GPU-ms",
             m.best_cost_s * 1e3);
    r.heatmaps.push_back(m.heat);
    const std::string residence = seconds(in.residence_s);
    return {"Dense checkpoint intervals",
            "checkpoints live briefly and requests resume mid-path or branch; at " + residence +
                " an interval of " + tokens(m.best_interval) + " costs least on this workload",
            "checkpoints are held long: each rents " + format_bytes(m.state_bytes) +
                " for its whole residence, while halving the interval saves about I / 2 tokens per resume",
            "cheapest interval " + tokens(m.best_interval) + " at " + residence, "checkpoints"};
}

// Map 3's accounting of Kimi-K3's RecoverSSM at N = 7 against reference/kimi_k3.md §3.3: pages of
// 7,028,736 B (snapshot) and 7,815,168 B (RecoverSSM) per KDA layer at TP1, 1 + N or 2 + N against 1 or 2
// of them, and a record of 1,024 B per head and position, 1/64 of a head's 65,536 B state.
void recoverssm_storage_check(const ReplayMap& m, Report& r) {
    const double snap = 7028736, rec = 7815168;
    const double none = m.k3_snapshot_none / m.k3_recoverssm_none,
                 align = m.k3_snapshot_align / m.k3_recoverssm_align;
    r.check(
        "map3_recoverssm_storage",
        "Map 3 holds Kimi-K3's RecoverSSM storage at N = 7 as vLLM lays it out: 7.19:1 without prefix "
        "caching and 4.05:1 in align mode, 1,024 B records per head",
        m.k3_snapshot_none == 8 * snap && m.k3_recoverssm_none == rec && m.k3_snapshot_align == 9 * snap &&
            m.k3_recoverssm_align == 2 * rec && m.k3_record_per_head == 1024 &&
            format_sig(none, 3) == "7.19" && format_sig(align, 3) == "4.05",
        "per KDA layer and request: snapshots " + format_grouped(m.k3_snapshot_none) + " B vs RecoverSSM " +
            format_grouped(m.k3_recoverssm_none) + " B (" + format_sig(none, 4) + ":1), align mode " +
            format_grouped(m.k3_snapshot_align) + " vs " + format_grouped(m.k3_recoverssm_align) + " B (" +
            format_sig(align, 4) + ":1), record " + format_grouped(m.k3_record_per_head) +
            " B per head (reference/kimi_k3.md §3.3: pages 7,028,736 and 7,815,168 B, 7.19 and 4.05)");
}

Verdict recoverssm_verdict(const BoundaryInputs& in, const ReplayMap& m) {
    const std::string from = m.pays_from ? std::to_string(*m.pays_from) : "";
    const std::string mode = in.align ? "2 + N pages against 2" : "1 + N pages against 1";
    return {
        "RecoverSSM instead of snapshots (vLLM)",
        m.pays_from ? from + " or more draft tokens per step at " + format_grouped(in.batch) +
                          " running requests: snapshots write a full state per position and hold " + mode +
                          ", RecoverSSM writes 1 KiB records per head"
                    : "not within N <= 16 at this batch",
        m.snapshot_below_batch
            ? "one draft token with fewer than " + format_grouped(*m.snapshot_below_batch) +
                  " running requests: the step is short, so re-reading and rewriting the state on "
                  "commit costs more than holding the extra page"
            : "it saves at every cell here, least at one draft token with every draft accepted; vLLM refuses "
              "it with KV connectors (PD disaggregation, KV offload), where snapshots stay",
        m.pays_from ? "from N = " + from + " draft tokens at every acceptance" : "none on the map",
        "spec-storage"};
}

Verdict replay(const BoundaryInputs& in, const ReplayMap& m, Report& r) {
    r.check("map3_cells_match_verification_ledger",
            "Map 3: every cell equals a ledger of the verification: states and records sized from the blob "
            "layout, tokens kept from where the first draft is rejected, the step from the fleet cost model",
            m.ledger.mismatches == 0, agreement(m.ledger) + "; " + crossing(m.heat));
    r.check(
        "map3_module7_storage",
        "Map 3 holds module 7's storage: at Kimi-Linear dimensions and N = 4, 4.65:1 counting the confirmed "
        "state and 3.72:1 for N snapshots",
        m.snapshot_bytes == 20.0 * 10854400 && m.replay_bytes == 20.0 * 2335232 &&
            format_sig(m.ratio_counting_confirmed, 3) == "4.65" &&
            format_sig(m.ratio_n_snapshots, 3) == "3.72",
        "per request " + format_grouped(m.snapshot_bytes) + " B vs " + format_grouped(m.replay_bytes) +
            " B (reference/kda.md §6: 10,854,400 vs 2,335,232 B per layer, 20 layers): " +
            format_sig(m.ratio_counting_confirmed, 4) + ":1 and " + format_sig(m.ratio_n_snapshots, 4) +
            ":1");
    recoverssm_storage_check(m, r);
    r.scalar("replay_min_draft",
             m.recoverssm ? "RecoverSSM pays from this many draft tokens"
                          : "Replay pays from this many tokens per verification",
             "tokens", m.pays_from ? double(*m.pays_from) : NAN, true)
        .help = "At every acceptance on the map, at the chosen batch and context (null: not within N <= 16).";
    r.scalar("decode_step_ms", "Decode step the rollback storage is held for (estimate)", "ms",
             m.step_s * 1e3);
    r.heatmaps.push_back(m.heat);
    const std::string from = m.pays_from ? std::to_string(*m.pays_from) : "";
    if (m.recoverssm) return recoverssm_verdict(in, m);
    return {
        "Projection replay instead of snapshots",
        m.pays_from ? "verifying " + from + " or more tokens per step at " + format_grouped(in.batch) +
                          " running requests: snapshots write and hold N states where replay writes small "
                          "records"
                    : "not within N <= 16 at this batch",
        m.snapshot_below_batch
            ? "N = 1 with fewer than " + format_grouped(*m.snapshot_below_batch) +
                  " running requests: the step is short, so re-reading and rewriting the state costs more "
                  "than holding a second one"
            : "one token per verification: the saving is under 2x and the replay re-reads the state",
        m.pays_from ? "from N = " + from + " at every acceptance" : "none on the map", "spec-storage"};
}

Verdict context_parallel(const BoundaryInputs& in, const CpMap& m, Report& r) {
    r.check("map4_cells_match_ledger",
            "Map 4: every speed-up equals a recount: both prefills from the fleet cost model, the earlier "
            "tokens' KV from the blob layout, the scan's maps round by round (module 9's work counts)",
            m.ledger.mismatches == 0, agreement(m.ledger) + "; " + crossing(m.heat));
    Table& t = r.add_table(
        make_table("Map 4: the shortest slice at which R ranks beat one (" + in.cp_link.name + ")",
                   {{"ranks", "ranks"},
                    {"tokens per rank", "tokens"},
                    {"prompt", "tokens"},
                    {"speed-up at a 1 M-token prompt", "ratio"}}));
    for (const CpMap::Row& x : m.rows) t.add({x.ranks, x.tokens_per_rank, x.prompt, x.speedup_at_1m});
    const double n8 = m.tokens_per_rank_at_8;
    r.scalar("cp_min_tokens_per_rank", "Context parallelism over 8 ranks pays from", "tokens", n8, true);
    r.heatmaps.push_back(m.heat);
    return {
        "Context parallelism of a prefill (affine scan)",
        std::isnan(n8) ? "never up to a 1 M-token prompt"
                       : "slices of " + tokens(n8) + " or more per rank (8 ranks)",
        "short prompts: every rank streams all the weights as one rank would, and the scan sends " +
            format_bytes(m.map_bytes_per_round) +
            " per round; long prompts gain less than R because the last rank's causal attention spans the "
            "whole prompt",
        std::isnan(n8) ? "none" : tokens(n8) + " per rank at R = 8", "cp"};
}

Verdict migration(const BoundaryInputs& in, const MigrationMap& m, Report& r) {
    r.check("map5_cells_match_ledger",
            "Map 5: every cell equals a recount of the moves with the sizes of blobs the writer produces and "
            "the recompute from the fleet cost model",
            m.ledger.mismatches == 0, agreement(m.ledger) + "; " + crossing(m.heat));
    r.check("map5_move_kv_break_even_closed_form",
            "Map 5: moving only the KV breaks even where the closed-form root of its condition puts it "
            "(within a token)",
            std::fabs(m.break_even_distance - m.closed_form_distance) <= 1,
            "at " + tokens(in.context) + " over " + in.link.id + ": move_kv_break_even_distance " +
                tokens(m.break_even_distance) + ", closed form " + tokens(m.closed_form_distance));
    r.scalar("move_kv_break_even_distance", "Moving only the KV beats moving everything up to", "tokens",
             m.break_even_distance);
    r.scalar("migration_min_bandwidth", "Moving a request of the chosen context pays above", "GB/s",
             m.min_bandwidth ? *m.min_bandwidth / 1e9 : NAN, true);
    r.scalar("migration_min_context", "Over the instance link, moving pays from", "tokens",
             m.min_context ? *m.min_context : NAN);
    r.heatmaps.push_back(m.heat);
    const std::string bandwidth = m.min_bandwidth ? gbs(*m.min_bandwidth) : "none";
    const std::string context = m.min_context ? tokens(*m.min_context) : "none";
    return {"Migrating a request instead of recomputing it",
            "links of " + (m.min_bandwidth ? bandwidth + " or more" : std::string("any speed")) + " for " +
                tokens(in.context) + "; over " + in.link.id + " from " +
                (m.min_context ? context : "no length"),
            "short requests on slow links: the " + format_bytes(m.state_bytes) +
                " state travels whatever the length, while recomputing a short context is cheap",
            bandwidth + " at " + tokens(in.context) + "; " + context + " over " + in.link.id, "migrate"};
}

void affinity_checks(const AffinityMap& m, Report& r) {
    r.check("map6_fleet_runs_clean",
            "Map 6: every fleet run completes every request, accounts for its work and releases its caches",
            m.failed_checks == 0 && m.incomplete == 0 && m.missing == 0,
            std::to_string(m.runs) + " runs: " + std::to_string(m.failed_checks) + " failed checks, " +
                format_grouped(double(m.incomplete)) + " requests not completed, " +
                format_grouped(double(m.missing)) + " without exactly one record" +
                (m.first_failure.empty() ? "" : "; first: " + m.first_failure));
    if (m.has_no_reuse_column)
        r.check("map6_no_reuse_routes_as_least_loaded",
                "Map 6: with no shared prefix the affinity router routes exactly as least loaded",
                m.same_without_reuse,
                "instance and first-token time of every request, at every load of the reuse-0 column");
}

Verdict affinity(const AffinityMap& m, Report& r) {
    affinity_checks(m, r);
    Table& t = r.add_table(make_table("Map 6: the fleet runs (" + std::to_string(m.instances) +
                                          " instances, " + std::to_string(m.requests) + " requests each)",
                                      {{"reuse share", "fraction"},
                                       {"load", "ratio"},
                                       {"TTFT mean, least loaded", "ms"},
                                       {"TTFT mean, affinity", "ms"},
                                       {"ratio", "ratio"},
                                       {"state hit, least loaded", "fraction"},
                                       {"state hit, affinity", "fraction"}}));
    for (const AffinityMap::Row& x : m.rows)
        t.add({x.reuse, x.load, x.ttft_least_loaded, x.ttft_affinity, x.ratio, x.hit_least_loaded,
               x.hit_affinity});
    const HeatMap& h = m.heat;
    const size_t cells = h.z.size();
    r.scalar("affinity_win_share", "Cells where affinity has the lower mean TTFT", "fraction",
             double(m.wins) / double(cells), true);
    r.scalar("affinity_best_ratio", "Best TTFT ratio (least loaded / affinity)", "ratio", h.z[m.best]);
    r.scalar("affinity_worst_ratio", "Worst TTFT ratio (least loaded / affinity)", "ratio", h.z[m.worst]);
    r.scalar("affinity_min_reuse", "Affinity wins at every load from this reuse share", "fraction",
             m.wins_everywhere_from);
    r.scalar("fleet_capacity_per_s", "Prefill capacity of the fleet without reuse (load 1)", "requests/s",
             m.capacity_per_s);
    auto cell = [&](size_t i) {
        return "reuse " + format_sig(h.x[i % h.x.size()], 2) + ", load " + format_sig(h.y[i / h.x.size()], 2);
    };
    const size_t losses = cells - m.wins - size_t(std::count(h.z.begin(), h.z.end(), 1.0));
    const std::string of_cells = std::to_string(m.wins) + " of " + std::to_string(cells) + " cells";
    Verdict v{"Affinity routing instead of least loaded",
              "requests share prefixes and caches are bounded: up to " + format_sig(h.z[m.best], 3) +
                  "x lower mean TTFT (" + cell(m.best) + ")",
              "prompts share nothing (it then routes as least loaded); it loses in " +
                  std::to_string(losses) + " of " + std::to_string(cells) + " cells, down to " +
                  format_sig(h.z[m.worst], 3) + "x (" + cell(m.worst) +
                  "): a prefix's requests queue on one instance while others have room",
              std::isnan(m.wins_everywhere_from)
                  ? "wins in " + of_cells
                  : "wins at every load from reuse " + format_sig(m.wins_everywhere_from, 2) + " (" +
                        of_cells + ")",
              "fleet"};
    r.heatmaps.push_back(h);
    return v;
}

void verdict_table(const std::vector<Verdict>& rows, Report& r) {
    Table t = make_table(
        "Verdict: when to use each method and when not (this model and hardware, roofline estimates)",
        {{"method", ""}, {"use when", ""}, {"don't use when", ""}, {"break-even here", ""}, {"module", ""}});
    for (const Verdict& v : rows) t.add({v.method, v.use, v.dont, v.break_even, v.module});
    r.tables.insert(r.tables.begin(), std::move(t));
}

void notes(const BoundaryInputs& in, Report& r) {
    const Hardware& hw = in.hardware;
    r.notes.push_back("Every time is a roofline ESTIMATE for " + in.model.name + " on " + hw.name + " (" +
                      hw.source + ") at " + format_number(in.eff.compute * 100) + " %" +
                      " of peak compute and " + format_number(in.eff.memory * 100) + " %" +
                      " of peak bandwidth, not a measurement. Memory rent is bytes x seconds / " +
                      format_bytes(hw.mem_bytes) + " of device memory, in GPU-seconds.");
    r.notes.push_back(
        "Maps 2 and 6 come from simulations of small synthetic workloads (module 5's replay, module 11's "
        "fleet "
        "simulator); the others are computed from formulas of the core. Break-evens in the verdict are found "
        "by "
        "bisection on the same cost functions, not read from the grid.");
    r.scalar("compute_efficiency", "Share of peak compute the roofline assumes", "fraction", in.eff.compute);
    r.scalar("memory_efficiency", "Share of peak bandwidth the roofline assumes", "fraction", in.eff.memory);
}

}  // namespace

void report_boundaries(const BoundariesResult& b, Report& r) {
    const BoundaryInputs& in = b.in;
    std::vector<Verdict> verdicts;
    verdicts.push_back(prefix(in, b.prefix, r));
    verdicts.push_back(in.engine == CacheEngine::ideal ? interval(in, b.interval, r)
                                                       : engine_spacing(in, b.interval, r));
    verdicts.push_back(replay(in, b.replay, r));
    verdicts.push_back(context_parallel(in, b.cp, r));
    verdicts.push_back(migration(in, b.migration, r));
    verdicts.push_back(affinity(b.affinity, r));
    for (Verdict& v : report_serving_maps(b, r)) verdicts.push_back(std::move(v));
    verdict_table(verdicts, r);
    notes(in, r);
}

}  // namespace k3
