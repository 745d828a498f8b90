// Module 5 `checkpoints`: the replays as figures, sweep plots, tables, checks and notes.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/base/numfmt.h"
#include "core/modules/checkpoints/checkpoints.h"
#include "core/modules/shared/tree_report.h"

namespace k3 {

namespace {

bool unbounded(const CacheConfig& c) { return c.state_capacity == 0 && c.kv_capacity_tokens == 0; }

// ---- codecs ----

void codecs_on_random_state(const CodecMeasurements& m, Report& r) {
    Table& t = r.add_table(
        make_table("Checkpoint compression", {{"codec", ""},
                                              {"bytes per checkpoint", "B"},
                                              {"vs fp32", "ratio"},
                                              {"stated error bound", ""},
                                              {"max |error| (random state)", ""},
                                              {"max error / bound", "ratio"},
                                              {"relative RMS error", ""},
                                              {"checkpoints per fp32 checkpoint's memory", "ratio"}}));
    const double fp32 = double(m.fp32_checkpoint_bytes);
    bool within = true;
    std::string detail;
    for (const CodecOnRandomState& c : m.random) {
        const std::string id = state_codec_id(c.codec);
        const CodecError& e = c.error;
        const double bytes = double(c.checkpoint_bytes);
        within &= e.max_bound_ratio <= 1.0;
        detail += (detail.empty() ? "" : ", ") + id + " " + format_sig(e.max_bound_ratio, 3);
        t.add({id, bytes, bytes / fp32, std::string(codec_bound_text(c.codec)), format_sig(e.max_abs, 3),
               e.max_bound_ratio, format_sig(e.rel_rms, 3), fp32 / bytes});
    }
    r.check("codec_error_within_bound", "Every codec's measured error is within its stated bound", within,
            "largest error / bound on a random " + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                " state: " + detail);
}

void codecs_on_runnable_model(const CodecMeasurements& m, Report& r) {
    if (m.effects.empty()) {
        r.check("codecs_measured_on_runnable_model", "Codecs measured on the runnable model", false,
                m.effect_error);
        return;
    }
    Table& t = r.add_table(make_table(
        "Checkpoint compression on the runnable model (" + std::string(default_runnable_id()) + ")",
        {{"codec", ""},
         {"bytes per checkpoint", "B"},
         {"max error / bound (real states)", "ratio"},
         {"max |state error|", ""},
         {"relative RMS error (worst layer)", ""},
         {"max |logit diff| after resume", ""},
         {"largest |logit|", ""},
         {"top-1 agreement", "fraction"},
         {"bitwise", ""}}));
    bool within = true, fp32_exact = false;
    std::string detail;
    for (const serve::CodecEffect& x : m.effects) {
        const std::string id = state_codec_id(x.codec);
        within &= x.state_bound_ratio <= 1.0;
        if (x.codec == StateCodec::fp32) fp32_exact = x.cold_bitwise && x.bitwise && x.max_logit_diff == 0;
        detail += (detail.empty() ? "" : ", ") + id + " " + format_sig(x.state_bound_ratio, 3);
        t.add({id, double(x.checkpoint_bytes), x.state_bound_ratio, format_sig(x.state_max_abs, 3),
               format_sig(x.state_rel_rms, 3), format_sig(x.max_logit_diff, 3), format_sig(x.logit_scale, 3),
               x.rows ? double(x.top1_agree) / double(x.rows) : 0.0, std::string(x.bitwise ? "yes" : "no")});
    }
    const serve::CodecEffectConfig& ec = m.effect_config;
    r.check("codec_error_within_bound_runnable_model",
            "Every codec's error is within its stated bound on the runnable model's states", within,
            "largest error / bound over every KDA layer of " + std::to_string(ec.prompts) +
                " prompts: " + detail);
    r.check("fp32_resume_bitwise",
            "A resume from an fp32 checkpoint is bitwise a cold run of the whole prompt", fp32_exact,
            "resumed at " + std::to_string(ec.resume) +
                " tokens with the KDA state wiped, then loaded from the stored checkpoint alone; " +
                std::to_string(ec.steps) +
                " next-token predictions per prompt compared bit for bit with a cold run that prefills "
                "the whole prompt in one call, and with the resume from the live state");
    r.notes.push_back(
        "Codecs on the runnable model: " + std::to_string(ec.prompts) + " random prompts prefilled to " +
        std::to_string(ec.resume) + " tokens, checkpointed with each codec, resumed, " +
        std::to_string(ec.continue_tokens) + " more prompt tokens prefilled and " +
        std::to_string(ec.steps - 1) +
        " greedy step(s) decoded with the exact run's tokens; the table compares the next-token "
        "logits.");
}

// ---- the headline run ----

void scalars(const CheckpointsParams& p, const CheckpointsResult& m, Report& r) {
    const ReplayTotals& t = m.totals;
    const CacheStats& s = m.stats;
    const double state_held = double(s.state_bytes),
                 kv_held = double(s.kv_tokens) * double(m.config.kv_bytes_per_token);
    r.scalar("token_hit_kv", "KV-visible token hit", "fraction", t.token_hit_kv(), true);
    r.scalar("token_hit_state", "State-usable token hit", "fraction", t.token_hit_state(), true).help =
        "Prompt tokens up to the deepest checkpoint at or above the KV match: what a request actually skips.";
    r.scalar("recomputed_tokens", "Recomputed prompt tokens", "tokens", double(t.recomputed_tokens), true)
        .help = "Sum over requests of prompt length minus the state-usable hit.";
    r.scalar("state_memory_share", "State share of cache memory (end)", "fraction",
             state_held + kv_held > 0 ? state_held / (state_held + kv_held) : 0.0, true);
    r.scalar("hit_gap", "KV-visible minus state-usable", "fraction", t.token_hit_kv() - t.token_hit_state());
    r.scalar("prompt_tokens", "Prompt tokens", "tokens", double(t.prompt_tokens));
    r.scalar("requests", "Requests", "requests", double(t.requests));
    r.scalar("kv_hit_tokens", "KV-visible hit tokens", "tokens", double(t.kv_hit_tokens));
    r.scalar("state_hit_tokens", "State-usable hit tokens", "tokens", double(t.state_hit_tokens));
    r.scalar("state_bytes_held", "State checkpoints held (end)", "B", state_held);
    r.scalar("kv_bytes_held", "Attention KV held (end)", "B", kv_held);
    r.scalar("peak_state_bytes", "State checkpoints held (peak)", "B", double(t.peak_state_bytes));
    r.scalar("peak_kv_bytes", "Attention KV held (peak)", "B", double(t.peak_kv_bytes));
    r.scalar("states_held", "Checkpoints held (end)", "count", double(s.states));
    r.scalar("kv_tokens_held", "KV tokens held (end)", "tokens", double(s.kv_tokens));
    r.scalar("checkpoint_bytes", "Bytes per checkpoint", "B", double(m.config.state_bytes)).help =
        m.model.name + ", " + state_codec_id(p.codec) + " recurrent state plus conv windows.";
    r.scalar("state_equivalent_tokens", "One checkpoint weighs as much attention KV as", "tokens",
             std::round(double(m.config.state_bytes) /
                        double(std::max<uint64_t>(m.config.kv_bytes_per_token, 1))))
        .help = "Bytes per checkpoint over the attention KV bytes of one token (module 2's accounting).";
    r.scalar("states_created", "Checkpoints created", "count", double(t.states_added));
    r.scalar("checkpoints_used", "Checkpoints ever resumed from", "count", double(s.checkpoints_used)).help =
        "Checkpoints that at least one later request resumed from; the rest were pure cost.";
    r.scalar("checkpoint_use_fraction", "Share of checkpoints ever resumed from", "fraction",
             t.states_added ? double(s.checkpoints_used) / double(t.states_added) : 0.0);
    r.scalar("states_evicted", "Checkpoints evicted (capacity)", "count", double(s.states_evicted));
    r.scalar("retention_dropped", "Checkpoints dropped by retention", "count", double(t.retention_dropped));
    r.scalar("tombstones", "Tombstones (KV kept, state gone)", "count", double(s.tombstones));
    r.scalar("gap_requests", "Requests with KV deeper than state", "requests", double(t.gap_requests));
    r.scalar("full_hits", "Requests resumed at their prompt end", "requests", double(t.full_hits));
    r.timing_scalar("replay_ms", "Replay (headline run)", "ms", m.replay_ms);
    if (m.replay_ms > 0)
        r.timing_scalar("requests_per_s", "Replay throughput", "req/s",
                        double(t.requests) / (m.replay_ms / 1000.0));
}

// ---- sweeps ----

// With unbounded capacity and no retention, a finer nested grid can only resume deeper.
void nested_interval_check(const CheckpointsResult& m, Report& r) {
    const PolicyKind k = m.intervals[0].cfg.policy.kind;
    if (!unbounded(m.config.cache) ||
        !(k == PolicyKind::interval || k == PolicyKind::interval_end || k == PolicyKind::branch))
        return;
    bool monotone = true;
    std::string detail;
    const std::vector<ReplayResult>& v = m.intervals;
    for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = 0; j < v.size(); ++j)
            if (uint64_t(v[j].x) % uint64_t(v[i].x) == 0 &&
                v[i].t.recomputed_tokens > v[j].t.recomputed_tokens) {
                monotone = false;
                detail =
                    "interval " + format_grouped(v[i].x) + " recomputes more than " + format_grouped(v[j].x);
            }
    r.check("finer_interval_never_recomputes_more",
            "Unbounded cache: a finer nested interval never recomputes more", monotone,
            monotone ? "recomputed tokens non-increasing as the interval halves, over " +
                           std::to_string(v.size()) + " intervals"
                     : detail);
}

void interval_sweep(const CheckpointsResult& m, Report& r) {
    if (m.intervals.empty()) return;
    Series trade_off =
        make_series("interval sweep", "Memory vs recompute over checkpoint intervals",
                    "state checkpoints held (peak)", "recomputed prompt tokens", "B", "tokens");
    trade_off.log_x = true;
    trade_off.style = SeriesStyle::points;
    Series recomputed = make_series("recomputed", "Recompute vs checkpoint interval", "interval",
                                    "recomputed prompt tokens", "tokens", "tokens");
    Series memory = make_series("state memory (peak)", "State memory vs checkpoint interval", "interval",
                                "state checkpoints held (peak)", "tokens", "B");
    recomputed.log_x = memory.log_x = memory.log_y = true;
    Table t = make_table("Checkpoint intervals", {{"interval", "tokens"},
                                                  {"state-usable hit", "fraction"},
                                                  {"recomputed", "tokens"},
                                                  {"checkpoints held", "count"},
                                                  {"state memory (peak)", "B"},
                                                  {"KV memory (end)", "B"},
                                                  {"state share (end)", "fraction"}});
    for (const ReplayResult& x : m.intervals) {
        const double kv = double(x.s.kv_tokens) * double(m.config.kv_bytes_per_token),
                     st = double(x.s.state_bytes);
        trade_off.add(double(x.t.peak_state_bytes), double(x.t.recomputed_tokens));
        recomputed.add(x.x, double(x.t.recomputed_tokens));
        memory.add(x.x, double(x.t.peak_state_bytes));
        t.add({x.x, x.t.token_hit_state(), double(x.t.recomputed_tokens), double(x.s.states),
               double(x.t.peak_state_bytes), kv, st + kv > 0 ? st / (st + kv) : 0.0});
    }
    r.add_series(std::move(trade_off));
    r.add_series(std::move(recomputed));
    r.add_series(std::move(memory));
    r.add_table(std::move(t));
    if (m.interval_sweep_uses_interval_end)
        r.notes.push_back(
            "The chosen policy places no interval checkpoints: the interval sweep uses \"interval + request "
            "end\" "
            "with the same capacities.");
    nested_interval_check(m, r);
}

// Sorts the points by x (the unbounded point of the capacity sweep may land anywhere).
void sort_by_x(Series& s) {
    std::vector<size_t> order(s.x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    std::vector<double> x, y;
    for (size_t i : order) x.push_back(s.x[i]), y.push_back(s.y[i]);
    s.x = std::move(x);
    s.y = std::move(y);
}

// The first figure in which a replay of the headline's configuration differs from it ("" if none).
std::string replay_difference(const ReplayResult& x, const CheckpointsResult& m) {
    const ReplayTotals &a = x.t, &b = m.totals;
    const CacheStats &s = x.s, &h = m.stats;
    const std::pair<const char*, std::pair<uint64_t, uint64_t>> figures[] = {
        {"requests", {a.requests, b.requests}},
        {"prompt tokens", {a.prompt_tokens, b.prompt_tokens}},
        {"KV-visible hit tokens", {a.kv_hit_tokens, b.kv_hit_tokens}},
        {"state-usable hit tokens", {a.state_hit_tokens, b.state_hit_tokens}},
        {"recomputed tokens", {a.recomputed_tokens, b.recomputed_tokens}},
        {"checkpoints created", {a.states_added, b.states_added}},
        {"checkpoints ever resumed from", {s.checkpoints_used, h.checkpoints_used}},
        {"peak state bytes", {a.peak_state_bytes, b.peak_state_bytes}},
        {"peak KV bytes", {a.peak_kv_bytes, b.peak_kv_bytes}},
        {"tree nodes", {s.nodes, h.nodes}},
        {"KV tokens held", {s.kv_tokens, h.kv_tokens}},
        {"checkpoints held", {s.states, h.states}},
    };
    for (const auto& [name, v] : figures)
        if (v.first != v.second)
            return std::string(name) + ": " + format_grouped(double(v.first)) + " in the sweep vs " +
                   format_grouped(double(v.second)) + " in the headline run";
    return {};
}

void capacity_sweep(const CheckpointsResult& m, Report& r) {
    if (m.capacities.empty()) return;
    Series node = make_series("state-usable, node refresh", "Hit rate vs state capacity",
                              "state capacity (states)", "token hit", "count", "fraction");
    node.log_x = true;
    Series path = node, kv = node;
    path.name = "state-usable, path refresh";
    kv.name = "KV-visible, node refresh";
    Table t = make_table("State capacity", {{"capacity", "count"},
                                            {"LRU refresh", ""},
                                            {"KV-visible hit", "fraction"},
                                            {"state-usable hit", "fraction"},
                                            {"recomputed", "tokens"},
                                            {"checkpoints evicted", "count"}});
    for (const ReplayResult& x : m.capacities) {
        // The unbounded run is plotted at the number of states it ended up holding.
        const double at = x.x > 0 ? x.x : double(std::max<uint64_t>(x.s.peak_states, 1));
        const bool node_refresh = x.cfg.cache.refresh == LruRefresh::node;
        (node_refresh ? node : path).add(at, x.t.token_hit_state());
        if (node_refresh) kv.add(at, x.t.token_hit_kv());
        const Cell capacity =
            x.x > 0 ? Cell(x.x) : Cell("unbounded (" + format_grouped(double(x.s.peak_states)) + ")");
        t.add({capacity, x.label, x.t.token_hit_kv(), x.t.token_hit_state(), double(x.t.recomputed_tokens),
               double(x.s.states_evicted)});
    }
    for (Series* s : {&node, &path, &kv}) {
        sort_by_x(*s);
        r.add_series(std::move(*s));
    }
    r.add_table(std::move(t));
    // The unbounded point of the sweep under the headline's refresh is the headline run again.
    if (m.config.cache.state_capacity != 0) return;
    for (const ReplayResult& x : m.capacities)
        if (x.x == 0 && x.cfg.cache.refresh == m.config.cache.refresh) {
            const std::string differs = replay_difference(x, m);
            r.check("capacity_sweep_reproduces_headline",
                    "The sweep's unbounded run, replayed again in time slices, repeats the headline run "
                    "(determinism)",
                    differs.empty(),
                    differs.empty()
                        ? "same requests, prompt tokens, both hits, recomputed tokens, checkpoints "
                          "created and used, peak bytes and final tree (" +
                              format_grouped(double(x.t.state_hit_tokens)) + " state-usable hit tokens)"
                        : differs);
        }
}

void policy_comparison(const CheckpointsResult& m, Report& r) {
    if (m.policies.empty()) return;
    Series hit =
        make_series("state-usable hit", "State-usable hit by policy", "policy", "token hit", "", "fraction");
    hit.style = SeriesStyle::bars;
    Table t = make_table("Policies compared", {{"policy", ""},
                                               {"KV-visible hit", "fraction"},
                                               {"state-usable hit", "fraction"},
                                               {"recomputed", "tokens"},
                                               {"checkpoints held", "count"},
                                               {"state memory (peak)", "B"},
                                               {"created", "count"},
                                               {"share ever resumed from", "fraction"},
                                               {"dropped by retention", "count"},
                                               {"evicted", "count"}});
    for (const ReplayResult& x : m.policies) {
        hit.add(x.x, x.t.token_hit_state());
        hit.x_names.push_back(policy_ids()[size_t(x.x)]);
        t.add({x.label, x.t.token_hit_kv(), x.t.token_hit_state(), double(x.t.recomputed_tokens),
               double(x.s.states), double(x.t.peak_state_bytes), double(x.t.states_added),
               x.t.states_added ? double(x.s.checkpoints_used) / double(x.t.states_added) : 0.0,
               double(x.t.retention_dropped), double(x.s.states_evicted)});
    }
    r.add_series(std::move(hit));
    r.add_table(std::move(t));
}

// ---- the tree and the requests ----

void tree(const CheckpointsResult& m, Report& r) {
    const TreeSummary& tree = m.tree;
    const CacheStats& s = m.stats;
    const std::string name = "Radix tree at the end of the headline run";
    Table& t = r.add_table(make_table(name, {{"property", ""}, {"value", ""}}));
    auto row = [&t](std::string property, double v, const char* unit = "count") {
        t.add({std::move(property), format_with_unit(v, unit)});
    };
    row("nodes", double(tree.nodes));
    row("leaves", double(tree.leaves));
    row("forks (2+ children)", double(tree.forks));
    row("largest fan-out", double(tree.max_fan_out));
    row("deepest node (nodes from the root)", double(tree.max_depth));
    row("nodes with a checkpoint", double(tree.with_state));
    row("tombstones (state evicted, KV kept)", double(tree.tombstones));
    row("nodes that never had a checkpoint", double(tree.never_had_state));
    row("KV tokens", double(s.kv_tokens), "tokens");
    row("KV memory", double(s.kv_tokens) * double(m.config.kv_bytes_per_token), "B");
    row("checkpoint memory", double(s.state_bytes), "B");
    row("node splits", double(s.splits));
    row("KV tokens evicted", double(s.kv_tokens_evicted), "tokens");
    row("nodes removed", double(s.nodes_removed));
    // The tree itself: single-child chains merged, checkpoints as markers, heaviest subtrees first.
    r.trees.push_back(prefix_tree_report(name, m.view));
    if (m.view.total > m.view.nodes.size())
        r.notes.push_back("The tree view merges single-child chains and shows the " +
                          format_grouped(double(m.view.nodes.size())) + " heaviest of " +
                          format_grouped(double(m.view.total)) + " spans.");
}

void outcomes(const ReplayTotals& t, Report& r) {
    Table& o = r.add_table(make_table("Requests by outcome",
                                      {{"outcome", ""}, {"requests", "requests"}, {"share", "fraction"}}));
    const double requests = double(std::max<uint64_t>(t.requests, 1));
    auto row = [&](const char* outcome, uint64_t n) {
        o.add({std::string(outcome), double(n), double(n) / requests});
    };
    row("resumed at the prompt end", t.full_hits);
    row("resumed part way", t.requests - t.full_hits - t.no_state_hit);
    row("no state-usable hit (full prefill)", t.no_state_hit);
    row("KV matched deeper than the state", t.gap_requests);
}

// ---- checks ----

void headline_checks(const CheckpointsResult& m, Report& r) {
    r.check("tree_invariants_hold", "Tree invariants hold after the replay (audit)", m.audit.empty(),
            m.audit.empty()
                ? "spans, child index, LRU lists, lock counts, reference counts and byte totals agree"
                : m.audit);
    const CacheStats& z = m.after_clear;
    r.check("counts_return_to_zero", "Reference counts and memory return to zero",
            m.leases_after_replay == 0 && z.nodes == 0 && z.kv_tokens == 0 && z.states == 0 &&
                z.state_bytes == 0 && z.live_checkpoints == 0 && z.live_state_bytes == 0 && z.tombstones == 0,
            "after the replay: " + format_grouped(double(m.leases_after_replay)) +
                " leases held; after dropping the cache: " + format_grouped(double(z.nodes)) + " nodes, " +
                format_grouped(double(z.kv_tokens)) + " KV tokens, " +
                format_grouped(double(z.live_checkpoints)) + " checkpoints, " +
                format_bytes(double(z.live_state_bytes)) + " of state");
    const CacheConfig& cache = m.config.cache;
    if (cache.state_capacity > 0 || cache.kv_capacity_tokens > 0)
        r.check("capacities_hold", "Capacities hold after every request",
                (cache.state_capacity == 0 || m.max_states_held <= cache.state_capacity) &&
                    (cache.kv_capacity_tokens == 0 || m.max_kv_held <= cache.kv_capacity_tokens),
                "at most " + format_grouped(double(m.max_states_held)) + " checkpoints and " +
                    format_grouped(double(m.max_kv_held)) + " KV tokens held between requests");
}

// One hit of every request, the replay's against the recount's: the first request where they differ.
template <class Field>
std::string first_hit_difference(const CheckpointsResult& m, Field field) {
    const std::vector<RequestHit>&got = m.replay_hits, &want = m.recount->hits;
    if (got.size() != want.size())
        return format_grouped(double(got.size())) + " requests replayed, " +
               format_grouped(double(want.size())) + " recounted";
    for (size_t i = 0; i < got.size(); ++i)
        if (field(got[i]) != field(want[i]))
            return "request " + format_grouped(double(i + 1)) + ": " + format_grouped(double(field(got[i]))) +
                   " tokens (radix tree) vs " + format_grouped(double(field(want[i]))) + " (recount)";
    return {};
}

// The radix tree's hits, request by request, against the recount from the tokens (checkpoints_recount.cpp).
void recount_checks(const CheckpointsResult& m, Report& r) {
    if (!m.recount) return;
    const ReplayTotals& t = m.totals;
    const CheckpointHitRecount& n = *m.recount;
    auto check = [&](const char* key, const char* name, uint64_t tree, uint64_t recount,
                     std::string differs) {
        r.check(key, name, differs.empty(),
                differs.empty() ? "every one of " + format_grouped(double(n.hits.size())) + " requests; " +
                                      format_grouped(double(tree)) + " tokens in all (radix tree) vs " +
                                      format_grouped(double(recount)) + " (recount)"
                                : differs);
    };
    check("kv_hit_matches_token_recount",
          "KV-visible hit of every request equals a recount over the cached tokens, without the tree",
          t.kv_hit_tokens, n.kv_hit_tokens,
          first_hit_difference(m, [](const RequestHit& h) { return h.kv_hit; }));
    check("state_hit_matches_token_recount",
          "State-usable hit of every request equals a recount: the deepest checkpoint an earlier request "
          "left on the shared prefix",
          t.state_hit_tokens, n.state_hit_tokens,
          first_hit_difference(m, [](const RequestHit& h) { return h.state_hit; }));
}

// The replay's recomputed tokens against an independent count of the prompt tokens past each request's
// state-usable hit: the token recount, else the trace's block-level count.
void recomputed_check(const CheckpointsResult& m, Report& r) {
    const ReplayTotals& t = m.totals;
    const PolicyKind kind = m.config.policy.kind;
    uint64_t prompt = 0, want = 0;
    std::string how;
    if (m.recount) {
        prompt = m.recount->prompt_tokens;
        want = m.recount->recomputed_tokens;
        how = "recounted from the tokens";
    } else if (m.reference && (kind == PolicyKind::interval || kind == PolicyKind::interval_end)) {
        prompt = m.reference->prompt_tokens;
        want = prompt - (kind == PolicyKind::interval ? m.reference->state_hit_interval
                                                      : m.reference->state_hit_interval_end);
        how = "counted over the block ids";
    } else {
        return;
    }
    r.check("recomputed_matches_recount",
            "Recomputed tokens equal an independent count of the prompt tokens past each state-usable hit",
            t.recomputed_tokens == want && t.prompt_tokens == prompt,
            format_grouped(double(t.recomputed_tokens)) + " of " + format_grouped(double(t.prompt_tokens)) +
                " prompt tokens (replay) vs " + format_grouped(double(want)) + " of " +
                format_grouped(double(prompt)) + " (" + how + ", no tree)");
}

// The radix tree's hits against counts over the trace's block ids (core/fleet/trace_reference.h), and
// the bundled trace's published figures (tests/data/traces/README.md).
void reference_checks(const CheckpointsResult& m, Report& r) {
    const ReplayTotals& t = m.totals;
    const PolicyKind kind = m.config.policy.kind;
    const bool interval_grid = kind == PolicyKind::interval || kind == PolicyKind::interval_end;
    if (const std::optional<TraceReferenceHits>& ref = m.reference) {
        r.check("kv_hit_matches_block_count", "KV-visible hit equals an independent count over the block ids",
                ref->kv_hit_tokens == t.kv_hit_tokens,
                format_grouped(double(t.kv_hit_tokens)) + " tokens (radix tree) vs " +
                    format_grouped(double(ref->kv_hit_tokens)) + " (block-level count, no tree)");
        if (interval_grid) {
            const uint64_t want =
                kind == PolicyKind::interval ? ref->state_hit_interval : ref->state_hit_interval_end;
            r.check("state_hit_matches_block_count",
                    "State-usable hit equals an independent count over the block ids",
                    want == t.state_hit_tokens,
                    format_grouped(double(t.state_hit_tokens)) + " tokens (radix tree) vs " +
                        format_grouped(double(want)) + " (block-level count)");
        }
    }
    const CacheConfig& cache = m.config.cache;
    if (!m.bundled_trace || !unbounded(cache) || cache.page_size != 1 || m.config.policy.interval != 512 ||
        !interval_grid)
        return;
    const bool end = kind == PolicyKind::interval_end;
    const double kv = std::round(t.token_hit_kv() * 10000) / 100,
                 st = std::round(t.token_hit_state() * 10000) / 100;
    r.check("mooncake_reference_hits",
            "Mooncake conversation trace: 37.36 % KV-visible, " + std::string(end ? "37.36" : "37.34") +
                " % state-usable (traces/README.md)",
            kv == 37.36 && st == (end ? 37.36 : 37.34),
            format_sig(t.token_hit_kv() * 100, 6) + " % KV-visible, " +
                format_sig(t.token_hit_state() * 100, 6) + " % state-usable over " +
                format_grouped(double(t.prompt_tokens)) + " prompt tokens");
}

void notes(const CheckpointsResult& m, Report& r) {
    const uint64_t prompt = m.vllm ? m.vllm->totals.prompt_tokens : m.totals.prompt_tokens;
    r.notes.push_back(m.workload_name + " workload: " + format_grouped(double(m.workload_requests)) +
                      " requests, " + format_grouped(double(prompt)) + " prompt tokens.");
    if (m.from_trace)
        r.notes.push_back(
            "Each 512-token block id of the trace expands into 512 deterministic pseudo-token ids (the last "
            "block "
            "truncated to input_length), which keeps exactly the trace's prefix sharing. Output tokens are "
            "not in "
            "the trace, so only prompts are cached.");
    else if (!m.sglang && !m.vllm)
        r.notes.push_back(
            "Synthetic requests cache prompt and output (the next turn's prompt contains the output).");
    if (m.vllm) return;
    r.notes.push_back(
        "Requests are replayed one after the other (no concurrency); the fleet module replays the same cache "
        "under "
        "a scheduler. A request resumes from its state-usable hit and recomputes the rest.");
}

}  // namespace

void report_checkpoints(const CheckpointsParams& p, const CheckpointsResult& m, Report& r) {
    if (m.refused()) {
        r.check("workload_loaded", "Workload loaded", false, m.load_error);
        return;
    }
    codecs_on_random_state(m.codecs, r);
    codecs_on_runnable_model(m.codecs, r);
    if (m.vllm) {  // engine=vllm: vLLM's figures and checks instead of the radix tree's
        report_vllm(p, m, r);
        notes(m, r);
        return;
    }
    scalars(p, m, r);
    interval_sweep(m, r);
    capacity_sweep(m, r);
    policy_comparison(m, r);
    tree(m, r);
    outcomes(m.totals, r);
    headline_checks(m, r);
    recount_checks(m, r);
    if (p.engine == CacheEngine::ideal) reference_checks(m, r);
    recomputed_check(m, r);
    if (m.sglang) report_sglang(*m.sglang, r);
    notes(m, r);
}

}  // namespace k3
