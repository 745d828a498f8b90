// Module 12 `tenants`: the burst's figures against the solo run, per tenant, the mechanisms compared,
// TTFT over time, the checks.
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/modules/tenants/tenants.h"

namespace k3 {

namespace {

// The claim on one seed: the well-behaved requests arriving during the burst, their TTFT p99 with this
// run's isolation, alone and without isolation, and the p99 of their delay over its bound (with
// isolation and without).
struct SeedClaim {
    uint64_t seed = 0;
    double requests = 0, isolated = 0, solo = 0, none = 0;  // requests (isolated run); p99s in ms
    double delays = 0, delay_isolated = 0, delay_none = 0;  // requests with a delay; p99s of delay / bound
};

// The figures of the burst every part of the report uses.
struct Burst {
    const FleetSim& main;
    const FleetSim& solo;
    const FleetSim& none;                                               // no isolation
    RequestSummary well_behaved, well_behaved_solo, well_behaved_none;  // this seed
    double solo_p99 = 0;  // the well-behaved tenants' TTFT p99 in their solo run on this seed (> 0)
    // Over the claim's seeds: each seed's figures, and the same of every seed's requests pooled.
    std::vector<SeedClaim> seeds;
    double pooled_isolated = 0, pooled_solo = 0, pooled_none = 0;
    double pooled_delay_isolated = 0, pooled_delay_none = 0;
    uint64_t pooled_requests = 0, pooled_delays = 0, pooled_past_bound = 0;
};

void add_claim(const TenantsResult& t, Burst& b) {
    std::vector<double> pooled[3], delays[2];
    for (uint64_t k = 0; k < t.claim_seeds(); ++k) {
        SeedClaim c;
        c.seed = t.config.seed + k;
        double* p99[3] = {&c.isolated, &c.solo, &c.none};
        for (int role = 0; role < 3; ++role) {
            std::vector<double> v = t.well_behaved_ttfts(t.claim_sim(k, ClaimRole(role)));
            if (role == 0) c.requests = double(v.size());
            *p99[role] = percentiles(v).p99;
            pooled[role].insert(pooled[role].end(), v.begin(), v.end());
        }
        const FleetSim& solo = t.claim_sim(k, ClaimRole::solo);
        const std::vector<double> d[2] = {t.burst_delay_over_bound(t.claim_sim(k, ClaimRole::isolated), solo),
                                          t.burst_delay_over_bound(t.claim_sim(k, ClaimRole::none), solo)};
        c.delays = double(d[0].size());
        c.delay_isolated = percentiles(d[0]).p99;
        c.delay_none = percentiles(d[1]).p99;
        for (int i = 0; i < 2; ++i) delays[i].insert(delays[i].end(), d[i].begin(), d[i].end());
        b.seeds.push_back(c);
    }
    b.pooled_requests = pooled[0].size();
    b.pooled_isolated = percentiles(pooled[0]).p99;
    b.pooled_solo = std::max(percentiles(pooled[1]).p99, 1e-9);
    b.pooled_none = percentiles(pooled[2]).p99;
    b.pooled_delays = delays[0].size();
    b.pooled_past_bound =
        uint64_t(std::count_if(delays[0].begin(), delays[0].end(), [](double x) { return x > 1; }));
    b.pooled_delay_isolated = percentiles(delays[0]).p99;
    b.pooled_delay_none = percentiles(delays[1]).p99;
}

Burst burst_of(const TenantsResult& t) {
    Burst b{*t.runs[0].sim, *t.runs[1].sim, *t.runs[2].sim, {}, {}, {}};
    b.well_behaved = t.well_behaved(b.main);
    b.well_behaved_solo = t.well_behaved(b.solo);
    b.well_behaved_none = t.well_behaved(b.none);
    b.solo_p99 = std::max(b.well_behaved_solo.ttft_ms.p99, 1e-9);
    add_claim(t, b);
    return b;
}

void scalars(const TenantsResult& t, const Burst& b, Report& r) {
    const std::string over = " (" + std::to_string(b.seeds.size()) + " seeds pooled)";
    r.scalar("well_behaved_ttft_p99_ms", "Well-behaved tenants' TTFT p99 during the burst" + over, "ms",
             b.pooled_isolated, true);
    r.scalar("solo_ttft_p99_ms", "... in their solo runs", "ms", b.pooled_solo, true);
    r.scalar("isolation_ratio", "... ratio, this mechanism", "x", b.pooled_isolated / b.pooled_solo, true);
    r.scalar("no_isolation_ratio", "... ratio without isolation (FCFS, shared cache)", "x",
             b.pooled_none / b.pooled_solo, true);
    for (const TenantRun& x : t.runs)
        if (!x.solo && x.queue == QueuePolicy::fcfs && x.quota) {
            r.scalar("quotas_only_ratio", "... ratio with quotas alone (FCFS, cache quotas), this seed", "x",
                     t.well_behaved(*x.sim).ttft_ms.p99 / b.solo_p99);
            break;
        }
    r.scalar("burst_delay_p99_over_bound",
             "Well-behaved requests' delay by the burst over its bound, p99" + over, "x",
             b.pooled_delay_isolated, true);
    r.scalar("no_isolation_delay_p99_over_bound", "... without isolation", "x", b.pooled_delay_none, true);
    r.scalar("noisy_ttft_p99_ms", "Bursting tenant's TTFT p99 during the burst (this seed)", "ms",
             t.bursting(b.main).ttft_ms.p99);
}

RequestSummary of_tenant(const FleetSim& s, uint32_t tenant) {
    return summarize_requests(s.outcomes(), [tenant](const RequestOutcome& o) { return o.tenant == tenant; });
}

void per_tenant(const TenantsResult& t, const Burst& b, Report& r) {
    const std::vector<TenantShare> shares = tenant_shares(t);
    double total_served = 0;
    for (const TenantShare& x : shares) total_served += x.served;
    Table& table =
        r.add_table(make_table("Tenants during the burst (this run)", {{"tenant", ""},
                                                                       {"role", ""},
                                                                       {"requests", "requests"},
                                                                       {"TTFT p50", "ms"},
                                                                       {"TTFT p99", "ms"},
                                                                       {"solo TTFT p99", "ms"},
                                                                       {"KV-visible hit", "fraction"},
                                                                       {"state-usable hit", "fraction"},
                                                                       {"share of tokens served", "fraction"},
                                                                       {"entitlement", "fraction"},
                                                                       {"served / fair share", "ratio"}}));
    const uint32_t n = uint32_t(shares.size());
    std::vector<double> ratio;
    for (uint32_t i = 0; i < n; ++i) {
        auto in_burst = [&](const RequestOutcome& o) { return o.tenant == i && t.in_burst(o); };
        const RequestSummary x = summarize_requests(b.main.outcomes(), in_burst);
        const RequestSummary whole = of_tenant(b.main, i);
        const double solo_p99 = i == 0 ? 0.0 : summarize_requests(b.solo.outcomes(), in_burst).ttft_ms.p99;
        ratio.push_back(shares[i].served_over_fair());
        table.add({"tenant " + std::to_string(i), std::string(i == 0 ? "bursting" : "well-behaved"),
                   double(x.requests), x.ttft_ms.p50, x.ttft_ms.p99, solo_p99, whole.hit_kv(),
                   whole.hit_state(), total_served > 0 ? shares[i].served / total_served : 0.0,
                   1.0 / double(n), ratio.back()});
    }
    r.scalar("jain_tenants", "Jain's index over tenants (served / max-min fair share)", "",
             jain_index(ratio));
}

void mechanisms(const TenantsResult& t, const Burst& b, Report& r) {
    Table& table = r.add_table(
        make_table("Mechanisms compared (same workload)", {{"run", ""},
                                                           {"well-behaved TTFT p99", "ms"},
                                                           {"vs solo", "x"},
                                                           {"bursting TTFT p99", "ms"},
                                                           {"well-behaved state-usable hit", "fraction"},
                                                           {"TTFT p99 (all)", "ms"},
                                                           {"preemptions", "count"}}));
    for (const TenantRun& x : t.runs) {
        if (x.solo) continue;
        const RequestSummary a = t.well_behaved(*x.sim);
        const RequestSummary hits =
            summarize_requests(x.sim->outcomes(), [](const RequestOutcome& o) { return o.tenant != 0; });
        const FleetSummary all = summarize_fleet(*x.sim);
        table.add({x.main ? "this run: " + std::string(queue_policy_labels()[size_t(x.queue)]) +
                                (x.quota ? ", cache quotas" : ", shared cache")
                          : x.label,
                   a.ttft_ms.p99, a.ttft_ms.p99 / b.solo_p99, t.bursting(*x.sim).ttft_ms.p99,
                   hits.hit_state(), all.all.ttft_ms.p99, double(all.all.preemptions)});
    }
}

void plots_and_tables(const TenantsParams& p, const TenantsResult& t, const Burst& b, Report& r) {
    const double end = p.duration_s * 1000.0;
    auto well_behaved = [end](const RequestOutcome& o) {
        return o.tenant != 0 && o.completed && o.arrival_ms < end;
    };
    for (const TenantRun* x : {&t.runs[1], &t.runs[0], &t.runs[2]})
        r.add_series(ttft_by_arrival(x->solo   ? "alone"
                                     : x->main ? "this run"
                                               : "no isolation",
                                     "Well-behaved tenants' TTFT by arrival time (p90 per bin)",
                                     x->sim->outcomes(), end, 60, well_behaved));
    std::vector<std::pair<std::string, RequestSummary>> latency;
    for (uint32_t i = 0; i < p.tenants; ++i)
        latency.push_back(
            {"tenant " + std::to_string(i) + (i == 0 ? " (bursting)" : ""), of_tenant(b.main, i)});
    report_latency_table(r, "Latency per tenant, whole run (simulated, roofline estimate)", latency);
    report_load_series(r, b.main);
    report_instances(r, b.main);
    report_timeline(r, b.main, "Instances over time (this run)");
}

// The well-behaved requests of this run and of the solo run, one by one, each from its own run's log
// (its outcomes and the workload it simulated): arrival, tenant, prompt and output, every token.
struct SoloComparison {
    uint64_t here = 0, alone = 0, differ = 0;
};
SoloComparison compare_solo(const FleetSim& main, const FleetSim& solo) {
    SoloComparison c;
    for (const RequestOutcome& o : main.outcomes()) c.here += o.tenant != 0;
    c.alone = solo.outcomes().size();
    for_each_solo_pair(main, solo, [&](size_t i, size_t j) {
        const RequestOutcome &a = main.outcomes()[i], &b = solo.outcomes()[j];
        const TokenSeq &ta = *main.workload().requests[i].tokens, &tb = *solo.workload().requests[j].tokens;
        c.differ += a.arrival_ms != b.arrival_ms || a.tenant != b.tenant || a.prompt != b.prompt ||
                    a.output != b.output || ta.size() != tb.size() ||
                    common_prefix(ta, tb, 0, ta.size()) != ta.size();
    });
    return c;
}

// The claim seed by seed: each seed's p99s, and the p99 of its requests' delay over their bound.
void claim_table(const Burst& b, Report& r) {
    Table& table =
        r.add_table(make_table("The claim over seeds (well-behaved requests arriving in the burst)",
                               {{"seed", ""},
                                {"requests", "requests"},
                                {"TTFT p99 with isolation", "ms"},
                                {"alone", "ms"},
                                {"without isolation", "ms"},
                                {"delay / bound p99, isolation", "x"},
                                {"delay / bound p99, none", "x"},
                                {"within the bound", ""}}));
    for (const SeedClaim& c : b.seeds)
        table.add({std::to_string(c.seed), c.requests, c.isolated, c.solo, c.none, c.delay_isolated,
                   c.delay_none,
                   std::string(c.delays == 0           ? "no requests"
                               : c.delay_isolated <= 1 ? "yes"
                                                       : "no")});
}

// The spread of the per-seed p99s of delay over bound: "from a to b (median m); n of N seeds within".
std::string seed_spread(const Burst& b) {
    std::vector<double> p99;  // of the seeds with requests in the burst
    int within = 0;
    for (const SeedClaim& c : b.seeds)
        if (c.delays > 0) {
            p99.push_back(c.delay_isolated);
            within += c.delay_isolated <= 1;
        }
    if (p99.empty()) return "no seed has a well-behaved request in the burst";
    const Percentiles q = percentiles(p99);
    return "seed by seed the p99 runs from " + format_sig(*std::min_element(p99.begin(), p99.end()), 3) +
           " to " + format_sig(q.max, 3) + " of the bound (median " + format_sig(q.p50, 3) + "), " +
           std::to_string(within) + " of " + std::to_string(p99.size()) + " seeds within on their own";
}

// With isolation (a queue policy or quotas), 99 % of the well-behaved requests arriving during the
// burst, pooled over the claim's seeds, must get their first token within their delay bound of their
// solo run's (burst_delay_bound_ms: the scheduler's own granularity, nothing tuned), which no isolation
// misses; where no isolation meets it too, the burst tests nothing and a note says so.
void isolation_check(const TenantsParams& p, const TenantsResult& t, const Burst& b, Report& r) {
    const double iso = b.pooled_delay_isolated, none = b.pooled_delay_none;
    const size_t n = b.seeds.size();
    const std::string pooled = " over " + format_grouped(double(b.pooled_delays)) +
                               " well-behaved requests arriving during the burst on " + std::to_string(n) +
                               " seeds (" + std::to_string(p.seed) + " to " + std::to_string(p.seed + n - 1) +
                               ")";
    const std::string figures =
        "p99 of delay / bound " + format_sig(iso, 3) + " with isolation, " + format_sig(none, 3) +
        " without" + pooled + "; " + format_grouped(double(b.pooled_past_bound)) +
        " past their bound; TTFT p99 " + format_sig(b.pooled_isolated, 4) + " ms with isolation, " +
        format_sig(b.pooled_solo, 4) + " ms alone, " + format_sig(b.pooled_none, 4) + " ms without";
    if (t.runs[0].queue == QueuePolicy::fcfs && !t.runs[0].quota)
        r.notes.push_back("No isolation mechanism is selected: " + figures + ".");
    else if (none <= 1)
        r.notes.push_back(
            "The burst delays the well-behaved tenants no more than the scheduler's own "
            "granularity even without isolation, so it tests no mechanism: " +
            figures + ".");
    else
        r.check("isolation_keeps_slo",
                "Isolation bounds the burst's delay: 99 % of the well-behaved requests get their first token "
                "within (1 + their chunks) steps of their solo run's, which no isolation exceeds (" +
                    std::to_string(n) + " seeds)",
                iso <= 1, figures + "; " + seed_spread(b));
    if (t.runs[0].queue != QueuePolicy::fcfs || t.runs[0].quota)
        if (iso > 1)
            r.notes.push_back(
                "Here the mechanism does not isolate: " + format_grouped(double(b.pooled_past_bound)) +
                " of " + format_grouped(double(b.pooled_delays)) +
                " well-behaved requests waited longer than their bound (the table \"The claim over seeds\" "
                "shows where). The bound holds where the mechanism admits a well-behaved request ahead of "
                "the burst and gives its chunks their share of each step; it breaks where the request waits "
                "behind work the mechanism does not order (running slots or KV held by the burst, an "
                "engine's prefill-first batches, a router that sends it to a busy instance).");
}

void checks(const TenantsParams& p, const TenantsResult& t, const Burst& b, Report& r) {
    for (const TenantRun& x : t.runs) report_fleet_checks(r, *x.sim, x.tag);
    report_running_state(r, b.main);
    report_model_notes(r, b.main);
    isolation_check(p, t, b, r);
    const SoloComparison c = compare_solo(b.main, b.solo);
    r.check(
        "solo_same_requests", "The solo run has the same well-behaved requests, one by one",
        c.here == c.alone && c.differ == 0,
        format_grouped(double(c.here)) + " well-behaved requests in this run, " +
            format_grouped(double(c.alone)) +
            " in the solo run, compared in arrival order (arrival, tenant, prompt and output length, every "
            "token): " +
            format_grouped(double(c.differ)) + " differ");
}

void notes(const TenantsParams& p, const TenantsResult& t, Report& r) {
    r.notes.push_back(std::to_string(p.tenants) + " tenants, " +
                      format_grouped(double(t.all->requests.size())) + " requests; tenant 0 bursts x" +
                      format_sig(p.burst_factor, 3) + " from " + format_sig(t.burst_from_ms / 1000, 3) +
                      " s for " + format_sig(p.burst_s, 3) + " s with " + format_sig(p.noisy_user_len, 3) +
                      "-token messages. Latency figures of the burst count requests that arrived during it.");
    if (t.runs[0].queue == QueuePolicy::token_bucket)
        r.notes.push_back("Token buckets refill at " + format_si(t.config.bucket_rate_tokens_per_s, 3) +
                          " uncached tokens/s for the whole fleet, split by weight.");
}

}  // namespace

void report_tenants(const TenantsParams& p, const TenantsResult& t, Report& r) {
    const Burst b = burst_of(t);
    report_core_scalars(r, summarize_fleet(b.main), p.cost.price_per_gpu_hour);
    scalars(t, b, r);
    per_tenant(t, b, r);
    mechanisms(t, b, r);
    claim_table(b, r);
    plots_and_tables(p, t, b, r);
    checks(p, t, b, r);
    notes(p, t, r);
}

}  // namespace k3
