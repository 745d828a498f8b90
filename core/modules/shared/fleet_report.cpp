#include "core/modules/shared/fleet_report.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/base/numfmt.h"
#include "core/experiments/module_doc.h"
#include "core/modules/shared/fleet_batch_checks.h"
#include "core/modules/shared/fleet_engine_report.h"
#include "core/modules/shared/fleet_recount.h"
#include "core/modules/shared/fleet_router_checks.h"

namespace k3 {

std::string fleet_figure_help(const char* key) { return doc_figure_help("fleet_report", key); }

namespace {

Series in_flight_series(std::string name) {
    Series s = make_series(std::move(name), "Requests in flight (queued + running)", "simulated time (s)",
                           "requests", "s", "requests");
    s.style = SeriesStyle::step;
    return s;
}

// How a run's requests ended, against the workload: one end each (completed, or failed for a reason
// other than stalling), and a completed request generated exactly its output, in time order.
struct OutcomeTally {
    uint64_t completed = 0, failed = 0, stalled = 0, no_end = 0, wrong_output = 0, out_of_order = 0;
};
OutcomeTally tally(const FleetSim& s) {
    OutcomeTally t;
    const auto& requests = s.workload().requests;
    const auto& out = s.outcomes();
    for (size_t i = 0; i < out.size(); ++i) {
        const RequestOutcome& o = out[i];
        const bool failed = o.failed != FailReason::none;
        t.completed += o.completed;
        t.failed += failed && o.failed != FailReason::stalled;
        t.stalled += o.failed == FailReason::stalled;
        t.no_end += o.completed == failed;  // neither, or both
        if (!o.completed) continue;
        t.wrong_output += o.generated != requests[i].output_len;
        t.out_of_order += !(o.arrival_ms <= o.first_token_ms && o.first_token_ms <= o.finish_ms);
    }
    return t;
}

void work_check(Report& r, const FleetSim& s, const std::string& key, const std::string& name) {
    const WorkRecount w = recount_work(s);
    r.check(key,
            name + "No token of work unaccounted: the iterations' ledger equals a recount from the requests",
            w.agree(),
            "context tokens computed: " + format_count(w.ledger_forward) + " by the iterations, " +
                format_count(w.recount_forward) +
                " by the requests' records (prompt - resumed + output - 1 for each completed request's last "
                "attempt, plus " +
                format_count(w.abandoned) +
                " of attempts that did not complete); output tokens: " + format_count(w.ledger_output) +
                " by the iterations, " + format_count(w.recount_output) + " by the requests");
}

void hits_check(Report& r, const FleetSim& s, const std::string& key, const std::string& name) {
    const HitRecount h = recount_hits(s);
    std::string detail = format_count(h.admissions) + " admissions claimed " +
                         format_count(h.claimed_tokens) +
                         " tokens of cache hits (KV-visible and resumed), each within the longest prefix it "
                         "shares with an earlier admission on its instance; " +
                         format_count(h.unbacked) + " exceed it";
    if (h.unbacked)
        detail += " (first: request " + format_count(h.first_req) + " on instance " +
                  format_count(h.first_instance) + " claims " + format_count(h.first_claimed) + " tokens, " +
                  format_count(h.first_bound) + " are shared with earlier requests there)";
    r.check(key,
            name +
                "Every cache hit is backed by tokens an earlier request brought to its instance (a recount "
                "over the routed requests' tokens, no tree)",
            h.unbacked == 0, detail);
}

// Every iteration's simulated time against the roofline of its batch evaluated request by request
// (the simulation times it with the cost model; core/fleet/batch_roofline.h is the second path).
void clock_check(Report& r, const FleetSim& s, const std::string& key, const std::string& name) {
    const FleetTotals& t = s.totals();
    r.check(key,
            name +
                "Every iteration lasts the step-model time of its batch, recounted request by request "
                "(core/fleet/batch_roofline.h)",
            t.clock_gaps == 0,
            format_count(t.iterations_timed) + " iterations: " + format_sig(t.clock_ms / 1000, 9) +
                " s on the simulated clock vs " + format_sig(t.roofline_ms / 1000, 9) +
                " s by the recount; largest gap of one iteration " + format_sig(t.worst_clock_gap, 3) +
                " of its time; " + format_count(t.clock_gaps) + " beyond the clock's rounding");
}

}  // namespace

void report_core_scalars(Report& r, const FleetSummary& f, double price) {
    const RequestSummary& a = f.all;
    r.scalar("token_hit_kv", "KV-visible token hit", "fraction", a.hit_kv(), true).help =
        fleet_figure_help("token_hit_kv");
    r.scalar("token_hit_state", "State-usable token hit", "fraction", a.hit_state(), true).help =
        fleet_figure_help("token_hit_state");
    r.scalar("hit_gap", "KV-visible minus state-usable", "fraction", a.hit_kv() - a.hit_state()).help =
        "Hit a KV-event router believes in but the engine cannot use (reference/serving.md §5).";
    r.scalar("ttft_p50_ms", "TTFT p50", "ms", a.ttft_ms.p50, true);
    r.scalar("ttft_p99_ms", "TTFT p99", "ms", a.ttft_ms.p99, true);
    r.scalar("tpot_p50_ms", "TPOT p50", "ms", a.tpot_ms.p50);
    r.scalar("e2e_p99_ms", "E2E p99", "ms", a.e2e_ms.p99);
    r.scalar("throughput_tokens_per_s", "Output throughput", "tokens/s", f.output_tokens_per_s, true).help =
        "Generated tokens over the time from the first arrival to the last completion (an estimate).";
    r.scalar("total_tokens_per_s", "Total throughput (prompt + output)", "tokens/s", f.total_tokens_per_s);
    r.scalar("load_imbalance", "Load imbalance (max / mean busy)", "ratio", f.load_imbalance);
    r.scalar("jain_index", "Jain's index over instance busy time", "", f.jain_busy);
    r.scalar("preemptions", "Preemptions", "count", double(a.preemptions));
    r.scalar("requests_completed", "Requests completed", "requests", double(a.completed));
    r.scalar("requests_failed", "Requests failed", "requests", double(a.failed));
    r.scalar("gpu_hours_busy", "GPU-hours busy (estimate)", "h", f.gpu_hours_busy);
    r.scalar("gpu_hours_provisioned", "GPU-hours provisioned (estimate)", "h", f.gpu_hours_provisioned);
    const double tokens = double(a.prompt_tokens + a.output_tokens);
    r.scalar("cost_per_million_tokens", "Cost per million tokens (busy GPU time, estimate)", "$",
             cost_per_million_tokens(f.gpu_hours_busy, price, tokens))
        .help = fleet_figure_help("cost_per_million_tokens");
}

void report_latency_table(Report& r, const std::string& name,
                          const std::vector<std::pair<std::string, RequestSummary>>& rows) {
    Table& t = r.add_table(make_table(name, {{"requests", ""},
                                             {"metric", ""},
                                             {"mean", "ms"},
                                             {"p50", "ms"},
                                             {"p90", "ms"},
                                             {"p99", "ms"},
                                             {"max", "ms"},
                                             {"count", "requests"}}));
    for (const auto& [label, s] : rows)
        for (const auto& [metric, pc] : std::vector<std::pair<const char*, const Percentiles*>>{
                 {"TTFT", &s.ttft_ms}, {"TPOT", &s.tpot_ms}, {"E2E", &s.e2e_ms}})
            t.add({label, std::string(metric), pc->mean, pc->p50, pc->p90, pc->p99, pc->max, double(pc->n)});
}

void report_instances(Report& r, const FleetSim& s) {
    Table& t = r.add_table(make_table("Instances", {{"instance", ""},
                                                    {"routed", "requests"},
                                                    {"completed", "requests"},
                                                    {"busy", "fraction"},
                                                    {"prefill tokens", "tokens"},
                                                    {"decode tokens", "tokens"},
                                                    {"iterations", "count"},
                                                    {"preemptions", "count"},
                                                    {"peak running", "requests"},
                                                    {"peak queue", "requests"},
                                                    {"cache KV tokens", "tokens"},
                                                    {"cache checkpoints", "count"},
                                                    {"checkpoints evicted", "count"},
                                                    {"down", "s"}}));
    const double span = std::max(s.totals().end_ms, 1e-9);
    const auto& stats = s.instance_stats();
    for (size_t k = 0; k < stats.size(); ++k) {
        const InstanceStats& x = stats[k];
        t.add({"instance " + std::to_string(k), double(x.routed), double(x.completed), x.busy_ms / span,
               double(x.prefill_tokens), double(x.decode_tokens), double(x.iterations), double(x.preemptions),
               double(x.peak_running), double(x.peak_queue), double(x.cache_kv_tokens),
               double(x.cache_states), double(x.cache_states_evicted), x.down_ms / 1000.0});
    }
}

void report_timeline(Report& r, const FleetSim& s, const std::string& name) {
    Timeline tl;
    tl.name = name;
    tl.time_label = "simulated time (s)";
    tl.categories = FleetSim::timeline_categories();
    for (uint32_t k = 0; k < s.config().instances; ++k) tl.lanes.push_back("instance " + std::to_string(k));
    for (const TimelineSpan& x : s.timeline())
        tl.spans.push_back(
            {int(x.lane), x.start_s, x.end_s, x.category,
             tl.categories[size_t(x.category)] + ", " + format_sig(x.end_s - x.start_s, 3) + " s"});
    r.timelines.push_back(std::move(tl));
}

void report_load_series(Report& r, const FleetSim& s) {
    const auto& samples = s.load_samples();
    if (samples.empty()) return;
    const uint32_t n = s.config().instances;
    if (n <= 8) {
        for (uint32_t k = 0; k < n; ++k) {
            Series& x = r.add_series(in_flight_series("instance " + std::to_string(k)));
            for (const LoadSample& l : samples) x.add(l.t_ms / 1000.0, double(l.in_flight[k]));
        }
    } else {
        Series lo = in_flight_series("least loaded instance"), mean = in_flight_series("mean"),
               hi = in_flight_series("most loaded instance");
        for (const LoadSample& l : samples) {
            const auto [least, most] = std::minmax_element(l.in_flight.begin(), l.in_flight.end());
            double sum = 0;
            for (uint32_t v : l.in_flight) sum += v;
            const double t = l.t_ms / 1000.0;
            lo.add(t, *least);
            mean.add(t, sum / double(n));
            hi.add(t, *most);
        }
        r.add_series(std::move(lo));
        r.add_series(std::move(mean));
        r.add_series(std::move(hi));
    }
    bool any_held = false;
    for (const LoadSample& l : samples) any_held |= l.held > 0;
    if (!any_held) return;
    Series& held = r.add_series(in_flight_series("held at the gateway or moving"));
    for (const LoadSample& l : samples) held.add(l.t_ms / 1000.0, double(l.held));
}

Series ttft_by_arrival(std::string name, std::string plot, const std::vector<RequestOutcome>& v,
                       double end_ms, int bins, const RequestFilter& keep) {
    std::vector<std::vector<double>> b(static_cast<size_t>(bins));
    for (const RequestOutcome& o : v)
        if (end_ms > 0 && keep(o))
            b[size_t(std::min(bins - 1, int(o.arrival_ms / end_ms * bins)))].push_back(o.ttft_ms());
    Series s = make_series(std::move(name), std::move(plot), "arrival time (s)", "TTFT p90 (ms)", "s", "ms");
    s.log_y = true;
    for (int i = 0; i < bins; ++i) {
        std::vector<double>& bin = b[size_t(i)];
        if (bin.empty()) continue;
        std::sort(bin.begin(), bin.end());
        s.add((double(i) + 0.5) * end_ms / bins / 1000.0, std::max(percentile_sorted(bin, 0.9), 1e-3));
    }
    return s;
}

namespace {

std::string pages_of(const RunningStateSlots& x) {
    return std::to_string(x.pages) + " page(s) of " +
           format_grouped(double(x.page_bytes_per_layer * x.linear_layers)) + " B";
}

// The state bytes the working pools held, read from the pools after every admission, against the
// per-request accounting (running_state_slots: vLLM's pages from spec::vllm_pages).
// With an engine's one pool a slot is one state of the engine's size (engine_state_slot_bytes), the
// running requests' and the cache's alike, and the running cap is the engine's.
void state_bytes_check(Report& r, const FleetSim& s, const std::string& key, const std::string& name) {
    const FleetTotals& t = s.totals();
    const FleetConfig& c = s.config();
    const RunningStateSlots a = running_state_slots(c);
    const bool engine = c.engine != CacheEngine::ideal;
    const PoolModel plain = tp_layout(c.model, c.gpus, c.attention_dp).pool_model();
    const uint64_t slot =
        engine ? engine_state_slot_bytes(c, plain.state_bytes_per_layer) * a.linear_layers : a.bytes();
    const uint32_t cap = engine ? s.running_cap(0) : a.slots;
    const bool bytes_ok = t.state_bytes_held == t.states_held * slot;
    r.check(key, name + "The working pools held each running request's state as the accounting sizes it",
            bytes_ok && t.peak_running <= cap,
            "after " + format_count(t.state_admissions) + " admissions the pools held " +
                format_count(t.state_bytes_held) + " B of state in " + format_count(t.states_held) +
                " slot-moments; the accounting gives " + format_count(t.states_held * slot) + " B (" +
                (engine ? format_count(slot) + " B per state slot of the engine's pool"
                        : pages_of(a) + " per request") +
                "); at most " + std::to_string(t.peak_running) + " requests ran on one instance, of " +
                std::to_string(cap) + (engine ? " its running cap allows" : " slots"));
}

// The tokens the decode steps yielded against the acceptance length A (DecodeTally::yields).
void acceptance_check(Report& r, const FleetSim& s, const std::string& key, const std::string& name) {
    const FleetConfig& c = s.config();
    const double a = SpecAcceptance(c.spec_state == SpecState::off ? 1.0 : c.acceptance_len).length();
    const DecodeTally d = decode_steps_of(s);
    r.check(key, name + "Decode steps yielded the acceptance length per step, no more", d.yields(a),
            format_count(d.tokens) + " tokens from " + format_count(d.steps) + " decode steps of " +
                format_count(d.requests) +
                " requests: " + format_sig(d.steps ? double(d.tokens) / double(d.steps) : 0.0, 4) +
                " per step; A = " + format_sig(a, 4) + " allows " + format_sig(d.least(a), 6) +
                " < tokens <= " + format_sig(d.most(a), 6) + " (a request's last step stops at its output)");
}

// Every byte the host tiers' transfers moved, counted as each was sent, against where it went when
// the transfer ended: into the tier or the request, or lost with an instance that crashed meanwhile.
void host_tier_check(Report& r, const FleetSim& s, const std::string& key, const std::string& name) {
    const FleetTotals& t = s.totals();
    const bool writes = t.host_write_bytes ==
                        t.host_write_arrived_bytes + t.host_write_lost_bytes + t.host_write_pending_bytes;
    const bool loads = t.host_load_bytes == t.host_load_arrived_bytes + t.host_load_lost_bytes;
    r.check(key, name + "Every byte to and from the host tiers arrived or was lost with its instance",
            writes && loads,
            format_count(t.host_writes) + " writes sent " + format_count(t.host_write_bytes) +
                " B: " + format_count(t.host_write_arrived_bytes) + " B written, " +
                format_count(t.host_write_lost_bytes) + " B lost, " +
                format_count(t.host_write_pending_bytes) + " B still in flight at the end; " +
                format_count(t.host_loads) + " loads sent " + format_count(t.host_load_bytes) +
                " B: " + format_count(t.host_load_arrived_bytes) + " B arrived, " +
                format_count(t.host_load_lost_bytes) + " B lost");
}

// Prefill/decode disaggregation: every byte sent arrived or was lost with a fault (the run ends after
// the last request, which waits for its own transfer); each transfer's bytes are its KV tokens and one
// state, and its KV what the handoff convention sends of the context its prefill handed off (N, or
// N - 1) less what the decode-side cache held; with the guard, every decode-side resume sat on a state
// at its KV position (the resume audit, which reads the states' own records).
void pd_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
               const std::string& name) {
    const FleetTotals& t = s.totals();
    const FleetConfig& c = s.config();
    r.check(key("pd_transfer_bytes_conserved"),
            name + "Every byte a prefill instance sent reached its decoder or was lost with a fault",
            t.pd_bytes_sent == t.pd_bytes_arrived + t.pd_bytes_lost,
            format_count(t.pd_transfers) + " transfers sent " + format_count(t.pd_bytes_sent) + " B; " +
                format_count(t.pd_bytes_arrived) + " B arrived, " + format_count(t.pd_bytes_lost) +
                " B lost");
    const CostModel& m = s.cost_model();
    uint64_t off = 0, sum = 0;
    std::string first;
    for (size_t i = 0; i < s.outcomes().size(); ++i) {
        const RequestOutcome& o = s.outcomes()[i];
        if (o.transfers == 0) continue;
        // Each handoff sends the context its prefill computed (at least the prompt), or that less one.
        const uint64_t sent = o.transfer_context - (c.pd.handoff == StateHandoff::slot ? 0 : o.transfers);
        const bool ok = o.transfer_bytes ==
                            o.transfer_kv_tokens * m.kv_bytes_per_token() + o.transfers * m.state_bytes() &&
                        o.transfer_context >= uint64_t(o.prompt) * o.transfers &&
                        o.transfer_kv_tokens <= sent && (c.pd.decode_cache || o.transfer_kv_tokens == sent);
        sum += o.transfer_bytes;
        if (!ok && off++ == 0)
            first = "request " + std::to_string(i) + ": " + format_count(o.transfer_bytes) + " B for " +
                    format_count(o.transfer_kv_tokens) + " KV tokens in " + format_count(o.transfers) +
                    " transfer(s) of a " + format_count(o.prompt) + "-token prompt";
    }
    r.check(key("pd_bytes_match_accounting"),
            name + "Each transfer moved its KV and one state, as the handoff convention sends them",
            off == 0 && sum == t.pd_bytes_sent,
            format_count(sum) + " B over the requests' records against " + format_count(t.pd_bytes_sent) +
                " B sent; " + format_count(off) + " transfers off their accounting" +
                (first.empty() ? "" : " (" + first + ")"));
    if (!c.guard) return;  // without the guard (module 13) the resumes are wrong by design
    const ResumeAudit& a = s.resume_audit();
    r.check(key("pd_decode_resumes_at_state"),
            name + "No decoder resumed a request on a state that is not at its KV position",
            a.inconsistent() == 0,
            format_count(a.resumes) + " resumes audited against their states' records: " +
                format_count(a.mismatched) + " on a state at another position or past their KV" +
                (a.first.empty() ? "" : " (" + a.first + ")"));
}

}  // namespace

void report_pd(Report& r, const FleetSim& s) {
    const FleetTotals& t = s.totals();
    std::vector<double> ms;
    for (const RequestOutcome& o : s.outcomes())
        if (o.transfer_ms >= 0) ms.push_back(o.transfer_ms);
    std::sort(ms.begin(), ms.end());
    r.scalar("transfer_bytes_per_request", "KV and state a request moved from prefill to decode (mean)", "B",
             t.pd_transfers ? double(t.pd_bytes_sent) / double(t.pd_transfers) : 0.0);
    r.scalar("transfer_ms_p50", "Prefill-to-decode transfer, queueing included (p50)", "ms",
             ms.empty() ? 0.0 : percentile_sorted(ms, 0.5));
    r.scalar("transfer_ms_p99", "Prefill-to-decode transfer, queueing included (p99)", "ms",
             ms.empty() ? 0.0 : percentile_sorted(ms, 0.99));
}

void report_host_tier(Report& r, const FleetSim& s) {
    const FleetTotals& t = s.totals();
    uint64_t prompt = 0;
    for (const RequestOutcome& o : s.outcomes()) prompt += o.prompt;
    r.scalar("host_hit_tokens", "Context tokens resumed from the host tiers beyond the device's", "tokens",
             double(t.host_hit_tokens));
    r.scalar("host_hit_share", "Host-tier hit over all prompt tokens", "fraction",
             prompt ? double(t.host_hit_tokens) / double(prompt) : 0.0);
    r.scalar("host_loads", "Loads from the host tiers", "requests", double(t.host_loads));
    r.scalar("host_write_bytes", "Bytes written through to the host tiers", "B", double(t.host_write_bytes));
    r.scalar("host_load_bytes", "Bytes loaded back from the host tiers", "B", double(t.host_load_bytes));
}

void report_running_state(Report& r, const FleetSim& s) {
    const FleetConfig& c = s.config();
    const RunningStateSlots& x = s.running_slots();
    r.scalar("state_pages_per_request", "State pages a running request holds", "pages", double(x.pages));
    r.scalar("state_bytes_per_request", "State bytes a running request holds", "B", double(x.bytes()));
    r.scalar("running_slots", "Running requests the working memory holds (state slots)", "requests",
             double(x.slots), true);
    r.scalar("max_running_per_instance", "Largest batch an instance may run (its running cap)", "requests",
             double(s.running_cap(0)));
    const DecodeTally d = decode_steps_of(s);
    r.scalar("tokens_per_decode_step", "Tokens a decode step yielded per request (measured)", "tokens",
             d.steps ? double(d.tokens) / double(d.steps) : 0.0);
    report_tp_layout(r, s);
    Table& t = r.add_table(make_table(
        "Running requests per instance by speculative decoding's state (N = " + std::to_string(c.draft_len) +
            (c.caching ? ", prefix caching: align mode" : ", no prefix caching") + "; working memory " +
            format_bytes(double(c.working_bytes)) + ")",
        {{"state", ""},
         {"pages per request", "pages"},
         {"state per request", "B"},
         {"requests that fit", "requests"},
         {"state slots", "requests"}}));
    for (size_t i = 0; i < spec_state_ids().size(); ++i) {
        const SpecState k = SpecState(i);
        if (k == SpecState::recoverssm && c.model.linear_name != "KDA") continue;
        const RunningStateSlots y = running_state_slots(c, k);
        t.add({spec_state_ids()[i], double(y.pages), double(y.bytes()), double(y.fit), double(y.slots)});
    }
}

void report_fleet_checks(Report& r, const FleetSim& s, const RunTag& tag) {
    const std::string name = tag.name.empty() ? "" : tag.name + ": ";
    auto key = [&](const char* k) { return tag.key.empty() ? std::string(k) : k + ("_" + tag.key); };
    const OutcomeTally n = tally(s);
    const uint64_t requests = s.workload().requests.size();
    r.check(key("requests_accounted"),
            name + "Every request completed with exactly its output tokens or failed for a reason",
            n.completed + n.failed == requests && n.stalled == 0 && n.no_end == 0 && n.wrong_output == 0 &&
                n.out_of_order == 0,
            format_count(n.completed) + " completed + " + format_count(n.failed) +
                " failed = " + format_count(n.completed + n.failed) + " of " + format_count(requests) +
                " requests of the workload; " + format_count(n.stalled) + " stalled; " +
                format_count(n.no_end) + " with no end or two; " + format_count(n.wrong_output) +
                " completed with other than their output length; " + format_count(n.out_of_order) +
                " with arrival, first token and finish out of order");
    work_check(r, s, key("work_ledgers_agree"), name);
    hits_check(r, s, key("hits_backed_by_routed_requests"), name);
    const std::string audit = s.audit();
    const uint64_t leases = s.leases_held(), owners = s.pool_owners();
    r.check(key("caches_released"), name + "Caches and pools consistent, everything released",
            audit.empty() && leases == 0 && owners == 0,
            audit.empty() ? format_count(leases) + " leases and " + format_count(owners) +
                                " page-pool owners left after the run (radix trees and pools audited)"
                          : audit);
    clock_check(r, s, key("iteration_times_match_roofline"), name);
    state_bytes_check(r, s, key("state_bytes_match_accounting"), name);
    acceptance_check(r, s, key("decode_steps_yield_acceptance"), name);
    // Without caching nothing is written to the host tier or read from it.
    if (s.config().host.on() && s.config().caching)
        host_tier_check(r, s, key("host_tier_bytes_conserved"), name);
    if (s.config().pd.on()) pd_checks(r, s, key, name);
    report_tp_checks(r, s, tag.key.empty() ? "" : "_" + tag.key, name);
    report_router_checks(r, s, key, name);
    report_batch_checks(r, s, key, name);
    report_shared_pool(r, s, tag);
    report_engine_check(r, s, key, name);
    if (tag.key.empty()) report_engine_scalars(r, s);
}

void report_model_notes(Report& r, const FleetSim& s) {
    const FleetConfig& c = s.config();
    const CostModel& m = s.cost_model();
    // A decode and a prefill batch, to give the times a scale.
    IterationWork d, pf;
    for (int i = 0; i < 32; ++i) d.add_decode(4096);
    pf.add_chunk(0, 8192);
    const Deployment& dep = m.deployment();
    const StepFactors& f = m.step_model().factors();
    r.notes.push_back(
        "Times are ESTIMATES of the calibrated step-time model (module 15 cost's; fitted on published "
        "measurements, not measured here): " +
        c.model.name + " on " + std::to_string(dep.gpus) + " x " + dep.gpu.name + ", tensor parallel " +
        std::to_string(dep.tp) + (dep.dp_attention ? " with DP attention" : "") +
        ", experts sharded over the ranks, step overhead of " + engine_name(dep.engine) +
        (c.engine == CacheEngine::ideal ? " (engine ideal takes the lowest fitted overheads)" : "") + ": " +
        format_sig(f.overhead_s[size_t(dep.engine)] * 1000, 3) + " ms a step, " +
        format_sig(f.prefill_layer_s[size_t(dep.engine)] * 1000, 3) +
        " ms a layer more with a prefill chunk (" + std::to_string(c.model.n_layers()) +
        " layers); each term at its fitted " + "fraction of peak (GEMMs " + format_sig(f.f_gemm * 100, 3) +
        " %, attention " + format_sig(f.f_attn * 100, 3) + " %, bandwidth " + format_sig(f.f_mem * 100, 3) +
        " %), all-reduces over NVLink. A decode step of 32 requests at 4,096 tokens: " +
        format_sig(m.seconds(d) * 1000, 3) +
        " ms; a prefill of 8,192 tokens: " + format_sig(m.seconds(pf) * 1000, 3) + " ms.");
    if (c.first_gpus.on()) {
        const CostModel& f0 = s.cost_model(0);
        r.notes.push_back("Instances 0 to " + std::to_string(c.first_gpus.instances - 1) + " run on " +
                          std::to_string(dep.gpus) + " x " + c.first_gpus.hardware.name +
                          " instead, with the same fitted factors: the same decode step takes " +
                          format_sig(f0.seconds(d) * 1000, 3) + " ms there, the same prefill " +
                          format_sig(f0.seconds(pf) * 1000, 3) + " ms.");
    }
    r.notes.push_back(
        "One state checkpoint: " + format_bytes(double(m.state_bytes())) +
        "; KV per token: " + format_bytes(double(m.kv_bytes_per_token())) + " (" +
        format_bytes(double(m.held_kv_bytes_per_token())) + " summed over the ranks holding it)" +
        (c.engine == CacheEngine::ideal
             ? ". The prefix cache's capacity and the working memory are separate budgets (engine "
               "ideal); a running request's working KV covers only what it computed."
             : ". Running requests and the prefix cache share each instance's one pool (below); a "
               "running request's own KV covers only what the tree does not hold for it."));
}

}  // namespace k3
