#include "core/experiments/fleet_report.h"

#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B"};
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint64_t kMaxTreeNodes = 3000000;  // about 300 MB of trees: the page's budget

bool has(const Params& p, const char* key) { return p.spec(key) != nullptr; }

}  // namespace

// ---- parameters ----

std::vector<ParamSpec> fleet_workload_params() {
    auto synth = [](ParamSpec s) { return s.in_group("Workload").active_when("trace", "synthetic"); };
    return {
        ParamSpec::text("trace", "Workload", "synthetic", {"synthetic", "mooncake"})
            .in_group("Workload")
            .describe(
                "\"synthetic\" (generated below), \"mooncake\" (the bundled Mooncake FAST'25 conversation "
                "trace: 12,031 requests over one hour, 145 M prompt tokens) or a path to a file in the "
                "Mooncake format."),
        synth(
            ParamSpec::choice("synthetic", "Synthetic workload", {"mix", "chat", "agentic", "shared"}, "mix", {"mix of all three", "multi-turn chat", "agentic branching", "shared system prompts"})
                .describe("Multi-turn chat (each turn extends its conversation), agent trees that fork off a "
                          "common prefix, single-turn requests sharing system prompts, or all three.")),
        synth(
            ParamSpec::integer("sessions", "Sessions", "sessions", 1, 4096, 96)
                .log()
                .describe("Chat sessions; the mix adds sessions/4 agent tasks and 2 x sessions shared-prompt "
                          "requests.")),
        ParamSpec::seed(
            "Seeds the synthetic workload and the randomised routers (power of two choices, the hash "
            "ring).")
            .in_group("Workload"),
        ParamSpec::real("load", "Load multiplier", "x", 0.05, 64, 1)
            .log()
            .in_group("Workload")
            .describe("Arrival times are divided by this: 2 replays the same requests twice as fast."),
    };
}

std::vector<ParamSpec> fleet_router_params() {
    auto aff = [](ParamSpec s) { return s.in_group("Router"); };
    return {
        ParamSpec::choice("router", "Router", router_ids(), "prefix", router_labels())
            .in_group("Router")
            .describe("Which instance a request goes to (How it works)."),
        aff(ParamSpec::real("cache_threshold", "Cache threshold", "fraction", 0, 1, 0.3)
                .describe(
                    "Prefix and state-aware affinity: route to the best match only if it covers more than "
                    "this share of the prompt (SGLang Model Gateway default 0.3).")),
        aff(ParamSpec::real("balance_abs", "Balance threshold (absolute)", "requests", 0, 4096, 64)
                .describe("Loads count as imbalanced when max - min exceeds this ... (SGLang default 64)")),
        aff(ParamSpec::real("balance_rel", "Balance threshold (relative)", "x", 1, 100, 1.5)
                .describe("... and max exceeds this multiple of min; then the least loaded instance gets the "
                          "request (SGLang default 1.5).")),
        aff(ParamSpec::real("load_factor", "Bounded-load factor", "x", 1, 4, 1.25)
                .active_when("router", "session")
                .describe(
                    "Session hashing: an instance takes a session only while its load stays within this "
                    "multiple of the mean (Mirrokni et al. 2018).")),
    };
}

std::vector<ParamSpec> fleet_cache_params() {
    auto g = [](ParamSpec s) { return s.in_group("Prefix cache"); };
    return {
        g(ParamSpec::choice("policy", "Checkpoint policy", policy_ids(), "interval", policy_labels())
              .describe("Where requests leave state checkpoints and which ones the tree keeps (module 5).")),
        g(ParamSpec::integer("interval", "Checkpoint interval", "tokens", 64, 65536, 512)
              .log()
              .describe("A checkpoint at every multiple of this position (a multiple of the 64-token kernel "
                        "chunk and of the page size).")),
        g(ParamSpec::integer("state_capacity", "State capacity per instance", "states", 0, 1e7, 0)
              .describe(
                  "Checkpoints each instance's prefix cache may hold; 0 = unbounded. LRU eviction leaves "
                  "tombstones: KV the router sees but no state to resume from.")),
        g(ParamSpec::integer("kv_capacity_tokens", "KV capacity per instance", "tokens", 0, 1e10, 0)
              .describe("Tokens of attention KV each instance's prefix cache may hold; 0 = unbounded.")),
        g(ParamSpec::integer("page_size", "KV page size (cache)", "tokens", 1, 64, 1)
              .log()
              .describe("The cache keeps whole pages only.")),
        g(ParamSpec::choice("lru_refresh", "LRU refresh on a hit", {"node", "path"}, "node",
                            {"matched node only", "whole path"})
              .describe("SGLang #31643: refreshing only the consumed node keeps hot sessions' deep states.")),
    };
}

std::vector<ParamSpec> fleet_instance_params() {
    auto inst = [](ParamSpec s) { return s.in_group("Instances"); };
    return {
        inst(ParamSpec::integer("instances", "Instances", "", 1, 64, 4)
                 .describe("Serving instances in the fleet.")),
        inst(ParamSpec::choice("preset", "Model", kPresets, "kimi-linear-48b", kPresetLabels)
                 .describe(
                     "Published configuration: state and KV bytes (module 2) and parameter counts for the "
                     "roofline.")),
        inst(ParamSpec::choice("hardware", "GPU", hardware_preset_ids(), "h100", hardware_preset_names())
                 .describe(
                     "Datasheet peak dense BF16 FLOP/s and HBM bandwidth: times are roofline estimates.")),
        inst(ParamSpec::integer("gpus", "GPUs per instance", "GPUs", 1, 16, 2)
                 .describe("Tensor parallel, taken as ideal (no communication cost). Kimi-Linear-48B's bf16 "
                           "weights (96 GB) need two 80 GB GPUs.")),
        inst(ParamSpec::real("working_gib", "Working memory per instance", "GiB", 1, 1024, 32)
                 .log()
                 .describe("Page pool for running requests: one state slot each plus KV pages for what they "
                           "compute; the prefix cache's capacity comes on top.")),
        inst(ParamSpec::integer("max_running", "Max running requests", "requests", 1, 1024, 64)
                 .log()
                 .describe("State slots of the working pool: the batch size limit.")),
        inst(ParamSpec::integer("max_batch_tokens", "Token budget per iteration", "tokens", 64, 65536, 8192)
                 .log()
                 .describe("Chunked prefill: decode tokens plus prefill chunks per iteration (vLLM "
                           "max_num_batched_tokens).")),
        inst(ParamSpec::integer("max_prefills", "Concurrent prefills", "requests", 1, 64, 2)
                 .describe("Requests prefilling at once (vLLM max_num_partial_prefills; SGLang runs one "
                           "chunked request).")),
        inst(ParamSpec::real("compute_efficiency", "Compute efficiency", "fraction", 0.05, 1, 0.5)
                 .describe("Share of the peak FLOP/s an engine reaches (an assumption).")),
        inst(ParamSpec::real("memory_efficiency", "Memory efficiency", "fraction", 0.05, 1, 0.8)
                 .describe("Share of the peak bandwidth an engine reaches (an assumption).")),
        ParamSpec::real("price_per_gpu_hour", "Price per GPU-hour", "$", 0.01, 100, 2.5)
            .in_group("Cost")
            .describe("Your price: money per million tokens = GPU-hours x price / millions of tokens."),
        ParamSpec::choice("link", "Link", link_preset_ids(), "ib-ndr", link_preset_names())
            .in_group("Cost")
            .describe("Instance to host tier and instance to instance: replication, restores and migration."),
    };
}

void set_param_default(std::vector<ParamSpec>& specs, const std::string& key, double v) {
    for (ParamSpec& s : specs)
        if (s.key == key) s.def = v;
}
void set_param_default(std::vector<ParamSpec>& specs, const std::string& key, const std::string& v) {
    for (ParamSpec& s : specs)
        if (s.key == key) s.def_text = v;
}

WorkloadSpec fleet_workload_spec(const Params& p) {
    WorkloadSpec w;
    w.trace = p.str("trace");
    if (has(p, "synthetic")) for (const SyntheticKindName& k : synthetic_kinds()) if (p.str("synthetic") == k.id) w.synthetic = k.kind;
    if (has(p, "sessions")) w.sessions = uint32_t(p.i("sessions"));
    if (has(p, "seed")) w.seed = uint64_t(p.integer("seed"));
    return w;
}

FleetConfig fleet_config(const Params& p) {
    FleetConfig c;
    c.model = *model_preset(has(p, "preset") ? p.str("preset") : "kimi-linear-48b");
    c.hardware = *hardware_preset(has(p, "hardware") ? p.str("hardware") : "h100");
    if (has(p, "gpus")) c.gpus = p.i("gpus");
    if (has(p, "compute_efficiency")) c.efficiency.compute = p.num("compute_efficiency");
    if (has(p, "memory_efficiency")) c.efficiency.memory = p.num("memory_efficiency");
    if (has(p, "instances")) c.instances = uint32_t(p.i("instances"));
    if (has(p, "working_gib")) c.working_bytes = uint64_t(p.num("working_gib") * kGiB);
    if (has(p, "max_running")) c.max_running = uint32_t(p.i("max_running"));
    if (has(p, "max_batch_tokens")) c.max_batch_tokens = uint32_t(p.i("max_batch_tokens"));
    if (has(p, "max_prefills")) c.max_prefills = uint32_t(p.i("max_prefills"));
    if (has(p, "router")) c.router.kind = *parse_router(p.str("router"));
    if (has(p, "cache_threshold")) c.router.cache_threshold = p.num("cache_threshold");
    if (has(p, "balance_abs")) c.router.balance_abs = p.num("balance_abs");
    if (has(p, "balance_rel")) c.router.balance_rel = p.num("balance_rel");
    if (has(p, "load_factor")) c.router.load_factor = p.num("load_factor");
    if (has(p, "policy")) c.policy.kind = *parse_policy(p.str("policy"));
    if (has(p, "interval")) c.policy.interval = uint32_t(p.i("interval"));
    c.policy.chunk = 64;
    if (has(p, "state_capacity")) c.cache.state_capacity = uint64_t(p.integer("state_capacity"));
    if (has(p, "kv_capacity_tokens")) c.cache.kv_capacity_tokens = uint64_t(p.integer("kv_capacity_tokens"));
    if (has(p, "page_size")) c.cache.page_size = uint32_t(p.i("page_size"));
    if (has(p, "lru_refresh"))
        c.cache.refresh = p.str("lru_refresh") == "path" ? LruRefresh::path : LruRefresh::node;
    if (has(p, "link")) c.link = *link_preset(p.str("link"));
    if (has(p, "load")) c.load = p.num("load");
    if (has(p, "seed")) c.seed = uint64_t(p.integer("seed"));
    return c;
}

std::vector<ParamIssue> validate_fleet_params(const Params& p) {
    std::vector<ParamIssue> out;
    if (has(p, "trace"))
        if (std::string e = check_trace_param(p.str("trace")); !e.empty())
            out.push_back({ParamIssue::error, "trace", e});
    const FleetConfig c = fleet_config(p);
    if (c.policy.interval % 64 != 0)
        out.push_back({ParamIssue::error, "interval",
                       "interval " + std::to_string(c.policy.interval) +
                           " is not a multiple of the 64-token kernel chunk: a resume from such a checkpoint "
                           "is not bitwise exact"});
    if (c.policy.interval % c.cache.page_size != 0)
        out.push_back({ParamIssue::error, "interval",
                       "interval " + std::to_string(c.policy.interval) +
                           " is not a multiple of the page size " + std::to_string(c.cache.page_size)});
    const MemoryAccount a = account_memory(c.model);
    const double states = double(c.max_running) * double(a.state_bytes);
    if (states + 256.0 * double(a.kv_bytes_per_token) * 16 > double(c.working_bytes))
        out.push_back({ParamIssue::error, "working_gib",
                       "working memory of " + format_bytes(double(c.working_bytes)) + " cannot hold " +
                           std::to_string(c.max_running) + " state slots of " +
                           format_bytes(double(a.state_bytes)) +
                           " and KV pages besides: raise it or lower max_running"});
    const MemoryPlan m = memory_plan(c);
    if (m.total() > m.device)
        out.push_back({ParamIssue::warning, "working_gib",
                       "weights (" + format_bytes(m.weights) + ") + working memory (" +
                           format_bytes(m.working) + ") + prefix cache at capacity (" +
                           format_bytes(m.cache_kv + m.cache_states) + ") exceed the " +
                           format_bytes(m.device) + " of " + std::to_string(c.gpus) + " x " +
                           c.hardware.name + (m.cache_bounded ? "" : " (and the cache is unbounded)")});
    return out;
}

std::string check_fleet_size(const Workload& w, const FleetConfig& c) {
    uint64_t tokens = 0;
    for (const Request& r : w.requests) tokens += r.cache_len();
    const uint64_t estimate = tokens / std::max<uint64_t>(c.policy.interval, 1) + w.requests.size() * 2;
    if (estimate <= kMaxTreeNodes) return {};
    return "up to " + format_grouped(double(estimate)) + " tree nodes (" + format_grouped(double(tokens)) +
           " tokens at one checkpoint per " + format_grouped(double(c.policy.interval)) +
           " tokens) exceed the limit of " + format_grouped(double(kMaxTreeNodes)) + "; raise the interval";
}

// ---- report parts ----

void report_latency_table(Report& r, const std::string& name,
                          const std::vector<std::pair<std::string, RequestSummary>>& rows) {
    Table t{name,
            {"requests", "metric", "mean", "p50", "p90", "p99", "max", "count"},
            {},
            {"", "", "ms", "ms", "ms", "ms", "ms", "requests"}};
    for (const auto& [label, s] : rows)
        for (const auto& [metric, pc] : std::vector<std::pair<const char*, const Percentiles*>>{
                 {"TTFT", &s.ttft_ms}, {"TPOT", &s.tpot_ms}, {"E2E", &s.e2e_ms}})
            t.rows.push_back(
                {label, std::string(metric), pc->mean, pc->p50, pc->p90, pc->p99, pc->max, double(pc->n)});
    r.tables.push_back(std::move(t));
}

void report_instances(Report& r, const FleetSim& s) {
    Table t{"Instances",
            {"instance", "routed", "completed", "busy", "prefill tokens", "decode tokens", "iterations",
             "preemptions", "peak running", "peak queue", "cache KV tokens", "cache checkpoints",
             "checkpoints evicted", "down"},
            {},
            {"", "requests", "requests", "fraction", "tokens", "tokens", "count", "count", "requests",
             "requests", "tokens", "count", "count", "s"}};
    const double span = std::max(s.totals().end_ms, 1e-9);
    const auto& st = s.instance_stats();
    for (size_t k = 0; k < st.size(); ++k) {
        const InstanceStats& x = st[k];
        t.rows.push_back({"instance " + std::to_string(k), double(x.routed), double(x.completed),
                          x.busy_ms / span, double(x.prefill_tokens), double(x.decode_tokens),
                          double(x.iterations), double(x.preemptions), double(x.peak_running),
                          double(x.peak_queue), double(x.cache_kv_tokens), double(x.cache_states),
                          double(x.cache_states_evicted), x.down_ms / 1000.0});
    }
    r.tables.push_back(std::move(t));
}

void report_timeline(Report& r, const FleetSim& s, const std::string& name) {
    Timeline tl;
    tl.name = name;
    tl.time_label = "simulated time (s)";
    tl.categories = FleetSim::timeline_categories();
    for (uint32_t k = 0; k < s.config().instances; ++k) tl.lanes.push_back("instance " + std::to_string(k));
    for (const TimelineSpan& x : s.timeline()) {
        Span sp;
        sp.lane = int(x.lane);
        sp.start = x.start_s;
        sp.end = x.end_s;
        sp.category = x.category;
        sp.label = tl.categories[size_t(x.category)] + ", " + format_sig(x.end_s - x.start_s, 3) + " s";
        tl.spans.push_back(std::move(sp));
    }
    r.timelines.push_back(std::move(tl));
}

void report_load_series(Report& r, const FleetSim& s) {
    const auto& smp = s.load_samples();
    if (smp.empty()) return;
    const uint32_t n = s.config().instances;
    const std::string plot = "Requests in flight (queued + running)";
    auto make = [&](std::string name) {
        Series x;
        x.name = std::move(name);
        x.plot = plot;
        x.x_label = "simulated time (s)";
        x.y_label = "requests";
        x.x_unit = "s";
        x.y_unit = "requests";
        x.style = SeriesStyle::step;
        return x;
    };
    if (n <= 8) {
        for (uint32_t k = 0; k < n; ++k) {
            Series x = make("instance " + std::to_string(k));
            for (const LoadSample& l : smp)
                x.x.push_back(l.t_ms / 1000.0), x.y.push_back(double(l.in_flight[k]));
            r.series.push_back(std::move(x));
        }
    } else {
        Series lo = make("least loaded instance"), mean = make("mean"), hi = make("most loaded instance");
        for (const LoadSample& l : smp) {
            const auto [a, b] = std::minmax_element(l.in_flight.begin(), l.in_flight.end());
            double sum = 0;
            for (uint32_t v : l.in_flight) sum += v;
            const double t = l.t_ms / 1000.0;
            lo.x.push_back(t), lo.y.push_back(*a);
            mean.x.push_back(t), mean.y.push_back(sum / double(n));
            hi.x.push_back(t), hi.y.push_back(*b);
        }
        r.series.push_back(std::move(lo));
        r.series.push_back(std::move(mean));
        r.series.push_back(std::move(hi));
    }
    bool any_held = false;
    for (const LoadSample& l : smp) any_held |= l.held > 0;
    if (any_held) {
        Series x = make("held at the gateway or moving");
        for (const LoadSample& l : smp) x.x.push_back(l.t_ms / 1000.0), x.y.push_back(double(l.held));
        r.series.push_back(std::move(x));
    }
}

void report_fleet_checks(Report& r, const FleetSim& s, const std::string& tag) {
    const std::string p = tag.empty() ? "" : tag + ": ";
    const auto& out = s.outcomes();
    uint64_t completed = 0, failed = 0, stalled = 0, gen = 0, wrong_out = 0, work = 0, over = 0, lost = 0;
    for (const RequestOutcome& o : out) {
        completed += o.completed;
        failed += o.failed != FailReason::none;
        stalled += o.failed == FailReason::stalled;
        gen += o.generated;
        wrong_out += o.completed && o.generated != o.output;
        work += o.prefill_work;
        over += o.state_hit > o.kv_hit;
    }
    const FleetTotals& t = s.totals();
    lost = t.lost_tokens;
    r.check(p + "Every request completed or was counted as failed",
            completed + failed == out.size() && stalled == 0 && wrong_out == 0,
            format_grouped(double(completed)) + " completed + " + format_grouped(double(failed)) +
                " failed = " + format_grouped(double(completed + failed)) + " of " +
                format_grouped(double(out.size())) + " requests; " + format_grouped(double(stalled)) +
                " stalled; " + format_grouped(double(wrong_out)) +
                " completed with a wrong number of output tokens");
    r.check(
        p + "No token of work unaccounted: iterations and requests agree",
        t.iter_prefill_tokens == work && t.iter_decode_tokens + t.iter_first_tokens == gen && lost <= work,
        "prefill: " + format_grouped(double(t.iter_prefill_tokens)) + " tokens computed by iterations, " +
            format_grouped(double(work)) + " by requests (" + format_grouped(double(lost)) +
            " of them thrown away by preemptions and faults); output: " +
            format_grouped(double(t.iter_decode_tokens)) + " decode steps + " +
            format_grouped(double(t.iter_first_tokens)) +
            " first tokens = " + format_grouped(double(t.iter_decode_tokens + t.iter_first_tokens)) +
            ", requests generated " + format_grouped(double(gen)));
    r.check(p + "State-usable hit never exceeds the KV-visible hit", over == 0,
            format_grouped(double(over)) + " requests with state hit > KV hit");
    const std::string audit = s.audit();
    const uint64_t leases = s.leases_held(), owners = s.pool_owners();
    r.check(p + "Caches and pools consistent, everything released",
            audit.empty() && leases == 0 && owners == 0,
            audit.empty() ? format_grouped(double(leases)) + " leases and " + format_grouped(double(owners)) +
                                " page-pool owners left after the run (radix trees and pools audited)"
                          : audit);
}

void report_model_notes(Report& r, const FleetSim& s) {
    const FleetConfig& c = s.config();
    const CostModel& m = s.cost_model();
    // The iteration cost against the roofline of core/model/roofline.h it is built from.
    IterationWork d, pf;
    for (int i = 0; i < 32; ++i) d.add_decode(4096);
    pf.add_chunk(0, 8192);
    const Hardware& hw = m.instance_hardware();
    const WorkCost rd = decode_step_cost(c.model, hw, 32, 4096, c.efficiency);
    const WorkCost rp = prefill_cost(c.model, hw, 8192, 0, c.efficiency);
    const double ed = std::abs(m.seconds(d) - rd.seconds) / rd.seconds,
                 ep = std::abs(m.seconds(pf) - rp.seconds) / rp.seconds;
    r.check("Iteration cost equals the roofline of core/model/roofline.h for pure batches",
            ed < 1e-9 && ep < 1e-9,
            "decode of 32 at 4,096 tokens: " + format_sig(m.seconds(d) * 1000, 6) + " ms vs " +
                format_sig(rd.seconds * 1000, 6) + " ms; prefill of 8,192: " +
                format_sig(m.seconds(pf) * 1000, 6) + " ms vs " + format_sig(rp.seconds * 1000, 6) + " ms");
    r.notes.push_back(
        "Times are roofline ESTIMATES, not measurements: " + c.model.name + " on " + hw.name + " (" +
        format_si(hw.peak_flops, 3) + "FLOP/s dense BF16, " + format_bytes(hw.mem_bytes_per_s) + "/s), at " +
        format_sig(c.efficiency.compute * 100, 3) + " % of peak compute and " +
        format_sig(c.efficiency.memory * 100, 3) +
        " % of peak bandwidth; ideal tensor parallelism, no kernel-launch, scheduling or network overhead. A "
        "decode step of 32 requests at 4,096 tokens: " +
        format_sig(m.seconds(d) * 1000, 3) +
        " ms; a prefill of 8,192 tokens: " + format_sig(m.seconds(pf) * 1000, 3) + " ms.");
    r.notes.push_back(
        "One state checkpoint: " + format_bytes(double(m.state_bytes())) +
        "; KV per token: " + format_bytes(double(m.kv_bytes_per_token())) +
        ". The prefix cache's capacity and the working "
        "memory are separate budgets; a running request's working KV covers only what it computed.");
}

void report_core_scalars(Report& r, const FleetSim& s, const FleetSummary& f, double price) {
    const RequestSummary& a = f.all;
    r.scalar("token_hit_kv", "KV-visible token hit", "fraction", a.hit_kv(), true).help =
        "Prompt tokens whose attention KV the chosen instance's cache held at admission, over all prompt "
        "tokens: what a router fed by KV events sees.";
    r.scalar("token_hit_state", "State-usable token hit", "fraction", a.hit_state(), true).help =
        "Prompt tokens the request could resume from a checkpoint at (KV and state at the same position): "
        "what is actually skipped.";
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
        .help =
        "Busy GPU-hours x price per GPU-hour / millions of tokens served (prompt + output): what a fleet "
        "sized to this load would cost. An estimate from the roofline.";
    (void)s;
}

}  // namespace k3
