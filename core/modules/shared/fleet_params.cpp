#include "core/modules/shared/fleet_params.h"

#include "core/base/bytes.h"
#include "core/base/numfmt.h"
#include "core/experiments/module_doc.h"
#include "core/fleet/calibration.h"
#include "core/fleet/fleet_engine.h"
#include "core/model/accounting.h"
#include "core/modules/shared/choices.h"
#include "core/modules/shared/engine_params.h"

namespace k3 {

namespace {

ParamSpec& documented(ParamSpec& s) { return s.describe(doc_param_help("fleet_params", s.key)); }

}  // namespace

void fleet_router_params(ParamList<FleetRouterParams>& l) {
    using P = FleetRouterParams;
    auto router = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Router"); };
    router(l.choice(&P::router, "router", "Router",
                    choices_from<RouterKind>(router_ids(), router_labels(), parse_router)))
        .describe("Which instance a request goes to (How it works).");
    documented(router(l.real(&P::cache_threshold, "cache_threshold", "Cache threshold", "fraction", 0, 1)));
    router(l.real(&P::balance_abs, "balance_abs", "Balance threshold (absolute)", "requests", 0, 4096))
        .describe("Loads count as imbalanced when max - min exceeds this ... (SGLang default 64)");
    documented(router(l.real(&P::balance_rel, "balance_rel", "Balance threshold (relative)", "x", 1, 100)));
    documented(router(l.real(&P::load_factor, "load_factor", "Bounded-load factor", "x", 1, 4))
                   .active_when("router", "session"));
    documented(
        router(l.integer(&P::max_tree_tokens, "max_tree_tokens", "Approximate tree size", "tokens", 1, 1e10)
                   .log()
                   .active_when("router", "cache_aware")));
    documented(
        router(l.real(&P::eviction_interval_s, "eviction_interval_s", "Tree eviction interval", "s", 0, 3600)
                   .active_when("router", "cache_aware")));
    documented(router(l.real(&P::kv_event_delay_s, "kv_event_delay_s", "KV event delay", "s", 0, 600)));
    documented(router(
        l.integer(&P::event_block_tokens, "event_block_tokens", "KV event block", "tokens", 1, 4096).log()));
    documented(router(l.real(&P::overlap_weight, "overlap_weight", "Overlap weight", "x", 0, 100)
                          .active_when("router", "kv_cost")));
    documented(router(l.real(&P::temperature, "temperature", "Router temperature", "", 0, 100)
                          .active_when("router", "kv_cost")));
}

void fleet_cache_params(ParamList<FleetCacheParams>& l) {
    using P = FleetCacheParams;
    auto cache = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Prefix cache"); };
    // The engine's parameters first (which rules apply decides what the rest means), as module 5 lists them.
    engine_param_specs(l,
                       EngineParamFields<P>{&P::engine, &P::sglang_mode, &P::chunked_prefill_tokens,
                                            &P::vllm_block_tokens, &P::retention_interval},
                       doc_help_in_group("fleet_params", "Prefix cache"));
    cache(l.choice(&P::policy, "policy", "Checkpoint policy",
                   choices_from<PolicyKind>(policy_ids(), policy_labels(), parse_policy)))
        .active_when("engine", "ideal")
        .describe("Where requests leave state checkpoints and which ones the tree keeps (module 5).");
    documented(cache(l.integer(&P::interval, "interval", "Checkpoint interval", "tokens", 64, 65536)
                         .log()
                         .active_when("engine", "ideal")));
    documented(
        cache(l.integer(&P::state_capacity, "state_capacity", "State capacity per instance", "states", 0, 1e7)
                  .active_when("engine", "ideal")));
    cache(
        l.integer(&P::kv_capacity_tokens, "kv_capacity_tokens", "KV capacity per instance", "tokens", 0, 1e10)
            .active_when("engine", "ideal"))
        .describe("Tokens of attention KV each instance's prefix cache may hold; 0 = unbounded.");
    cache(l.integer(&P::page_size, "page_size", "KV page size (cache)", "tokens", 1, 64).log())
        .describe("The cache keeps whole pages only.");
    cache(l.choice(&P::lru_refresh, "lru_refresh", "LRU refresh on a hit",
                   Choices<LruRefresh>{{LruRefresh::node, "node", "matched node only"},
                                       {LruRefresh::path, "path", "whole path"}}))
        .describe("SGLang #31643: refreshing only the consumed node keeps hot sessions' deep states.");
}

void fleet_instance_params(ParamList<FleetInstanceParams>& l) {
    using P = FleetInstanceParams;
    auto inst = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Instances"); };
    inst(l.integer(&P::instances, "instances", "Instances", "", 1, 64))
        .describe("Serving instances in the fleet.");
    inst(l.choice(&P::preset, "preset", "Model",
                  preset_choices(
                      {ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b})))
        .describe(
            "Published configuration: state and KV bytes (module 2) and parameter counts for the roofline.");
    inst(l.choice(&P::hardware, "hardware", "GPU", hardware_choices()))
        .describe("Datasheet peak dense BF16 FLOP/s and HBM bandwidth: times are roofline estimates.");
    documented(inst(l.integer(&P::gpus, "gpus", "GPUs per instance", "GPUs", 1, 16)));
    documented(inst(l.flag(&P::attention_dp, "attention_dp", "DP attention")));
    documented(
        inst(l.real(&P::working_gib, "working_gib", "Working memory per instance", "GiB", 1, 1024).log())
            .active_when("engine", "ideal"));
    documented(inst(
        l.real(&P::memory_fraction, "memory_fraction", "GPU memory the engine reserves", "fraction", 0.05, 1)
            .active_unless("engine", "ideal")));
    documented(
        inst(l.real(&P::pool_gib, "pool_gib", "Pool per instance (0 = what the GPUs leave)", "GiB", 0, 4096)
                 .active_unless("engine", "ideal")));
    documented(inst(l.flag(&P::unbounded_memory, "unbounded_memory", "The cache never evicts")
                        .active_unless("engine", "ideal")));
    inst(l.integer(&P::max_running, "max_running", "Max running requests", "requests", 1, 1024).log())
        .describe("State slots of the working pool: the batch size limit.");
    inst(
        l.integer(&P::max_batch_tokens, "max_batch_tokens", "Token budget per iteration", "tokens", 64, 65536)
            .log())
        .describe(
            "Chunked prefill: decode tokens plus prefill chunks per iteration (vLLM "
            "max_num_batched_tokens).");
    documented(inst(l.integer(&P::max_prefills, "max_prefills", "Concurrent prefills", "requests", 1, 64))
                   .active_when("engine", "ideal"));
    documented(inst(l.integer(&P::max_prefill_tokens, "max_prefill_tokens", "Prefill batch input budget",
                              "tokens", 64, 1048576)
                        .log()
                        .active_when("engine", "sglang")));
    documented(inst(l.integer(&P::max_partial_prefills, "max_partial_prefills", "Partial prefills per step",
                              "requests", 0, 64)
                        .active_when("engine", "vllm")));
    documented(
        inst(l.choice(&P::spec_state, "spec_state", "Speculative decoding's state",
                      choices_from<SpecState>(spec_state_ids(), spec_state_labels(), parse_spec_state))));
    documented(inst(l.integer(&P::draft_len, "draft_len", "Draft tokens N", "tokens", 1, 16)));
    documented(inst(l.real(&P::acceptance_len, "acceptance_len", "Acceptance length A", "tokens", 1, 17)
                        .active_unless("spec_state", "off")));
}

void fleet_cost_params(ParamList<FleetCostParams>& l) {
    using P = FleetCostParams;
    l.real(&P::price_per_gpu_hour, "price_per_gpu_hour", "Price per GPU-hour", "$", 0.01, 100)
        .in_group("Cost")
        .describe("Your price: money per million tokens = GPU-hours x price / millions of tokens.");
    l.choice(&P::link, "link", "Link", link_choices())
        .in_group("Cost")
        .describe("Instance to host tier and instance to instance: replication, restores and migration.");
}

void fleet_pd_params(ParamList<FleetPdParams>& l) {
    using P = FleetPdParams;
    auto pd = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Disaggregation"); };
    documented(pd(l.choice(&P::architecture, "architecture", "Architecture",
                           Choices<Architecture>{{Architecture::colocated, "colocated", "colocated"},
                                                 {Architecture::pd, "pd", "prefill/decode disaggregated"}})));
    pd(l.integer(&P::prefill_instances, "prefill_instances", "Prefill instances", "instances", 1, 255)
           .active_when("architecture", "pd"))
        .describe("Of the instances, how many prefill (the rest decode).");
    documented(
        pd(l.choice(&P::state_handoff, "state_handoff", "State handoff",
                    Choices<StateHandoff>{{StateHandoff::slot, "slot", "SGLang: the slot, after N tokens"},
                                          {StateHandoff::recompute_last, "recompute_last",
                                           "vLLM: after N - 1, the decoder recomputes the last"}})
               .active_when("architecture", "pd")));
    documented(pd(l.flag(&P::decode_cache, "decode_cache", "Decode-side prefix cache")
                      .active_when("architecture", "pd")));
    documented(
        pd(l.flag(&P::layerwise, "layerwise", "Layer-wise transfer").active_when("architecture", "pd")));
    pd(l.choice(&P::pd_link, "pd_link", "Prefill-to-decode link (per rank)", link_choices())
           .active_when("architecture", "pd"))
        .describe("Each rank sends its own shard of the KV and the state over its own link, in parallel.");
    Choices<Hardware> gpus{{Hardware{}, "same", "the instances' GPU"}};
    for (const Choice<Hardware>& h : hardware_choices()) gpus.push_back(h);
    documented(pd(l.choice(&P::prefill_hardware, "prefill_hardware", "Prefill pool's GPU", gpus)
                      .active_when("architecture", "pd")));
}

void fleet_pd_slo_params(ParamList<FleetPdParams>& l) {
    using P = FleetPdParams;
    auto pd = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Disaggregation"); };
    documented(pd(l.real(&P::slo_ttft_ms, "slo_ttft_ms", "TTFT service level", "ms", 1, 1e6)
                      .log()
                      .active_when("architecture", "pd")));
    pd(l.real(&P::slo_tpot_ms, "slo_tpot_ms", "TPOT service level", "ms", 0.1, 1e4)
           .log()
           .active_when("architecture", "pd"))
        .describe("The TPOT service level of the comparison with colocated serving (slo_ttft_ms).");
}

namespace {
// A fleet whose instances cannot hold what it asks of them does not exist: refused, not simulated.
std::string memory_error(const FleetConfig& c) {
    const MemoryPlan m = memory_plan(c);
    if (m.total() <= m.device) return {};
    return "weights (" + format_bytes(m.weights) + ") + working memory (" + format_bytes(m.working) +
           ") + prefix cache at capacity (" + format_bytes(m.cache_kv + m.cache_states) + ") exceed the " +
           format_bytes(m.device) + " of " + std::to_string(c.gpus) + " x " + c.hardware.name +
           (m.cache_bounded ? "" : " (and the cache is unbounded)");
}
}  // namespace

void validate_pd(const FleetPdParams& p, const FleetConfig& c, Issues& issues) {
    if (c.first_gpus.on())
        if (std::string e = memory_error(on_instance_gpus(c, 0)); !e.empty())
            issues.error(p.prefill_hardware, "the prefill pool's " + e);
    const std::string e = pd_config_error(c);
    if (e.empty()) return;
    if (c.pd.prefill_instances >= c.instances)
        issues.error(p.prefill_instances, e);
    else
        issues.error(p.architecture, e);
}

void apply_pd(const FleetPdParams& p, FleetConfig& c) {
    c.pd.prefill_instances = p.architecture == Architecture::pd ? p.prefill_instances : 0;
    c.pd.handoff = p.state_handoff;
    c.pd.decode_cache = p.decode_cache;
    c.pd.layerwise = p.layerwise;
    c.pd.link = p.pd_link;
    if (c.pd.on() && !p.prefill_hardware.id.empty())
        c.first_gpus = {c.pd.prefill_instances, p.prefill_hardware};
}

void fleet_host_params(ParamList<FleetHostParams>& l) {
    using P = FleetHostParams;
    auto host = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Host tier"); };
    documented(host(l.real(&P::host_tier_gib, "host_tier_gib", "Host tier per instance", "GiB", 0, 65536)));
    documented(host(l.integer(&P::host_state_slots, "host_state_slots", "Host state slots", "states", 1, 1e6)
                        .log()
                        .active_unless("host_tier_gib", "0")));
    host(l.choice(&P::host_link, "host_link", "Host link (per rank)", link_choices())
             .active_unless("host_tier_gib", "0"))
        .describe("Each rank moves its own shard of the KV and the states over its own link, in parallel.");
}

namespace {
// The bytes the host tier's state slots take first.
double host_state_bytes(const FleetHostParams& h, const FleetConfig& c) {
    return double(h.host_state_slots) *
           double(tp_layout(c.model, c.gpus, c.attention_dp).pool_model().state_bytes());
}
}  // namespace

void apply_host_tier(const FleetHostParams& h, FleetConfig& c) {
    const double kv = h.host_tier_gib * kGiB - host_state_bytes(h, c);
    const double per_token =
        double(tp_layout(c.model, c.gpus, c.attention_dp).pool_model().kv_bytes_per_token());
    c.host.link = h.host_link;
    c.host.state_slots = h.host_state_slots;
    c.host.kv_tokens = h.host_tier_gib > 0 && kv > 0 ? uint64_t(kv / per_token) : 0;
}

void validate_host_tier(const FleetHostParams& h, const FleetConfig& c, Issues& issues) {
    if (h.host_tier_gib <= 0) return;
    if (std::string e = host_config_error(c); !e.empty())
        issues.error(h.host_tier_gib, e);
    else if (host_state_bytes(h, c) >= h.host_tier_gib * kGiB)
        issues.error(h.host_state_slots,
                     std::to_string(h.host_state_slots) + " host states of " +
                         format_bytes(host_state_bytes(h, c) / double(h.host_state_slots)) + " fill the " +
                         format_bytes(h.host_tier_gib * kGiB) + " host tier: no room for KV");
}

WorkloadSeed fleet_workload_seed() {
    return {"Seeds the synthetic workload and the randomised routers (power of two choices, the hash ring).",
            false};
}

namespace {

// vLLM's block for the instances: at their TP width (with DP attention a rank holds every head, as at
// TP 1), and with the speculative state page.
VllmBlockDerivation vllm_block_of(const FleetInstanceParams& instances) {
    const bool spec = instances.spec_state != SpecState::off;
    return derive_vllm_block(instances.preset, instances.attention_dp ? 1 : instances.gpus, true,
                             spec ? int(instances.draft_len) : 0,
                             instances.spec_state == SpecState::recoverssm);
}

// FleetConfig::engine, sglang, vllm. The tree's page is the engine's grid: SGLang's page (page_size),
// vLLM's block (vllm_block_tokens, or derived for the model at the instance's TP width: with DP
// attention a rank holds every head, as at TP 1).
void fleet_engine_config(const FleetCacheParams& cache, const FleetInstanceParams& instances,
                         FleetConfig& c) {
    c.engine = cache.engine;
    c.sglang.mode = cache.sglang_mode;
    c.sglang.chunked_prefill_tokens = cache.chunked_prefill_tokens;
    c.vllm.retention = parse_vllm_retention(cache.retention_interval).value_or(VllmRetention{});
    c.vllm.block_tokens =
        cache.vllm_block_tokens ? cache.vllm_block_tokens : vllm_block_of(instances).block_tokens;
    c.vllm.token_budget = instances.max_batch_tokens;
    c = with_engine_grid(c);
    if (c.engine == CacheEngine::vllm) c.router.event_block_tokens = c.vllm.block_tokens;  // vLLM's KV events
}

}  // namespace

FleetConfig fleet_config(const FleetRouterParams& router, const FleetCacheParams& cache,
                         const FleetInstanceParams& instances, const FleetCostParams& cost) {
    FleetConfig c;
    c.model = *model_preset(instances.preset);
    c.hardware = instances.hardware;
    c.gpus = instances.gpus;
    c.attention_dp = instances.attention_dp;
    // The iterations run on the calibrated step model (core/fleet/fleet_cost.h); a migration's
    // roofline (core/lifecycle) takes its fitted GEMM and bandwidth fractions.
    c.efficiency = {kFittedFactors.f_gemm, kFittedFactors.f_mem};
    c.instances = instances.instances;
    c.working_bytes = uint64_t(instances.working_gib * kGiB);
    c.max_running = instances.max_running;
    c.max_batch_tokens = instances.max_batch_tokens;
    c.max_prefills = instances.max_prefills;
    c.max_prefill_tokens = instances.max_prefill_tokens;
    c.memory_fraction = instances.memory_fraction;
    c.pool_bytes = uint64_t(instances.pool_gib * kGiB);
    c.unbounded_memory = instances.unbounded_memory;
    c.max_partial_prefills = instances.max_partial_prefills;
    c.spec_state = instances.spec_state;
    c.draft_len = instances.draft_len;
    c.acceptance_len = instances.acceptance_len;
    c.router.kind = router.router;
    c.router.cache_threshold = router.cache_threshold;
    c.router.balance_abs = router.balance_abs;
    c.router.balance_rel = router.balance_rel;
    c.router.load_factor = router.load_factor;
    c.router.max_tree_tokens = router.max_tree_tokens;
    c.router.eviction_interval_s = router.eviction_interval_s;
    c.router.kv_event_delay_s = router.kv_event_delay_s;
    c.router.event_block_tokens = router.event_block_tokens;
    c.router.overlap_weight = router.overlap_weight;
    c.router.temperature = router.temperature;
    c.policy.kind = cache.policy;
    c.policy.interval = cache.interval;
    c.policy.chunk = 64;
    // Under an engine the cache holds what the instance's one pool leaves: no capacity of its own.
    const bool ideal = cache.engine == CacheEngine::ideal;
    c.cache.state_capacity = ideal ? cache.state_capacity : 0;
    c.cache.kv_capacity_tokens = ideal ? cache.kv_capacity_tokens : 0;
    c.cache.page_size = cache.page_size;
    c.cache.refresh = cache.lru_refresh;
    c.link = cost.link;
    fleet_engine_config(cache, instances, c);
    return c;
}

namespace {

// The acceptance length within its verify; RecoverSSM only on KDA. engine ideal's state slots: one
// state per request must fit max_running times; speculative decoding's scratch lowers the slots to what
// fits (a warning), down to one request.
void validate_running_state(const FleetConfig& c, const FleetInstanceParams& instances, Issues& issues) {
    const RunningStateSlots s = running_state_slots(c);
    const std::string working = "working memory of " + format_bytes(double(c.working_bytes));
    if (std::string e = acceptance_error(c); !e.empty()) {
        issues.error(instances.acceptance_len, e);
        return;
    }
    if (c.spec_state == SpecState::recoverssm && c.model.linear_name != "KDA") {
        issues.error(instances.spec_state, "RecoverSSM records KDA's delta-rule corrections and gates; " +
                                               c.model.name + "'s linear layers are " + c.model.linear_name);
        return;
    }
    if (c.engine != CacheEngine::ideal)
        return;  // one pool from the device (shared_pool_plan), no working memory
    if (c.spec_state == SpecState::off) {
        if (s.fit < c.max_running)
            issues.error(instances.working_gib, working + " cannot hold " + std::to_string(c.max_running) +
                                                    " state slots of " + format_bytes(double(s.bytes())) +
                                                    " and KV pages besides: raise it or lower max_running");
        return;
    }
    const std::string held = std::to_string(s.pages) + " state page(s) of " +
                             format_bytes(double(s.page_bytes_per_layer * s.linear_layers));
    if (s.fit == 0)
        issues.error(instances.working_gib,
                     working + " cannot hold one running request's " + held + " and KV pages besides");
    else if (s.slots < c.max_running)
        issues.warning(instances.spec_state, "each running request holds " + held + ": " + working +
                                                 " holds " + std::to_string(s.slots) + " of the " +
                                                 std::to_string(c.max_running) + " running requests");
}

// What the engine cannot run (SGLang's own refusals, vLLM's block) and what the fleet does not offer
// with it (the ideal policy's checkpoints that host tier replication and migration move).
void validate_engine(const FleetConfig& c, const FleetCacheParams& cache,
                     const FleetInstanceParams& instances, Issues& issues) {
    if (c.engine == CacheEngine::ideal) return;
    if (!parse_vllm_retention(cache.retention_interval))
        issues.error(cache.retention_interval, "retention_interval '" + cache.retention_interval +
                                                   "' is not a token count, 0 or dense");
    if (c.engine == CacheEngine::vllm && !cache.vllm_block_tokens) {
        const VllmBlockDerivation d = vllm_block_of(instances);
        if (!d.error.empty()) issues.error(cache.vllm_block_tokens, "vLLM's block derivation: " + d.error);
        if (!d.error.empty()) return;
    }
    const std::string e = fleet_engine_error(fleet_engine_rules(c));
    if (e.empty()) return;
    if (c.engine == CacheEngine::sglang)
        issues.error(cache.sglang_mode, e);
    else
        issues.error(cache.vllm_block_tokens, e);
}

}  // namespace

void validate_fleet_groups(const FleetRouterParams& router, const FleetCacheParams& cache,
                           const FleetInstanceParams& instances, const FleetCostParams& cost,
                           Issues& issues) {
    const FleetConfig c = fleet_config(router, cache, instances, cost);
    validate_engine(c, cache, instances, issues);
    if (c.engine != CacheEngine::ideal) {
        // policy and interval do not apply
    } else if (c.policy.interval % 64 != 0)
        issues.error(cache.interval,
                     "interval " + std::to_string(c.policy.interval) +
                         " is not a multiple of the 64-token kernel chunk: a resume from such "
                         "a checkpoint is not bitwise exact");
    if (c.engine == CacheEngine::ideal && c.policy.interval % c.cache.page_size != 0)
        issues.error(cache.interval, "interval " + std::to_string(c.policy.interval) +
                                         " is not a multiple of the page size " +
                                         std::to_string(c.cache.page_size));
    if (std::string e = tp_layout_error(c.model, c.gpus, c.attention_dp); !e.empty())
        issues.error(instances.gpus, e + " (or turn attention_dp on: each rank then holds all the heads)");
    validate_running_state(c, instances, issues);
    if (std::string e = memory_error(c); !e.empty()) issues.error(instances.working_gib, e);
}

}  // namespace k3
