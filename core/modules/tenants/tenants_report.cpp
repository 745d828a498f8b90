// Module 12 `tenants`: the burst's figures against the solo run, per tenant, the mechanisms compared,
// TTFT over time, the checks.
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/modules/tenants/tenants.h"

namespace k3 {

namespace {

// The claim on one seed: the well-behaved requests' TTFT p99 during the burst, with this run's isolation,
// alone and without isolation.
struct SeedClaim {
    uint64_t seed = 0;
    double requests = 0, isolated = 0, solo = 0, none = 0;  // requests (isolated run); p99s in ms
};

// The figures of the burst every part of the report uses.
struct Burst {
    const FleetSim& main;
    const FleetSim& solo;
    const FleetSim& none;                                               // no isolation
    RequestSummary well_behaved, well_behaved_solo, well_behaved_none;  // this seed
    double solo_p99 = 0;  // the well-behaved tenants' TTFT p99 in their solo run on this seed (> 0)
    // Over the claim's seeds: each seed's p99s, and the p99 of every seed's requests pooled.
    std::vector<SeedClaim> seeds;
    double pooled_isolated = 0, pooled_solo = 0, pooled_none = 0;
    uint64_t pooled_requests = 0;
};

void add_claim(const TenantsResult& t, Burst& b) {
    std::vector<double> pooled[3];
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
        b.seeds.push_back(c);
    }
    b.pooled_requests = pooled[0].size();
    b.pooled_isolated = percentiles(pooled[0]).p99;
    b.pooled_solo = std::max(percentiles(pooled[1]).p99, 1e-9);
    b.pooled_none = percentiles(pooled[2]).p99;
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
    std::vector<size_t> well_behaved;  // of this run, in arrival order
    for (size_t i = 0; i < main.outcomes().size(); ++i)
        if (main.outcomes()[i].tenant != 0) well_behaved.push_back(i);
    c.here = well_behaved.size();
    c.alone = solo.outcomes().size();
    for (size_t j = 0; j < std::min<size_t>(c.here, c.alone); ++j) {
        const RequestOutcome &a = main.outcomes()[well_behaved[j]], &b = solo.outcomes()[j];
        const TokenSeq &ta = *main.workload().requests[well_behaved[j]].tokens,
                       &tb = *solo.workload().requests[j].tokens;
        c.differ += a.arrival_ms != b.arrival_ms || a.tenant != b.tenant || a.prompt != b.prompt ||
                    a.output != b.output || ta.size() != tb.size() ||
                    common_prefix(ta, tb, 0, ta.size()) != ta.size();
    }
    return c;
}

// The claim seed by seed: each seed's p99s and ratios, and whether it meets the SLO on its own.
void claim_table(const TenantsParams& p, const Burst& b, Report& r) {
    Table& table =
        r.add_table(make_table("The claim over seeds (well-behaved requests arriving in the burst)",
                               {{"seed", ""},
                                {"requests", "requests"},
                                {"TTFT p99 with isolation", "ms"},
                                {"alone", "ms"},
                                {"without isolation", "ms"},
                                {"isolation vs alone", "x"},
                                {"none vs alone", "x"},
                                {"within the SLO", ""}}));
    for (const SeedClaim& c : b.seeds) {
        const double solo = std::max(c.solo, 1e-9);
        table.add({std::to_string(c.seed), c.requests, c.isolated, c.solo, c.none, c.isolated / solo,
                   c.none / solo, std::string(c.isolated <= p.tolerance * c.solo ? "yes" : "no")});
    }
}

// The spread of the per-seed ratios: "from a to b x (median m); n of N seeds within on their own".
std::string seed_spread(const TenantsParams& p, const Burst& b) {
    std::vector<double> ratio;
    int within = 0;
    for (const SeedClaim& c : b.seeds) {
        ratio.push_back(c.isolated / std::max(c.solo, 1e-9));
        within += c.isolated <= p.tolerance * c.solo;
    }
    const Percentiles q = percentiles(ratio);
    return "seed by seed from " + format_sig(*std::min_element(ratio.begin(), ratio.end()), 3) + " to " +
           format_sig(q.max, 3) + " x (median " + format_sig(q.p50, 3) + " x), " + std::to_string(within) +
           " of " + std::to_string(b.seeds.size()) + " seeds within on their own";
}

// With isolation (a queue policy or quotas), the well-behaved tenants' p99 TTFT during the burst, pooled
// over the claim's seeds, must meet the user's SLO (tolerance x their solo runs') that no isolation
// misses; where no isolation meets it too, the burst tests nothing and a note says so.
void isolation_check(const TenantsParams& p, const TenantsResult& t, const Burst& b, Report& r) {
    const double wb = b.pooled_isolated, none = b.pooled_none, solo = b.pooled_solo;
    const double slo = p.tolerance * solo;
    const std::string figures = format_sig(wb, 4) + " ms with isolation vs " + format_sig(solo, 4) +
                                " ms alone (" + format_sig(wb / solo, 3) + " x); without isolation " +
                                format_sig(none, 4) + " ms (" + format_sig(none / solo, 3) + " x)";
    const size_t n = b.seeds.size();
    const std::string pooled = ", the p99 of " + format_grouped(double(b.pooled_requests)) +
                               " requests arriving during the burst on " + std::to_string(n) + " seeds (" +
                               std::to_string(p.seed) + " to " + std::to_string(p.seed + n - 1) + ")";
    if (t.runs[0].queue == QueuePolicy::fcfs && !t.runs[0].quota)
        r.notes.push_back(
            "No isolation mechanism is selected: the well-behaved tenants' p99 TTFT during the burst is " +
            format_sig(wb / solo, 3) + " x their solo runs'" + pooled + ".");
    else if (none <= slo)
        r.notes.push_back("The burst keeps the well-behaved tenants within " + format_sig(p.tolerance, 3) +
                          " x their solo p99 TTFT even without isolation, so it tests no mechanism: " +
                          figures + pooled + ".");
    else
        r.check("isolation_keeps_slo",
                "Isolation keeps the well-behaved tenants' p99 TTFT within " + format_sig(p.tolerance, 3) +
                    " x their solo runs' while tenant 0 bursts, which no isolation exceeds (" +
                    std::to_string(n) + " seeds)",
                wb <= slo,
                figures + pooled + "; " + seed_spread(p, b) + "; isolation cuts the p99 " +
                    format_sig(none / std::max(wb, 1e-9), 3) + " x");
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
    claim_table(p, b, r);
    plots_and_tables(p, t, b, r);
    checks(p, t, b, r);
    notes(p, t, r);
}

}  // namespace k3
