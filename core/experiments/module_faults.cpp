// Module 13 `faults`: an instance crashes or is drained during a fleet run; its requests recompute
// elsewhere, resume from checkpoints replicated to a host tier, or migrate live. A consistency guard
// lets a request resume only where its KV and its recurrent state sit at the same position.
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/base/numfmt.h"
#include "core/experiments/fleet_report.h"
#include "core/experiments/registry.h"

namespace k3 {

namespace {

const std::vector<std::string> kMoves = {"everything", "kv_and_checkpoint"};
const std::vector<std::string> kMoveLabels = {"KV and the current state", "KV and the last checkpoint"};

std::vector<ParamSpec> faults_params() {
    auto f = [](ParamSpec s) { return s.in_group("Fault"); };
    std::vector<ParamSpec> v = {
        f(ParamSpec::choice("fault", "Fault", {"crash", "drain"}, "crash",
                            {"crash (everything on the instance is lost)", "drain (planned maintenance)"})
              .describe("A crash loses the instance's memory at once; a drain stops new work and lets the "
                        "running requests finish or migrate.")),
        f(ParamSpec::integer("fault_instance", "Instance", "", 0, 63, 0)
              .describe("Which instance (0-based) crashes or drains; must be below the instance count.")),
        f(ParamSpec::real("fault_at", "When", "fraction", 0, 1, 0.3)
              .describe("Fault time as a fraction of the time the requests arrive over.")),
        f(ParamSpec::real("down_s", "Down for", "s", 0, 3600, 30)
              .describe("The instance comes back empty after this long; 0 = never.")),
        f(ParamSpec::choice("recovery", "Recovery", recovery_ids(), "host_tier", recovery_labels())
              .describe("Recompute elsewhere; resume from checkpoints replicated to a host tier; or migrate "
                        "running requests live on a drain (module 10's blob; a crash falls back to the host "
                        "tier).")),
        f(ParamSpec::choice("migration_move", "Migration moves", kMoves, "everything", kMoveLabels)
              .active_when("recovery", "migrate")
              .describe(
                  "Everything (state at the request's position) or KV plus the last checkpoint: then the "
                  "state sits behind the KV and the guard recomputes the gap.")),
        f(ParamSpec::flag("guard", "Consistency guard", true)
              .describe("Resume only where KV and state sit at the same position. Off: resume at the KV "
                        "position on whatever state there is (vLLM #43090, LMCache #2863), counted as a "
                        "violation.")),
        f(ParamSpec::real("detect_ms", "Crash detection", "ms", 0, 60000, 500)
              .describe("Requests of a crashed instance are re-routed this long after the crash.")),
        f(ParamSpec::real("host_tier_gib", "Host tier capacity", "GiB", 0, 65536, 0)
              .describe("Host memory for replicated KV and checkpoints, half each; 0 = unbounded.")),
        ParamSpec::flag("compare", "Compare recoveries", true)
            .in_group("Run")
            .describe("Runs the same fault under every recovery, with and without the guard, and once "
                      "without a fault."),
    };
    for (auto&& s : fleet_workload_params()) v.push_back(std::move(s));
    for (auto&& s : fleet_router_params()) v.push_back(std::move(s));
    for (auto&& s : fleet_cache_params()) v.push_back(std::move(s));
    for (auto&& s : fleet_instance_params()) v.push_back(std::move(s));
    set_param_default(v, "load", 8.0);
    set_param_default(v, "router", std::string("state_aware"));
    return v;
}

struct FaultRun {
    std::string label;
    bool has_fault = true, main = false;
    Recovery recovery = Recovery::recompute;
    MigrationMove move = MigrationMove::everything;
    bool guard = true;
    std::unique_ptr<FleetSim> sim;
};

class FaultsRun : public StagedRun {
  public:
    explicit FaultsRun(const Params& p) : StagedRun("faults", p), p_(p) {
        add_step("loading the workload", 1, [this] { setup(); });
        add_stage("simulating", 10, [this](const Deadline& d) { return simulate(d); });
        add_step("report", 0.5, [this] { report_all(); });
    }

  private:
    void setup();
    double simulate(const Deadline& d);
    void report_all();
    // Requests arriving in [fault, fault + window).
    bool after(const RequestOutcome& o) const {
        return o.arrival_ms >= t_fault_ && o.arrival_ms < t_fault_ + window_;
    }

    Params p_;
    LoadedWorkload lw_;
    FleetConfig base_;
    std::vector<FaultRun> runs_;
    size_t next_ = 0;
    double t_fault_ = 0, window_ = 0;
    std::string error_;
};

void FaultsRun::setup() {
    lw_ = load_workload(fleet_workload_spec(p_));
    if (!lw_.workload) {
        error_ = lw_.error;
        return;
    }
    base_ = fleet_config(p_);
    if (std::string e = check_fleet_size(*lw_.workload, base_); !e.empty()) {
        error_ = e;
        return;
    }
    const auto& rq = lw_.workload->requests;
    const double span = rq.empty() ? 0 : rq.back().arrival_ms / base_.load;
    t_fault_ = p_.num("fault_at") * span;
    const double down = p_.num("down_s") * 1000.0;
    window_ = down > 0 ? down : std::max(span - t_fault_, 1.0);
    FaultSpec fs;
    fs.kind = p_.str("fault") == "drain" ? FaultKind::drain : FaultKind::crash;
    fs.instance = uint32_t(p_.i("fault_instance"));
    fs.at_ms = t_fault_;
    fs.down_ms = down;
    base_.detect_ms = p_.num("detect_ms");
    base_.host_tier_bytes = uint64_t(p_.num("host_tier_gib") * 1024.0 * 1024.0 * 1024.0);
    const Recovery rec = *parse_recovery(p_.str("recovery"));
    const MigrationMove mv = p_.str("migration_move") == "everything" ? MigrationMove::everything
                                                                      : MigrationMove::kv_and_checkpoint;
    const bool guard = p_.flag("guard");
    auto add = [&](std::string label, bool fault, Recovery r, MigrationMove m, bool g, bool main) {
        FleetConfig c = base_;
        if (fault) c.faults = {fs};
        c.recovery = r;
        c.migration_move = m;
        c.guard = g;
        runs_.push_back(
            {std::move(label), fault, main, r, m, g, std::make_unique<FleetSim>(lw_.workload, c)});
    };
    add("this run", true, rec, mv, guard, true);
    add("no fault", false, Recovery::recompute, MigrationMove::everything, guard, false);
    if (p_.flag("compare")) {
        add("no fault", false, Recovery::recompute, MigrationMove::everything, !guard, false);
        // A crash cannot migrate (that recovery falls back to the host tier); a drain does not need the
        // host tier (running requests finish where they are unless they migrate).
        struct Option {
            Recovery r;
            MigrationMove m;
            const char* label;
        };
        const std::vector<Option> options =
            fs.kind == FaultKind::crash
                ? std::vector<Option>{{Recovery::recompute, MigrationMove::everything, "recompute elsewhere"},
                                      {Recovery::host_tier, MigrationMove::everything, "host tier"}}
                : std::vector<Option>{
                      {Recovery::recompute, MigrationMove::everything, "let running requests finish"},
                      {Recovery::migrate, MigrationMove::everything, "migrate KV + state"},
                      {Recovery::migrate, MigrationMove::kv_and_checkpoint, "migrate KV + last checkpoint"}};
        for (const Option& o : options)
            for (bool g : {true, false}) {
                const bool same_recovery =
                    o.r == rec ||
                    (fs.kind == FaultKind::drain && rec == Recovery::host_tier &&
                     o.r == Recovery::recompute) ||
                    (fs.kind == FaultKind::crash && rec == Recovery::migrate && o.r == Recovery::host_tier);
                if (same_recovery && (o.r != Recovery::migrate || o.m == mv) && g == guard) continue;
                add(std::string(o.label) + (g ? ", guard" : ", no guard"), true, o.r, o.m, g, false);
            }
    }
    if (!runs_[0].sim->error().empty()) error_ = runs_[0].sim->error();
}

double FaultsRun::simulate(const Deadline& d) {
    if (!error_.empty()) return 1.0;
    return run_in_turn(runs_, next_, d);
}

void FaultsRun::report_all() {
    Report& r = report_;
    if (!error_.empty()) {
        r.check("Workload and configuration accepted", false, error_);
        return;
    }
    const FleetSim& s = *runs_[0].sim;
    const FleetSim& calm = *runs_[1].sim;
    // The run without a fault with the same guard setting: the baseline of the extra work.
    auto calm_for = [this](bool guard) -> const FleetSim& {
        for (const FaultRun& x : runs_)
            if (!x.has_fault && x.guard == guard) return *x.sim;
        return *runs_[1].sim;
    };
    const FleetSummary f = summarize_fleet(s), fc = summarize_fleet(calm);
    const double price = p_.num("price_per_gpu_hour");
    report_core_scalars(r, s, f, price);
    const FaultOutcome& fo = s.faults()[0];
    const auto win = [this](const RequestOutcome& o) { return after(o); };
    const RequestSummary hit = summarize_requests(s.outcomes(), win),
                         calm_hit = summarize_requests(calm.outcomes(), win);
    const double extra_work = double(f.all.prefill_work) - double(fc.all.prefill_work);
    r.scalar("requests_moved", "Requests moved off the instance", "requests", double(fo.requests_moved),
             true);
    r.scalar("lost_tokens", "Computed tokens lost", "tokens", double(fo.lost_tokens), true).help =
        "Context the moved requests had computed on the failed instance and could not take along.";
    r.scalar("recompute_tokens", "Extra prefill vs the run without a fault", "tokens", extra_work, true)
        .help =
        "Prefill tokens computed in this run beyond the same workload without the fault (same guard): lost "
        "work, cache contents lost with the instance, re-prefills elsewhere; routing changes after the fault "
        "move it either way, so it can be negative.";
    r.scalar("cached_tokens_lost", "KV tokens the instance's cache held", "tokens",
             double(fo.cached_tokens_lost));
    r.scalar("ttft_p99_after_ms", "TTFT p99 after the fault", "ms", hit.ttft_ms.p99, true).help =
        "Requests arriving between the fault and the instance's return (or the end).";
    r.scalar("ttft_p99_after_no_fault_ms", "... same requests without the fault", "ms", calm_hit.ttft_ms.p99);
    r.scalar("latency_spike", "TTFT p99 spike", "x",
             calm_hit.ttft_ms.p99 > 0 ? hit.ttft_ms.p99 / calm_hit.ttft_ms.p99 : 0, true);
    r.scalar("time_to_recover_s", "Time to recover", "s",
             fo.recovered_ms >= 0 ? (fo.recovered_ms - fo.spec.at_ms) / 1000.0 : 0, true)
        .help = "From the fault until the last moved request was running again.";
    if (fo.drained_ms >= 0)
        r.scalar("time_to_drain_s", "Time to drain", "s", (fo.drained_ms - fo.spec.at_ms) / 1000.0);
    r.scalar("consistency_violations", "Consistency violations", "resumes",
             double(s.totals().violations + s.totals().tainted_resumes), true)
        .help =
        "Resumes where KV and state did not sit at the same position, plus resumes from a checkpoint written "
        "by "
        "such a request: silent wrong output in a real engine. Zero with the guard.";
    r.scalar("guard_recomputed_tokens", "Tokens the guard recomputed", "tokens",
             double(s.totals().guard_held_back))
        .help = "KV-visible tokens beyond the state-usable position that the guard refused to skip.";
    r.scalar("host_restores", "Resumes from the host tier", "requests", double(s.totals().host_restores));
    r.scalar("migrated_bytes", "Bytes migrated", "B", double(fo.migrated_bytes));

    // ---- recoveries compared ----
    Table t{"Recoveries compared (same fault, same workload)",
            {"run", "requests moved", "lost tokens", "extra prefill", "TTFT p99 after", "spike",
             "time to recover", "violations", "of which moved requests", "host restores", "migrated",
             "bytes moved", "failed"},
            {},
            {"", "requests", "tokens", "tokens", "ms", "x", "s", "resumes", "resumes", "requests", "requests",
             "B", "requests"}};
    // Extra prefill is against the run without a fault under the same guard (the guard itself costs work).
    for (const FaultRun& x : runs_) {
        const FleetSummary fx = summarize_fleet(*x.sim);
        const RequestSummary hx = summarize_requests(x.sim->outcomes(), win);
        const uint64_t w0 = summarize_fleet(calm_for(x.guard)).all.prefill_work;
        const double ex = double(fx.all.prefill_work) - double(w0);
        if (!x.has_fault) {
            t.rows.push_back({x.label + (x.guard ? ", guard" : ", no guard"), 0.0, 0.0, 0.0, hx.ttft_ms.p99,
                              hx.ttft_ms.p99 / std::max(calm_hit.ttft_ms.p99, 1e-9), 0.0,
                              double(x.sim->totals().violations + x.sim->totals().tainted_resumes), 0.0, 0.0,
                              0.0, 0.0, double(fx.all.failed)});
            continue;
        }
        const FaultOutcome& o = x.sim->faults()[0];
        t.rows.push_back(
            {x.main ? "this run" : x.label, double(o.requests_moved), double(o.lost_tokens), ex,
             hx.ttft_ms.p99, calm_hit.ttft_ms.p99 > 0 ? hx.ttft_ms.p99 / calm_hit.ttft_ms.p99 : 0.0,
             o.recovered_ms >= 0 ? (o.recovered_ms - o.spec.at_ms) / 1000.0 : 0.0,
             double(x.sim->totals().violations + x.sim->totals().tainted_resumes),
             double(x.sim->totals().violations_moved), double(o.host_restores), double(o.migrated),
             double(o.host_bytes + o.migrated_bytes), double(fx.all.failed)});
    }
    r.tables.push_back(std::move(t));

    // TTFT by arrival time, with and without the fault.
    {
        const auto& rq = s.outcomes();
        double end = 0;
        for (const RequestOutcome& o : rq) end = std::max(end, o.arrival_ms);
        const int bins = 80;
        for (const FleetSim* x : {&calm, &s}) {
            std::vector<std::vector<double>> b(bins);
            for (const RequestOutcome& o : x->outcomes())
                if (o.completed && end > 0)
                    b[size_t(std::min(bins - 1, int(o.arrival_ms / end * bins)))].push_back(o.ttft_ms());
            Series se;
            se.name = x == &s ? "with the fault" : "without";
            se.plot = "TTFT by arrival time (p90 per bin)";
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
    report_latency_table(r, "Latency (simulated, roofline estimate)",
                         {{"all, with the fault", f.all},
                          {"all, without", fc.all},
                          {"arriving after the fault", hit},
                          {"same, without the fault", calm_hit}});
    report_load_series(r, s);
    report_instances(r, s);
    report_timeline(r, s, "Instances over time (the fault's instance goes down)");

    // ---- checks ----
    for (const FaultRun& x : runs_) report_fleet_checks(r, *x.sim, x.main ? "" : x.label);
    report_model_notes(r, s);
    for (const FaultRun& x : runs_)
        if (x.guard) {
            const uint64_t v = x.sim->totals().violations + x.sim->totals().tainted_resumes;
            r.check((x.main ? std::string() : x.label + ": ") +
                        "With the guard, no request resumed on a mismatched state",
                    v == 0, format_grouped(double(v)) + " violations");
        }
    if (runs_[0].has_fault && fo.spec.kind == FaultKind::drain && runs_[0].recovery == Recovery::migrate &&
        runs_[0].move == MigrationMove::everything)
        r.check("Live migration of KV and state lost no computed work", fo.lost_tokens == 0,
                format_grouped(double(fo.lost_tokens)) + " tokens lost, " +
                    format_grouped(double(fo.migrated)) + " requests migrated");
    r.notes.push_back(
        "Fault: " + std::string(fo.spec.kind == FaultKind::crash ? "crash" : "drain") + " of instance " +
        std::to_string(fo.spec.instance) + " at " + format_sig(fo.spec.at_ms / 1000.0, 4) + " s" +
        (fo.spec.down_ms > 0 ? ", back empty after " + format_sig(fo.spec.down_ms / 1000.0, 4) + " s"
                             : ", never back") +
        ". Transfers over " + base_.link.name + " at line rate, one after the other per instance.");
    if (!runs_[0].guard)
        r.notes.push_back(
            "Without the guard a request resumes at its KV-visible position on the deepest state it "
            "has: a real engine would produce wrong tokens from there on, silently (vLLM "
            "#43090, LMCache #2863: ~40 % garbled outputs).");
}

}  // namespace

Experiment make_faults_experiment() {
    Experiment e;
    e.number = 13;
    e.id = "faults";
    e.title = "Faults, recovery and consistency";
    e.component = "fleet scheduling";
    e.purpose =
        "An instance crashes or drains mid-run: lost work, recompute, latency spike and time to recover "
        "under three recoveries, and how many requests would resume on a state that does not match their KV "
        "without a consistency guard.";
    e.how_it_works =
        "The fleet of module 11 runs a workload; at the chosen time one instance crashes (its memory, "
        "running requests and prefix cache are gone; requests are re-routed once the crash is detected) or "
        "is drained (no new work; queued requests leave at once).\n\nRecoveries:\n- Recompute elsewhere: a "
        "moved request is routed again and prefills its prompt plus the tokens it had already generated, "
        "from whatever the new instance's cache holds (vLLM's recompute preemption).\n- Host tier: every "
        "instance replicates what it caches (KV and checkpoints) to a fleet-wide host tier over the link, as "
        "prefills and requests complete; replication in flight at the crash is lost. A moved request fetches "
        "its deepest replicated prefix if that beats the new instance's cache, paying the transfer time "
        "(SGLang HiCache, LMCache).\n- Live migration on a drain: each running request's KV and state travel "
        "to another instance (module 10's blob) and it continues where it stopped; a crash cannot migrate "
        "and falls back to the host tier.\n\nThe consistency guard: a hybrid request may resume only where "
        "its KV and its recurrent state sit at the same position. KV is often deeper than the deepest "
        "checkpoint (checkpoints every N tokens, evicted states, a migration that moves KV with the last "
        "checkpoint). With the guard the request resumes at the state and recomputes the gap; without it, it "
        "resumes at the KV position on a state from elsewhere, which in a real engine silently corrupts its "
        "output (vLLM #43090/#47491, LMCache #2863, SGLang #22493). Checkpoints such a request writes are "
        "marked, and later resumes from them are counted too.\n\nSources: reference/serving.md §4 (what must "
        "survive preemption and migration; losing the state is silent corruption), §6 items 4, 6, 15.";
    e.where_it_does_not_pay =
        "- Replicating to a host tier costs link bandwidth on every prefill, fault or no fault, and pays "
        "only for the requests in flight at a crash and for prefixes the other instances do not hold anyway; "
        "on a workload of short, unshared prompts recomputing is as fast as fetching.\n- Live migration "
        "moves the whole KV of long contexts over the link: at 50 GB/s a 100k-token Kimi-Linear context "
        "(about 800 MB of MLA cache plus a 43 MB state) takes about 17 ms, cheaper than recomputing it, but "
        "a drain of many such requests queues them behind one another on the instance's link.\n- The guard "
        "costs recompute: every token between a request's checkpoint and its KV position is computed again. "
        "Without it that work is saved and the output is wrong.\n- A crash detected late (detect_ms) adds "
        "that delay to every moved request; nothing here models health-check traffic or partial failures.";
    e.params = faults_params();
    e.validate = [](const Params& p) {
        std::vector<ParamIssue> out = validate_fleet_params(p);
        if (p.i("fault_instance") >= p.i("instances"))
            out.push_back({ParamIssue::error, "fault_instance",
                           "instance " + p.text("fault_instance") + " does not exist (" +
                               p.text("instances") + " instances)"});
        if (p.i("instances") < 2)
            out.push_back({ParamIssue::error, "instances", "a fault needs a second instance to recover on"});
        return out;
    };
    e.data_files = [](const Params& p) {
        return p.str("trace") == kMooncakeTraceName ? std::vector<std::string>{kMooncakeTraceFile}
                                                    : std::vector<std::string>{};
    };
    e.start = [](const Params& p) { return std::make_unique<FaultsRun>(p); };
    e.live = false;
    return e;
}

K3_REGISTER_EXPERIMENT(make_faults_experiment);

}  // namespace k3
