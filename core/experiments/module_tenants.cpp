// Module 12 `tenants`: budget isolation between tenants. One tenant bursts; the others should not
// notice. Mechanisms: none (FCFS), token buckets, deficit round robin on uncached tokens, per-tenant
// cache quotas. Each run is compared with the well-behaved tenants' solo run.
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/base/numfmt.h"
#include "core/experiments/fleet_report.h"
#include "core/experiments/registry.h"
#include "core/fleet/workload_tenants.h"

namespace k3 {

namespace {

std::vector<ParamSpec> tenants_params() {
    auto t = [](ParamSpec s) { return s.in_group("Tenants"); };
    std::vector<ParamSpec> v = {
        t(ParamSpec::integer("tenants", "Tenants", "", 2, 8, 3)
              .describe("Tenant 0 bursts; the others send a steady stream of chat sessions.")),
        t(ParamSpec::choice("mechanism", "Isolation mechanism", queue_policy_ids(), "drr",
                            queue_policy_labels())
              .describe("How each instance orders its waiting requests (How it works).")),
        t(ParamSpec::flag("quotas", "Per-tenant quotas", true)
              .describe("Each tenant gets its own prefix-cache namespace with its weight's share of the "
                        "checkpoint and KV capacity, and at most its share of the running state slots and of "
                        "the concurrent prefills (engines namespace caches by cache_salt; none enforces "
                        "quotas).")),
        t(ParamSpec::real("sessions_per_s", "Sessions per tenant", "sessions/s", 0.01, 20, 0.4)
              .log()
              .describe("Session starts per second of every tenant outside the burst.")),
        t(ParamSpec::real("duration_s", "Duration", "s", 10, 3600, 120)
              .log()
              .describe("Sessions start during this time (turns may run past it).")),
        t(ParamSpec::real("burst_factor", "Burst factor", "x", 1, 100, 12)
              .log()
              .describe("Tenant 0 starts sessions this many times as often during the burst.")),
        t(ParamSpec::real("burst_start_s", "Burst start", "s", 0, 3600, 30)
              .describe("Simulated time at which tenant 0 starts bursting.")),
        t(ParamSpec::real("burst_s", "Burst length", "s", 0, 3600, 40)
              .describe("How long tenant 0 keeps bursting.")),
        t(ParamSpec::real("noisy_user_len", "Tenant 0 message length", "tokens", 16, 65536, 6000)
              .log()
              .describe("Mean user-message length of tenant 0 (long documents); the others use 400.")),
        t(ParamSpec::real("output_len", "Output length", "tokens", 1, 8192, 250)
              .log()
              .describe("Mean output length of every tenant.")),
        t(ParamSpec::real("bucket_share", "Token-bucket rate", "fraction", 0.05, 4, 0.8)
              .active_when("mechanism", "token_bucket")
              .describe("Buckets refill at this share of the fleet's estimated prefill capacity (uncached "
                        "tokens/s), split by weight; depth 2 s of a tenant's rate.")),
        t(ParamSpec::real("drr_quantum", "DRR quantum", "tokens", 256, 1e6, 8192)
              .log()
              .active_when("mechanism", "drr")
              .describe("Uncached tokens a tenant may admit per round (Dynamo queues on uncached tokens).")),
        t(ParamSpec::real("tolerance", "Isolation tolerance", "x", 1, 10, 2.5)
              .describe(
                  "The check passes when the well-behaved tenants' p99 TTFT during the burst is at most this "
                  "multiple of their solo run's. It cannot be 1: their prefills share forward passes with "
                  "the burst's chunks, and a request arriving mid-iteration waits for it to end.")),
    };
    v.push_back(ParamSpec::seed("Seed of every tenant's arrivals and request sizes.").in_group("Tenants"));
    for (auto&& s : fleet_router_params()) v.push_back(std::move(s));
    for (auto&& s : fleet_cache_params()) v.push_back(std::move(s));
    for (auto&& s : fleet_instance_params()) v.push_back(std::move(s));
    set_param_default(v, "instances", 2.0);
    set_param_default(v, "max_batch_tokens", 2048.0);
    set_param_default(v, "router", std::string("least_loaded"));
    set_param_default(v, "state_capacity", 48.0);
    set_param_default(v, "kv_capacity_tokens", 600000.0);
    return v;
}

std::vector<TenantSpec> tenant_specs(const Params& p) {
    std::vector<TenantSpec> v(size_t(p.i("tenants")));
    for (size_t i = 0; i < v.size(); ++i) {
        v[i].sessions_per_s = p.num("sessions_per_s");
        v[i].output_len_mean = p.num("output_len");
        v[i].system_len = 1024 + 512 * uint32_t(i % 4);
    }
    v[0].user_len_mean = p.num("noisy_user_len");
    v[0].burst_factor = p.num("burst_factor");
    v[0].burst_start_s = p.num("burst_start_s");
    v[0].burst_s = p.num("burst_s");
    return v;
}

struct TenantRun {
    std::string label;
    QueuePolicy queue = QueuePolicy::fcfs;
    bool quota = false, solo = false, main = false;
    std::unique_ptr<FleetSim> sim;
};

// Max-min fair shares of `total` among demands with weights (water-filling).
std::vector<double> fair_shares(double total, const std::vector<double>& demand,
                                const std::vector<double>& w) {
    std::vector<double> fair(demand.size(), 0);
    std::vector<bool> fixed(demand.size(), false);
    double left = total;
    for (;;) {
        double wsum = 0;
        for (size_t i = 0; i < demand.size(); ++i)
            if (!fixed[i]) wsum += w[i];
        if (wsum <= 0) break;
        bool changed = false;
        for (size_t i = 0; i < demand.size(); ++i)
            if (!fixed[i] && demand[i] <= left * w[i] / wsum) {
                fair[i] = demand[i];
                fixed[i] = true;
                left -= demand[i];
                changed = true;
            }
        if (!changed) {
            for (size_t i = 0; i < demand.size(); ++i)
                if (!fixed[i]) fair[i] = left * w[i] / wsum;
            break;
        }
    }
    return fair;
}

class TenantsRun : public StagedRun {
  public:
    explicit TenantsRun(const Params& p) : StagedRun("tenants", p), p_(p) {
        add_step("generating tenants", 1, [this] { setup(); });
        add_stage("simulating", 10, [this](const Deadline& d) { return simulate(d); });
        add_step("report", 0.5, [this] { report_all(); });
    }

  private:
    void setup();
    double simulate(const Deadline& d);
    void report_all();
    bool in_window(const RequestOutcome& o) const { return o.arrival_ms >= w0_ && o.arrival_ms < w1_; }
    RequestSummary well_behaved(const FleetSim& s) const {
        return summarize_requests(s.outcomes(),
                                  [this](const RequestOutcome& o) { return o.tenant != 0 && in_window(o); });
    }

    Params p_;
    FleetConfig base_;
    std::shared_ptr<const Workload> all_, solo_;
    std::vector<TenantRun> runs_;
    size_t next_ = 0;
    double w0_ = 0, w1_ = 0;
    std::string error_;
};

void TenantsRun::setup() {
    const std::vector<TenantSpec> specs = tenant_specs(p_);
    const double dur = p_.num("duration_s");
    const uint64_t seed = uint64_t(p_.integer("seed"));
    all_ = std::make_shared<const Workload>(tenant_workload(specs, dur, seed));
    std::vector<bool> inc(specs.size(), true);
    inc[0] = false;
    solo_ = std::make_shared<const Workload>(tenant_workload(specs, dur, seed, inc));
    w0_ = p_.num("burst_start_s") * 1000.0;
    w1_ = w0_ + p_.num("burst_s") * 1000.0;
    base_ = fleet_config(p_);
    base_.tenants.assign(specs.size(), TenantConfig{});
    base_.drr_quantum_tokens = p_.num("drr_quantum");
    const CostModel cm(base_.model, base_.hardware, base_.gpus, base_.efficiency);
    base_.bucket_rate_tokens_per_s = p_.num("bucket_share") * double(base_.instances) *
                                     cm.prefill_tokens_per_s(base_.max_batch_tokens, 4096);
    if (std::string e = check_fleet_size(*all_, base_); !e.empty()) {
        error_ = e;
        return;
    }
    const QueuePolicy chosen = *parse_queue_policy(p_.str("mechanism"));
    const bool quota = p_.flag("quotas");
    auto add = [&](std::string label, QueuePolicy q, bool qt, bool solo, bool main) {
        FleetConfig c = base_;
        c.queue = q;
        c.quotas = qt;
        runs_.push_back(
            {std::move(label), q, qt, solo, main, std::make_unique<FleetSim>(solo ? solo_ : all_, c)});
    };
    add("this run", chosen, quota, false, true);
    add("well-behaved tenants alone", chosen, quota, true, false);
    add("no isolation (FCFS, shared cache)", QueuePolicy::fcfs, false, false, false);
    for (size_t k = 0; k < queue_policy_ids().size(); ++k) {
        const QueuePolicy q = QueuePolicy(k);
        if ((q == chosen && quota) || (q == QueuePolicy::fcfs && !quota)) continue;
        add(std::string(queue_policy_labels()[k]) + ", cache quotas", q, true, false, false);
    }
    if (!runs_[0].sim->error().empty()) error_ = runs_[0].sim->error();
}

double TenantsRun::simulate(const Deadline& d) {
    if (!error_.empty()) return 1.0;
    return run_in_turn(runs_, next_, d);
}

void TenantsRun::report_all() {
    Report& r = report_;
    if (!error_.empty()) {
        r.check("Run within the memory budget", false, "refused: " + error_);
        return;
    }
    const FleetSim& s = *runs_[0].sim;
    const FleetSim& solo = *runs_[1].sim;
    const FleetSim& none = *runs_[2].sim;
    const FleetSummary f = summarize_fleet(s);
    const double price = p_.num("price_per_gpu_hour");
    report_core_scalars(r, s, f, price);
    const RequestSummary wb = well_behaved(s), wb_solo = well_behaved(solo), wb_none = well_behaved(none);
    const double base = std::max(wb_solo.ttft_ms.p99, 1e-9);
    r.scalar("well_behaved_ttft_p99_ms", "Well-behaved tenants' TTFT p99 during the burst", "ms",
             wb.ttft_ms.p99, true);
    r.scalar("solo_ttft_p99_ms", "... in their solo run", "ms", wb_solo.ttft_ms.p99, true);
    r.scalar("isolation_ratio", "... ratio, this mechanism", "x", wb.ttft_ms.p99 / base, true).help =
        "Well-behaved tenants' p99 TTFT over requests arriving during the burst, divided by the same in "
        "their solo run: 1 is perfect isolation.";
    r.scalar("no_isolation_ratio", "... ratio without isolation (FCFS, shared cache)", "x",
             wb_none.ttft_ms.p99 / base, true);
    const RequestSummary noisy = summarize_requests(
        s.outcomes(), [this](const RequestOutcome& o) { return o.tenant == 0 && in_window(o); });
    r.scalar("noisy_ttft_p99_ms", "Bursting tenant's TTFT p99 during the burst", "ms", noisy.ttft_ms.p99);

    // ---- per tenant ----
    const uint32_t T = uint32_t(base_.tenants.size());
    std::vector<double> demand(T, 0), served(T, 0), weight(T, 1);
    for (const RequestOutcome& o : s.outcomes()) {
        const double tok = double(o.prompt) + double(o.output);
        if (in_window(o)) demand[o.tenant] += tok;
        if (o.completed && o.finish_ms >= w0_ && o.finish_ms < w1_) served[o.tenant] += tok;
    }
    double total_served = 0;
    for (double x : served) total_served += x;
    const std::vector<double> fair = fair_shares(total_served, demand, weight);
    std::vector<double> ratio;
    Table tt{"Tenants during the burst (this run)",
             {"tenant", "role", "requests", "TTFT p50", "TTFT p99", "solo TTFT p99", "KV-visible hit",
              "state-usable hit", "share of tokens served", "entitlement", "served / fair share"},
             {},
             {"", "", "requests", "ms", "ms", "ms", "fraction", "fraction", "fraction", "fraction", "ratio"}};
    for (uint32_t t = 0; t < T; ++t) {
        auto win = [&](const RequestOutcome& o) { return o.tenant == t && in_window(o); };
        const RequestSummary x = summarize_requests(s.outcomes(), win);
        const RequestSummary all_t =
            summarize_requests(s.outcomes(), [&](const RequestOutcome& o) { return o.tenant == t; });
        const double solo_p99 = t == 0 ? 0.0 : summarize_requests(solo.outcomes(), win).ttft_ms.p99;
        const double fr = fair[t] > 0 ? served[t] / fair[t] : 1.0;
        ratio.push_back(fr);
        tt.rows.push_back({"tenant " + std::to_string(t), std::string(t == 0 ? "bursting" : "well-behaved"),
                           double(x.requests), x.ttft_ms.p50, x.ttft_ms.p99, solo_p99, all_t.hit_kv(),
                           all_t.hit_state(), total_served > 0 ? served[t] / total_served : 0.0,
                           1.0 / double(T), fr});
    }
    r.tables.push_back(std::move(tt));
    r.scalar("jain_tenants", "Jain's index over tenants (served / max-min fair share)", "", jain_index(ratio))
        .help =
        "Each tenant's tokens completed during the burst over its max-min fair share of all tokens completed "
        "then (weighted water-filling, capped by what it asked for).";

    // ---- mechanisms compared ----
    Table mt{"Mechanisms compared (same workload)",
             {"run", "well-behaved TTFT p99", "vs solo", "bursting TTFT p99", "well-behaved state-usable hit",
              "TTFT p99 (all)", "preemptions"},
             {},
             {"", "ms", "x", "ms", "fraction", "ms", "count"}};
    for (const TenantRun& x : runs_) {
        if (x.solo) continue;
        const RequestSummary a = well_behaved(*x.sim);
        const RequestSummary n = summarize_requests(
            x.sim->outcomes(), [this](const RequestOutcome& o) { return o.tenant == 0 && in_window(o); });
        const RequestSummary hits =
            summarize_requests(x.sim->outcomes(), [](const RequestOutcome& o) { return o.tenant != 0; });
        const FleetSummary fx = summarize_fleet(*x.sim);
        mt.rows.push_back({x.main ? "this run: " + std::string(queue_policy_labels()[size_t(x.queue)]) +
                                        (x.quota ? ", cache quotas" : ", shared cache")
                                  : x.label,
                           a.ttft_ms.p99, a.ttft_ms.p99 / base, n.ttft_ms.p99, hits.hit_state(),
                           fx.all.ttft_ms.p99, double(fx.all.preemptions)});
    }
    r.tables.push_back(std::move(mt));

    // TTFT over time of the well-behaved tenants: p90 per bin of arrival time.
    {
        const double end = p_.num("duration_s") * 1000.0;
        const int bins = 60;
        const std::string plot = "Well-behaved tenants' TTFT by arrival time (p90 per bin)";
        for (const TenantRun* x : {&runs_[1], &runs_[0], &runs_[2]}) {
            std::vector<std::vector<double>> b(bins);
            for (const RequestOutcome& o : x->sim->outcomes())
                if (o.tenant != 0 && o.completed && o.arrival_ms < end)
                    b[size_t(std::min(bins - 1, int(o.arrival_ms / end * bins)))].push_back(o.ttft_ms());
            Series se;
            se.name = x->solo ? "alone" : x->main ? "this run" : "no isolation";
            se.plot = plot;
            se.x_label = "arrival time (s)";
            se.y_label = "TTFT p90 (ms)";
            se.x_unit = "s";
            se.y_unit = "ms";
            se.log_y = true;
            for (int i = 0; i < bins; ++i) {
                if (b[size_t(i)].empty()) continue;
                std::sort(b[size_t(i)].begin(), b[size_t(i)].end());
                se.x.push_back((double(i) + 0.5) * end / bins / 1000.0);
                se.y.push_back(std::max(percentile_sorted(b[size_t(i)], 0.9), 1e-3));
            }
            r.series.push_back(std::move(se));
        }
    }
    std::vector<std::pair<std::string, RequestSummary>> lat;
    for (uint32_t t = 0; t < T; ++t)
        lat.push_back(
            {"tenant " + std::to_string(t) + (t == 0 ? " (bursting)" : ""),
             summarize_requests(s.outcomes(), [&](const RequestOutcome& o) { return o.tenant == t; })});
    report_latency_table(r, "Latency per tenant, whole run (simulated, roofline estimate)", lat);
    report_load_series(r, s);
    report_instances(r, s);
    report_timeline(r, s, "Instances over time (this run)");

    // ---- checks ----
    for (const TenantRun& x : runs_) report_fleet_checks(r, *x.sim, x.main ? "" : x.label);
    report_model_notes(r, s);
    const double tol = p_.num("tolerance");
    if (runs_[0].queue != QueuePolicy::fcfs) {
        r.check("With isolation, the well-behaved tenants' p99 TTFT stays within " + format_sig(tol, 3) +
                    " x their solo run while tenant 0 bursts",
                wb.ttft_ms.p99 <= tol * wb_solo.ttft_ms.p99,
                format_sig(wb.ttft_ms.p99, 4) + " ms vs " + format_sig(wb_solo.ttft_ms.p99, 4) +
                    " ms alone (" + format_sig(wb.ttft_ms.p99 / base, 3) + " x); without isolation " +
                    format_sig(wb_none.ttft_ms.p99, 4) + " ms (" + format_sig(wb_none.ttft_ms.p99 / base, 3) +
                    " x), over " + format_grouped(double(wb.requests)) +
                    " requests arriving during the burst");
    } else {
        r.notes.push_back(
            "No isolation mechanism is selected: the well-behaved tenants' p99 TTFT during the burst is " +
            format_sig(wb.ttft_ms.p99 / base, 3) + " x their solo run.");
    }
    r.check("The solo run has the same well-behaved requests", wb_solo.requests == wb.requests,
            format_grouped(double(wb_solo.requests)) + " vs " + format_grouped(double(wb.requests)) +
                " well-behaved requests arriving during the burst");
    r.notes.push_back(std::to_string(T) + " tenants, " + format_grouped(double(all_->requests.size())) +
                      " requests; tenant 0 bursts x" + format_sig(p_.num("burst_factor"), 3) + " from " +
                      format_sig(w0_ / 1000, 3) + " s for " + format_sig(p_.num("burst_s"), 3) + " s with " +
                      format_sig(p_.num("noisy_user_len"), 3) +
                      "-token messages. Latency figures of the burst count requests that arrived during it.");
    if (runs_[0].queue == QueuePolicy::token_bucket)
        r.notes.push_back("Token buckets refill at " + format_si(base_.bucket_rate_tokens_per_s, 3) +
                          " uncached tokens/s for the whole fleet, split by weight.");
}

}  // namespace

Experiment make_tenants_experiment() {
    Experiment e;
    e.number = 12;
    e.id = "tenants";
    e.title = "Budget isolation between tenants";
    e.component = "fleet scheduling";
    e.purpose =
        "One tenant bursts with long prompts: do the others notice? FCFS, token buckets, deficit round robin "
        "on uncached tokens and per-tenant cache quotas, against the well-behaved tenants' solo run.";
    e.how_it_works =
        "The fleet of module 11 serves several tenants, each running chat sessions over its own system "
        "prompt. Tenant 0 bursts: for a while it starts sessions many times as often, with long messages. "
        "The same well-behaved requests are also served alone (the solo run), so every figure has its "
        "baseline.\n\nMechanisms, applied where each instance admits waiting requests:\n- FCFS: no "
        "isolation; the burst's backlog is served first.\n- Token buckets: each tenant's bucket refills at "
        "its share of a fleet-wide rate of uncached tokens; a request waits until its bucket holds its cost. "
        "Not work conserving: an idle instance may wait (llm-d's flow control holds requests at the gateway "
        "in the same spirit).\n- Deficit round robin (Shreedhar and Varghese, 1996) with cost = uncached "
        "prompt tokens, as NVIDIA Dynamo's router queue: tenants take turns, each admitting up to a quantum "
        "of uncached tokens per round; the prefill budget of each iteration then goes first to the tenants "
        "with the fewest running requests, so fair queueing reaches the forward pass too.\n- Per-tenant "
        "quotas: each tenant may hold at most its weight's share of the running state slots and of the "
        "concurrent prefills of an instance, and gets its own prefix-cache namespace (engines namespace by "
        "cache_salt: vLLM folds it into block hashes, SGLang keys on it) with its weight's share of the "
        "state and KV capacity, so the burst cannot evict the others' checkpoints. SGLang and vLLM have no "
        "such quotas (reference/serving.md §5). In this simulation the quotas do most of the isolating: with "
        "quotas even FCFS keeps the well-behaved tenants near their solo run (the comparison table shows "
        "it).\n\nFigures: each tenant's TTFT p50/p99 over requests arriving during the burst, against the "
        "solo run; each tenant's share of the tokens completed during the burst against its entitlement; "
        "Jain's fairness index over served / max-min fair share.\n\nSources: reference/serving.md §5 (Dynamo "
        "DRR on uncached tokens, llm-d flow control, cache_salt namespaces), §6.";
    e.where_it_does_not_pay =
        "Isolation moves delay, it does not create capacity: the bursting tenant's requests wait longer, and "
        "its p99 TTFT grows with every mechanism.\n\n- Queue order cannot help once a tenant's requests hold "
        "the running slots: a long prefill that was admitted keeps its chunks. Isolation is only as good as "
        "the number of concurrent prefills is small.\n- Token buckets sized too low leave GPUs idle while "
        "requests wait (they are not work conserving); sized too high they do nothing.\n- Cache quotas waste "
        "capacity a quiet tenant does not use, and split shared prefixes: tenants with a common system "
        "prompt no longer share it.\n- Deficit round robin counts uncached prompt tokens, as Dynamo does; "
        "decode work (long outputs) is not charged, so a tenant with short prompts and long outputs is "
        "under-charged.";
    e.params = tenants_params();
    e.validate = [](const Params& p) {
        std::vector<ParamIssue> out = validate_fleet_params(p);
        if (p.num("burst_start_s") >= p.num("duration_s"))
            out.push_back({ParamIssue::error, "burst_start_s", "the burst starts after the run ends"});
        if (!(p.num("burst_s") > 0))
            out.push_back({ParamIssue::error, "burst_s", "the burst needs a positive length"});
        return out;
    };
    e.start = [](const Params& p) { return std::make_unique<TenantsRun>(p); };
    e.live = false;
    return e;
}

K3_REGISTER_EXPERIMENT(make_tenants_experiment);

}  // namespace k3
