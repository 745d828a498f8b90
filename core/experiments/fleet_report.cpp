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
            ParamSpec::choice(
                "synthetic", "Synthetic workload", {"mix", "chat", "agentic", "shared"}, "mix",
                {"mix of all three", "multi-turn chat", "agentic branching", "shared system prompts"})
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
    if (has(p, "synthetic"))
        for (const SyntheticKindName& k : synthetic_kinds())
            if (p.str("synthetic") == k.id) w.synthetic = k.kind;
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

void report_fleet_checks(Report& r, const FleetSim& s, const std::string& tag) {
    report_fleet_checks(r, s, RunTag{tag, ""});
}

void report_core_scalars(Report& r, const FleetSim&, const FleetSummary& f, double price) {
    report_core_scalars(r, f, price);
}

}  // namespace k3
