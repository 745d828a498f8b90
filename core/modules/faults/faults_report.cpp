// Module 13 `faults`: what the fault cost against the run without it, the recoveries compared, TTFT
// over time, the checks (every run's, the guard's, live migration's, the handoffs the fault cut), notes.
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/lifecycle/migration_cost.h"
#include "core/modules/faults/faults.h"

namespace k3 {

namespace {

uint64_t violations(const FleetSim& s) { return s.totals().violations + s.totals().tainted_resumes; }

double recovery_s(const FaultOutcome& o) {
    return o.recovered_ms >= 0 ? (o.recovered_ms - o.spec.at_ms) / 1000.0 : 0.0;
}

// The requests arriving after the fault, in run `s`.
RequestSummary hit_by_fault(const FaultsResult& f, const FleetSim& s) {
    return summarize_requests(s.outcomes(), [&f](const RequestOutcome& o) { return f.after_fault(o); });
}

double resumed(const FaultOutcome& o, RecoverySource s) { return double(o.resumed_from[size_t(s)]); }

// Where the moved requests resumed, what the instance's own host tier lost with it, and (disaggregated)
// the handoffs the fault cut.
void recovery_sources(const FaultOutcome& fo, Report& r) {
    r.scalar("resumed_recompute", "Moved requests that recomputed (from the new instance's cache)",
             "requests", resumed(fo, RecoverySource::recompute));
    r.scalar("resumed_instance_host", "Moved requests that loaded from the new instance's host tier",
             "requests", resumed(fo, RecoverySource::instance_host));
    r.scalar("resumed_remote_tier", "Moved requests restored from the remote tier", "requests",
             resumed(fo, RecoverySource::remote_tier));
    r.scalar("resumed_migrated", "Moved requests resumed from their migration", "requests",
             resumed(fo, RecoverySource::migration));
    r.scalar("host_tokens_lost", "KV tokens the instance's own host tier held (lost)", "tokens",
             double(fo.host_tokens_lost));
    uint64_t bytes = 0;
    for (const FaultOutcome::CutTransfer& c : fo.cut_transfers) bytes += c.bytes;
    r.scalar("transfers_cut", "Prefill-to-decode handoffs the fault cut", "transfers",
             double(fo.cut_transfers.size()));
    r.scalar("transfer_bytes_lost", "... their bytes, lost", "B", double(bytes));
}

void scalars(const FaultsResult& f, Report& r) {
    const FleetSim &s = *f.runs[0].sim, &calm = *f.runs[1].sim;
    const FaultOutcome& fo = s.faults()[0];
    const RequestSummary hit = hit_by_fault(f, s), calm_hit = hit_by_fault(f, calm);
    r.scalar("requests_moved", "Requests moved off the instance", "requests", double(fo.requests_moved),
             true);
    r.scalar("lost_tokens", "Computed tokens lost", "tokens", double(fo.lost_tokens), true).help =
        "Context the moved requests had computed on the failed instance and could not take along.";
    r.scalar("recompute_tokens", "Extra prefill vs the run without a fault", "tokens",
             double(summarize_fleet(s).all.prefill_work) - double(summarize_fleet(calm).all.prefill_work),
             true);
    r.scalar("cached_tokens_lost", "KV tokens the instance's cache held", "tokens",
             double(fo.cached_tokens_lost));
    r.scalar("ttft_p99_after_ms", "TTFT p99 after the fault", "ms", hit.ttft_ms.p99, true).help =
        "Requests arriving between the fault and the instance's return (or the end).";
    r.scalar("ttft_p99_after_no_fault_ms", "... same requests without the fault", "ms", calm_hit.ttft_ms.p99);
    r.scalar("latency_spike", "TTFT p99 spike", "x",
             calm_hit.ttft_ms.p99 > 0 ? hit.ttft_ms.p99 / calm_hit.ttft_ms.p99 : 0, true);
    r.scalar("time_to_recover_s", "Time to recover", "s", recovery_s(fo), true).help =
        "From the fault until the last moved request was running again.";
    if (fo.drained_ms >= 0)
        r.scalar("time_to_drain_s", "Time to drain", "s", (fo.drained_ms - fo.spec.at_ms) / 1000.0);
    r.scalar("consistency_violations", "Consistency violations", "resumes", double(violations(s)), true);
    r.scalar("guard_recomputed_tokens", "Tokens the guard recomputed", "tokens",
             double(s.totals().guard_held_back))
        .help = "KV-visible tokens beyond the state-usable position that the guard refused to skip.";
    r.scalar("host_restores", "Resumes from the remote tier", "requests", double(s.totals().host_restores));
    r.scalar("migrated_bytes", "Bytes migrated", "B", double(fo.migrated_bytes));
    recovery_sources(fo, r);
}

// The texts' worked example, for this run's model, link and hardware: what moving one long context
// live costs against recomputing it (module 10's blob and roofline estimate).
void migration_example(const FaultsResult& f, Report& r) {
    using lifecycle::MigrationStrategy;
    const double tokens = 100000;
    const FleetSim& s = *f.runs[0].sim;
    const lifecycle::MigrationCosts c = lifecycle::migration_costs(
        f.config.model, {tokens, 0}, f.config.link, s.cost_model().instance_hardware(), f.config.efficiency);
    const lifecycle::StrategyCost &move = c[MigrationStrategy::move_all],
                                  &again = c[MigrationStrategy::recompute];
    r.scalar("link_gb_per_s", "Link bandwidth (one direction)", "GB/s", f.config.link.bytes_per_s / 1e9);
    r.scalar("example_context_tokens", "Example: a context of", "tokens", tokens);
    r.scalar("example_kv_bytes", "... its attention KV", "B", move.kv_bytes);
    r.scalar("example_state_bytes", "... its recurrent state", "B", move.state_bytes);
    r.scalar("example_move_ms", "... moved live", "ms", move.transfer_s * 1000.0).help =
        "Module 10's blob (the state, the KV of every token, token ids, sampler) at the link's line rate.";
    r.scalar("example_recompute_ms", "... recomputed instead", "ms", again.total_s * 1000.0).help =
        "Roofline estimate of prefilling the whole context again on one instance, alone.";
}

// Extra prefill is against the run without a fault under the same guard (the guard itself costs work).
void recoveries(const FaultsResult& f, Report& r) {
    Table& t = r.add_table(
        make_table("Recoveries compared (same fault, same workload)", {{"run", ""},
                                                                       {"requests moved", "requests"},
                                                                       {"lost tokens", "tokens"},
                                                                       {"extra prefill", "tokens"},
                                                                       {"TTFT p99 after", "ms"},
                                                                       {"spike", "x"},
                                                                       {"time to recover", "s"},
                                                                       {"violations", "resumes"},
                                                                       {"of which moved requests", "resumes"},
                                                                       {"recomputed", "requests"},
                                                                       {"instance host tier", "requests"},
                                                                       {"remote tier", "requests"},
                                                                       {"migrated", "requests"},
                                                                       {"bytes moved", "B"},
                                                                       {"failed", "requests"}}));
    const double calm_p99 = hit_by_fault(f, *f.runs[1].sim).ttft_ms.p99;
    for (const FaultRun& x : f.runs) {
        const FleetSummary fx = summarize_fleet(*x.sim);
        const double p99 = hit_by_fault(f, *x.sim).ttft_ms.p99;
        const double extra =
            double(fx.all.prefill_work) - double(summarize_fleet(f.calm_for(x.guard)).all.prefill_work);
        if (!x.has_fault) {
            t.add({x.label + (x.guard ? ", guard" : ", no guard"), 0.0, 0.0, 0.0, p99,
                   p99 / std::max(calm_p99, 1e-9), 0.0, double(violations(*x.sim)), 0.0, 0.0, 0.0, 0.0, 0.0,
                   0.0, double(fx.all.failed)});
            continue;
        }
        const FaultOutcome& o = x.sim->faults()[0];
        t.add({x.main ? "this run" : x.label, double(o.requests_moved), double(o.lost_tokens), extra, p99,
               calm_p99 > 0 ? p99 / calm_p99 : 0.0, recovery_s(o), double(violations(*x.sim)),
               double(x.sim->totals().violations_moved), resumed(o, RecoverySource::recompute),
               resumed(o, RecoverySource::instance_host), resumed(o, RecoverySource::remote_tier),
               double(o.migrated), double(o.host_bytes + o.migrated_bytes), double(fx.all.failed)});
    }
}

void plots_and_tables(const FaultsResult& f, Report& r) {
    const FleetSim &s = *f.runs[0].sim, &calm = *f.runs[1].sim;
    double end = 0;
    for (const RequestOutcome& o : s.outcomes()) end = std::max(end, o.arrival_ms);
    for (const FleetSim* x : {&calm, &s})
        r.add_series(ttft_by_arrival(x == &s ? "with the fault" : "without",
                                     "TTFT by arrival time (p90 per bin)", x->outcomes(), end, 80,
                                     [](const RequestOutcome& o) { return o.completed; }));
    report_latency_table(r, "Latency (simulated, roofline estimate)",
                         {{"all, with the fault", summarize_fleet(s).all},
                          {"all, without", summarize_fleet(calm).all},
                          {"arriving after the fault", hit_by_fault(f, s)},
                          {"same, without the fault", hit_by_fault(f, calm)}});
    report_load_series(r, s);
    report_instances(r, s);
    report_timeline(r, s, "Instances over time (the fault's instance goes down)");
}

std::string tagged_key(const std::string& key, const RunTag& tag) {
    return tag.key.empty() ? key : key + "_" + tag.key;
}

std::string tagged_name(const FaultRun& x, const std::string& name) {
    return (x.main ? std::string() : x.label + ": ") + name;
}

// The resume audit (FleetSim::resume_audit), not the guard's own count: every resume's state record
// against the KV position it continues from.
void guard_check(const FaultRun& x, Report& r) {
    const ResumeAudit& a = x.sim->resume_audit();
    r.check(tagged_key("guard_no_violations", x.tag),
            tagged_name(x, "With the guard, no request resumed on a mismatched state"), a.inconsistent() == 0,
            format_grouped(double(a.resumes)) + " resumes audited against the records of their states: " +
                format_grouped(double(a.mismatched)) +
                " on a state computed at another position than the KV they continue from, " +
                format_grouped(double(a.from_mismatched)) + " on a state written after such a resume" +
                (a.first.empty() ? "" : "; first: " + a.first));
}

// From the migrations' own records (FaultOutcome::migrations): what each request had computed at
// the source against what its blob carried and where the destination resumed it.
void migration_check(const FaultRun& x, Report& r) {
    const FaultOutcome& fo = x.sim->faults()[0];
    uint64_t computed = 0, kept = 0, never = 0;
    for (const MigrationRecord& m : fo.migrations) {
        computed += m.computed;
        kept += m.kept();
        never += m.resumed_at < 0;
    }
    const uint64_t lost = computed - kept;
    r.check(tagged_key("migration_lost_nothing", x.tag),
            tagged_name(x, "Live migration of KV and state lost no computed work"),
            lost == 0 && fo.lost_tokens == lost,
            format_grouped(double(fo.migrations.size())) + " requests migrated with " +
                format_grouped(double(computed)) + " tokens computed at the source; " +
                format_grouped(double(kept)) + " of them carried (KV and state) and resumed from at the " +
                "destination, " + format_grouped(double(never)) + " requests never resumed; " +
                format_grouped(double(lost)) + " tokens lost; the lost-work counter says " +
                format_grouped(double(fo.lost_tokens)));
}

// Whether the request of a cut handoff was admitted on a prefill instance after the cut.
bool prefilled_again(const FleetSim& s, const FaultOutcome::CutTransfer& c) {
    const std::vector<AdmissionRecord>& a = s.admissions();
    for (size_t i = c.admissions_before; i < a.size(); ++i)
        if (a[i].req == c.request && a[i].instance < s.config().pd.prefill_instances) return true;
    return false;
}

// Disaggregated: the bytes sent are those that arrived and those lost, the lost ones exactly the
// fault's own record of the handoffs it cut, and each request whose handoff was cut went back through
// the prefill stage (an admission on a prefill instance after the cut) or failed for a reason: none
// decoded from KV that never arrived.
void cut_transfers_check(const FaultRun& x, Report& r) {
    const FleetSim& s = *x.sim;
    const FleetTotals& t = s.totals();
    const FaultOutcome& fo = s.faults()[0];
    uint64_t cut = 0, skipped = 0;
    for (const FaultOutcome::CutTransfer& c : fo.cut_transfers) {
        cut += c.bytes;
        skipped += !prefilled_again(s, c) && s.outcomes()[c.request].failed == FailReason::none;
    }
    r.check(
        tagged_key("pd_cut_transfers_accounted", x.tag),
        tagged_name(x, "Every handoff the fault cut was lost, logged, and prefilled again"),
        t.pd_bytes_sent == t.pd_bytes_arrived + t.pd_bytes_lost && t.pd_bytes_lost == cut && skipped == 0,
        format_grouped(double(t.pd_bytes_sent)) + " B sent = " + format_grouped(double(t.pd_bytes_arrived)) +
            " B arrived + " + format_grouped(double(t.pd_bytes_lost)) + " B lost; the fault cut " +
            format_grouped(double(fo.cut_transfers.size())) + " handoffs of " + format_grouped(double(cut)) +
            " B, " + format_grouped(double(skipped)) + " of whose requests went on without prefilling again");
}

void checks(const FaultsResult& f, Report& r) {
    for (const FaultRun& x : f.runs) report_fleet_checks(r, *x.sim, x.tag);
    report_running_state(r, *f.runs[0].sim);
    report_model_notes(r, *f.runs[0].sim);
    for (const FaultRun& x : f.runs)
        if (x.guard) guard_check(x, r);
    for (const FaultRun& x : f.runs)
        if (x.has_fault && x.sim->faults()[0].spec.kind == FaultKind::drain &&
            x.recovery == Recovery::migrate && x.move == MigrationMove::everything &&
            !x.sim->faults()[0].migrations.empty())
            migration_check(x, r);
    for (const FaultRun& x : f.runs)
        if (x.has_fault && f.config.pd.on()) cut_transfers_check(x, r);
}

// Which stage instance k serves, disaggregated (" (a prefill instance, of 2)"); colocated, nothing.
std::string stage_of(const FleetConfig& c, uint32_t k) {
    if (!c.pd.on()) return "";
    const bool prefill = k < c.pd.prefill_instances;
    const uint32_t n = prefill ? c.pd.prefill_instances : c.instances - c.pd.prefill_instances;
    return std::string(" (a ") + (prefill ? "prefill" : "decode") + " instance, of " + std::to_string(n) +
           ")";
}

void notes(const FaultsResult& f, Report& r) {
    const FaultOutcome& fo = f.runs[0].sim->faults()[0];
    r.notes.push_back(
        "Fault: " + std::string(fo.spec.kind == FaultKind::crash ? "crash" : "drain") + " of instance " +
        std::to_string(fo.spec.instance) + stage_of(f.config, fo.spec.instance) + " at " +
        format_sig(fo.spec.at_ms / 1000.0, 4) + " s" +
        (fo.spec.down_ms > 0 ? ", back empty after " + format_sig(fo.spec.down_ms / 1000.0, 4) + " s"
                             : ", never back") +
        ". Transfers over " + f.config.link.name + " at line rate, one after the other per instance.");
    if (!f.runs[0].guard)
        r.notes.push_back(
            "Without the guard a request resumes at its KV-visible position on the deepest state it has: a "
            "real "
            "engine would produce wrong tokens from there on, silently (vLLM #43090, LMCache #2863: ~40 % "
            "garbled "
            "outputs).");
}

}  // namespace

void report_faults(const FaultsParams& p, const FaultsResult& f, Report& r) {
    report_core_scalars(r, summarize_fleet(*f.runs[0].sim), p.cost.price_per_gpu_hour);
    scalars(f, r);
    report_host_tier(r, *f.runs[0].sim);
    report_pd(r, *f.runs[0].sim);
    migration_example(f, r);
    recoveries(f, r);
    plots_and_tables(f, r);
    checks(f, r);
    notes(f, r);
}

}  // namespace k3
