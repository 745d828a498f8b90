// Module 11 `fleet`: the main run's figures, the run without reuse, the routers compared, the checks
// (every run's, and the Mooncake reference on one instance), notes.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/fleet/trace_reference.h"
#include "core/modules/fleet/fleet.h"

namespace k3 {

namespace {

double tokens_served(const RequestSummary& a) { return double(a.prompt_tokens + a.output_tokens); }

void no_reuse(const FleetSummary& f, const FleetVariant& v, double price, Report& r) {
    const FleetSummary b = summarize_fleet(*v.sim);
    r.scalar("cost_per_million_tokens_no_reuse", "Cost per million tokens without prefix reuse (estimate)",
             "$", cost_per_million_tokens(b.gpu_hours_busy, price, tokens_served(b.all)));
    r.scalar("gpu_hours_busy_no_reuse", "GPU-hours busy without prefix reuse (estimate)", "h",
             b.gpu_hours_busy);
    r.scalar("ttft_p99_ms_no_reuse", "TTFT p99 without prefix reuse", "ms", b.all.ttft_ms.p99);
    Table& t = r.add_table(make_table("Cost (roofline estimate)", {{"run", ""},
                                                                   {"GPU-hours busy", "h"},
                                                                   {"GPU-hours provisioned", "h"},
                                                                   {"busy share", "fraction"},
                                                                   {"cost per million tokens", "$"},
                                                                   {"TTFT p50", "ms"},
                                                                   {"TTFT p99", "ms"},
                                                                   {"prefill tokens computed", "tokens"}}));
    for (const auto* x : {&f, &b})
        t.add({std::string(x == &f ? "with prefix reuse" : "without prefix reuse"), x->gpu_hours_busy,
               x->gpu_hours_provisioned,
               x->gpu_hours_provisioned > 0 ? x->gpu_hours_busy / x->gpu_hours_provisioned : 0.0,
               cost_per_million_tokens(x->gpu_hours_busy, price, tokens_served(x->all)), x->all.ttft_ms.p50,
               x->all.ttft_ms.p99, double(x->all.prefill_work)});
    report_fleet_checks(r, *v.sim, v.tag);
}

// " (prefill on H200, decode on H100)" when the two pools run on GPU presets of their own.
std::string gpu_split(const FleetConfig& c) {
    if (!c.first_gpus.on()) return "";
    return " (prefill on " + c.first_gpus.hardware.name + ", decode on " + c.hardware.name + ")";
}

// Disaggregated against colocated serving on the same instances: latency, throughput and goodput at
// the service levels.
void pd_comparison(const FleetParams& p, const FleetSim& pd, const FleetVariant& colocated, Report& r) {
    Table& t = r.add_table(make_table(
        "Disaggregated (" + std::to_string(pd.config().pd.prefill_instances) + " prefill, " +
            std::to_string(pd.config().instances - pd.config().pd.prefill_instances) +
            " decode) against colocated on the same " + std::to_string(pd.config().instances) + " instances" +
            gpu_split(pd.config()) + "; service levels TTFT <= " + format_sig(p.pd.slo_ttft_ms, 4) +
            " ms, TPOT <= " + format_sig(p.pd.slo_tpot_ms, 4) + " ms",
        {{"serving", ""},
         {"TTFT p50", "ms"},
         {"TTFT p99", "ms"},
         {"TPOT p50", "ms"},
         {"TPOT p99", "ms"},
         {"output tokens/s", "tokens/s"},
         {"within both levels", "fraction"},
         {"goodput", "requests/s"}}));
    SloMet m[2];
    const FleetSim* sims[2] = {&pd, colocated.sim.get()};
    for (int i = 0; i < 2; ++i) {
        const FleetSummary f = summarize_fleet(*sims[i]);
        m[i] = slo_met(*sims[i], p.pd.slo_ttft_ms, p.pd.slo_tpot_ms);
        t.add({std::string(i == 0 ? "disaggregated" : "colocated"), f.all.ttft_ms.p50, f.all.ttft_ms.p99,
               f.all.tpot_ms.p50, f.all.tpot_ms.p99, f.output_tokens_per_s, m[i].share, m[i].per_s});
    }
    r.scalar("slo_met_share", "Requests within both service levels (this run)", "fraction", m[0].share);
    r.scalar("slo_met_share_colocated", "Requests within both service levels, colocated", "fraction",
             m[1].share);
    r.scalar("goodput_over_colocated", "Goodput disaggregated over colocated (same GPUs)", "x",
             m[1].per_s > 0 ? m[0].per_s / m[1].per_s : 0.0);
}

void latency(const FleetSim& s, const FleetSummary& f, Report& r) {
    report_latency_table(r, "Latency (simulated, roofline estimate)", {{"all", f.all}});
    std::vector<double> t;
    for (const RequestOutcome& o : s.outcomes())
        if (o.completed) t.push_back(o.ttft_ms());
    std::sort(t.begin(), t.end());
    Series& cdf = r.add_series(
        make_series("TTFT", "TTFT distribution", "TTFT (ms)", "share of requests", "ms", "fraction"));
    cdf.log_x = true;
    const size_t points = std::min<size_t>(t.size(), 200);
    for (size_t i = 0; i < points; ++i) {
        const double q = points > 1 ? double(i) / double(points - 1) : 1.0;
        cdf.add(std::max(percentile_sorted(t, q), 1e-3), q);
    }
}

Series router_bars(std::string name, std::string plot, std::string y_label, std::string y_unit) {
    Series s =
        make_series(std::move(name), std::move(plot), "router", std::move(y_label), "", std::move(y_unit));
    s.style = SeriesStyle::bars;
    return s;
}

void routers(const FleetResult& result, double price, Report& r) {
    Table& t = r.add_table(
        make_table("Routers compared (same workload and instances)", {{"router", ""},
                                                                      {"KV-visible hit", "fraction"},
                                                                      {"state-usable hit", "fraction"},
                                                                      {"gap", "fraction"},
                                                                      {"routing miss", "fraction"},
                                                                      {"TTFT p50", "ms"},
                                                                      {"TTFT p99", "ms"},
                                                                      {"E2E p99", "ms"},
                                                                      {"load imbalance", "ratio"},
                                                                      {"Jain's index", ""},
                                                                      {"preemptions", "count"},
                                                                      {"cost per million tokens", "$"}}));
    Series kv = router_bars("KV-visible", "Token hit by router", "token hit", "fraction"),
           state = router_bars("state-usable", "Token hit by router", "token hit", "fraction"),
           p99 = router_bars("TTFT p99", "TTFT p99 by router", "TTFT p99 (ms)", "ms");
    std::vector<std::pair<RouterKind, const FleetSim*>> all = {
        {result.config.router.kind, result.main.get()}};
    for (const FleetVariant& v : result.routers) all.push_back({v.router, v.sim.get()});
    std::sort(all.begin(), all.end());
    for (const auto& [k, sim] : all) {
        const FleetSummary fx = summarize_fleet(*sim);
        const RequestSummary& x = fx.all;
        // Session hashing needs sessions: on a trace that carries none (Mooncake: one per request) it
        // is random bounded-load hashing, labelled so.
        const bool no_sessions = sim->workload().sessions() == sim->workload().requests.size();
        const std::string na = k == RouterKind::session && no_sessions ? " (no sessions in the trace)" : "";
        t.add({router_labels()[size_t(k)] + na + (sim == result.main.get() ? " (this run)" : ""), x.hit_kv(),
               x.hit_state(), x.hit_kv() - x.hit_state(), x.hit_best() - x.hit_state(), x.ttft_ms.p50,
               x.ttft_ms.p99, x.e2e_ms.p99, fx.load_imbalance, fx.jain_busy, double(x.preemptions),
               cost_per_million_tokens(fx.gpu_hours_busy, price, tokens_served(x))});
        for (Series* y : {&kv, &state, &p99}) y->x_names.push_back(router_ids()[size_t(k)]);
        kv.add(double(k), x.hit_kv());
        if (k == RouterKind::round_robin)
            r.scalar("round_robin_token_hit_kv", "KV-visible token hit under round robin", "fraction",
                     x.hit_kv());
        if (k == RouterKind::cache_aware || k == RouterKind::kv_events || k == RouterKind::kv_cost) {
            const std::string id = router_ids()[size_t(k)];
            r.scalar(id + "_token_hit_kv", "KV-visible token hit under " + id, "fraction", x.hit_kv());
            r.scalar(id + "_ttft_p99_ms", "TTFT p99 under " + id, "ms", x.ttft_ms.p99);
        }
        state.add(double(k), x.hit_state());
        p99.add(double(k), x.ttft_ms.p99);
    }
    r.add_series(std::move(kv));
    r.add_series(std::move(state));
    r.add_series(std::move(p99));
    for (const FleetVariant& v : result.routers) report_fleet_checks(r, *v.sim, v.tag);
}

// One instance sees every earlier request, as module 5's sequential replay does: the hits must equal
// a count from the block ids alone (a request that overlapped an earlier one still prefilling would
// miss; on this trace none does).
void one_instance_checks(const FleetResult& result, const FleetSummary& f, Report& r) {
    const FleetConfig& c = result.config;
    const bool unbounded =
        c.cache.state_capacity == 0 && c.cache.kv_capacity_tokens == 0 && c.cache.page_size == 1;
    const bool end = c.policy.kind == PolicyKind::interval_end;
    // Under an engine the policy does not apply: engine_matches_replay compares (fleet_engine_report.h).
    if (!result.workload.bundled || !unbounded || c.instances != 1 || c.engine != CacheEngine::ideal ||
        !(c.policy.kind == PolicyKind::interval || end))
        return;
    const TraceReferenceHits ref = trace_reference_hits(*result.workload.trace, c.policy.interval);
    const uint64_t want_state = end ? ref.state_hit_interval_end : ref.state_hit_interval;
    r.check("one_instance_hits_match_block_ids",
            "One instance: hits equal an independent count over the block ids (module 5's replay)",
            ref.kv_hit_tokens == f.all.kv_hit_tokens && want_state == f.all.state_hit_tokens,
            format_grouped(double(f.all.kv_hit_tokens)) + " KV-visible and " +
                format_grouped(double(f.all.state_hit_tokens)) + " state-usable tokens vs " +
                format_grouped(double(ref.kv_hit_tokens)) + " and " + format_grouped(double(want_state)) +
                " from the block ids");
    if (c.policy.interval != 512) return;
    const double kv = std::round(f.all.hit_kv() * 10000) / 100,
                 st = std::round(f.all.hit_state() * 10000) / 100;
    r.check("mooncake_one_instance_hits",
            "Mooncake conversation trace, one instance: 37.36 % KV-visible, " +
                std::string(end ? "37.36" : "37.34") + " % state-usable (traces/README.md)",
            kv == 37.36 && st == (end ? 37.36 : 37.34),
            format_sig(f.all.hit_kv() * 100, 6) + " % KV-visible, " + format_sig(f.all.hit_state() * 100, 6) +
                " % state-usable");
}

void notes(const FleetResult& result, Report& r) {
    const Workload& w = result.main->workload();
    r.notes.push_back(w.name + " workload: " + format_grouped(double(w.requests.size())) + " requests, " +
                      format_grouped(double(w.prompt_tokens())) + " prompt tokens, " +
                      format_grouped(double(w.output_tokens())) + " output tokens, arrivals x" +
                      format_sig(result.config.load, 3) + ".");
    if (result.workload.trace)
        r.notes.push_back(
            "Trace output tokens are not in the trace: prompts are cached, outputs only generated.");
    r.notes.push_back(
        "Routing: " + std::string(router_labels()[size_t(result.config.router.kind)]) +
        ". Prefix and state-aware affinity are oracles: they read each instance's true radix tree (a router "
        "fed by KV events with zero lag); SGLang's cache_aware keeps approximate trees of its own, "
        "kv_events and kv_cost a view fed by KV events kv_event_delay_s late.");
}

}  // namespace

void report_fleet(const FleetParams& p, const FleetResult& result, Report& r) {
    const FleetSim& s = *result.main;
    const FleetSummary f = summarize_fleet(s);
    const double price = p.cost.price_per_gpu_hour;
    report_core_scalars(r, f, price);
    r.scalar("routing_miss", "State hit another instance had", "fraction",
             f.all.hit_best() - f.all.hit_state());
    if (!result.no_reuse.empty()) no_reuse(f, result.no_reuse[0], price, r);
    latency(s, f, r);
    {
        const Workload& w = result.main->workload();
        if ((result.config.router.kind == RouterKind::session || !result.routers.empty()) &&
            w.sessions() == w.requests.size())
            r.notes.push_back(
                "Session hashing: this workload carries no sessions (each request is its own, as "
                "the Mooncake trace's requests are), so the session router is random "
                "bounded-load hashing here, not session affinity.");
    }
    if (!result.routers.empty()) routers(result, price, r);
    report_load_series(r, s);
    report_instances(r, s);
    report_timeline(
        r, s,
        "Instances over time (" + std::string(router_labels()[size_t(result.config.router.kind)]) + ")");
    report_fleet_checks(r, s);
    report_running_state(r, s);
    report_host_tier(r, s);
    report_pd(r, s);
    if (!result.colocated.empty()) pd_comparison(p, s, result.colocated[0], r);
    report_model_notes(r, s);
    one_instance_checks(result, f, r);
    notes(result, r);
    r.timing_scalar("simulate_ms", "Main simulation (wall clock)", "ms", result.simulate_ms);
    r.timing_scalar("events_per_s", "Events per second (main simulation)", "events/s",
                    result.simulate_ms > 0 ? double(s.totals().events) / (result.simulate_ms / 1000.0) : 0);
    r.scalar("events", "Simulation events", "events", double(s.totals().events));
}

}  // namespace k3
