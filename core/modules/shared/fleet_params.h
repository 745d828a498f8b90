// The parameter groups modules 11 fleet, 12 tenants and 13 faults share: the router, each instance's
// prefix cache, the instances, their cost. Each group is a sub-struct declared once and included with
// ParamList::group; a module picks its own defaults in its initialisers
// (`FleetCacheParams cache{.state_capacity = 64};`). The long help is in fleet_params.md.
#pragma once

#include <cstdint>
#include <string>

#include "core/experiments/param_list.h"
#include "core/fleet/fleet_config.h"
#include "core/modules/shared/workload_params.h"

namespace k3 {

struct FleetRouterParams {
    RouterKind router = RouterKind::prefix;
    double cache_threshold = 0.3;  // fraction of the prompt
    double balance_abs = 64;       // requests
    double balance_rel = 1.5;
    double load_factor = 1.25;
    // The deployed routers' own views (RouterConfig, core/fleet/router_views.h).
    uint64_t max_tree_tokens = uint64_t(1) << 26;  // cache_aware (gateway max_tree_size)
    double eviction_interval_s = 120;              // cache_aware (gateway eviction_interval_secs)
    double kv_event_delay_s = 0;                   // kv_events, kv_cost
    uint32_t event_block_tokens = 16;              // kv_events, kv_cost
    double overlap_weight = 1.0;                   // kv_cost (Dynamo overlap_score_weight)
    double temperature = 0;                        // kv_cost (Dynamo router_temperature)
};

struct FleetCacheParams {
    PolicyKind policy = PolicyKind::interval;
    uint32_t interval = 512;                              // tokens
    uint64_t state_capacity = 0, kv_capacity_tokens = 0;  // 0 = unbounded
    uint32_t page_size = 1;
    LruRefresh lru_refresh = LruRefresh::node;
    // Whose caching rules the instances follow (core/fleet/fleet_engine.h), declared with module 5's
    // (core/modules/shared/engine_params.h); with sglang or vllm, policy and interval do not apply.
    CacheEngine engine = CacheEngine::ideal;
    SglangMode sglang_mode = SglangMode::extra_buffer;
    uint32_t chunked_prefill_tokens = 8192;    // tokens
    uint32_t vllm_block_tokens = 0;            // 0 = derived for the model at the instance's TP width
    std::string retention_interval = "dense";  // vLLM prefix_cache_retention_interval: 0, dense or tokens
};

struct FleetInstanceParams {
    uint32_t instances = 4;
    ModelPreset preset = ModelPreset::kimi_linear_48b;
    Hardware hardware = *hardware_preset("h100");
    int gpus = 2;
    bool attention_dp = false;  // DP attention instead of tensor parallel attention (tp_layout.h)
    double working_gib = 32;
    uint32_t max_running = 64, max_batch_tokens = 8192, max_prefills = 2;
    SpecState spec_state = SpecState::off;  // speculative decoding's state scratch
    uint32_t draft_len = 7;                 // tokens (DSpark's N = 7, reference/kimi_k3.md §1.3)
    double acceptance_len = 1;              // tokens a decode step yields (DSpark on K3: 4.26)
    // The engines' schedulers (core/fleet/batch_former.h): SGLang's --max-prefill-tokens and vLLM's
    // max_num_partial_prefills (0 = no limit).
    uint32_t max_prefill_tokens = 16384, max_partial_prefills = 1;
    // Under an engine, each instance's one pool (FleetConfig::memory_fraction, pool_bytes,
    // unbounded_memory): the share of the GPUs the engine reserves, the pool given instead (0 = what
    // the device leaves), and a cache that never evicts (the engines' runs of engines.md).
    double memory_fraction = 0.9, pool_gib = 0;
    bool unbounded_memory = false;
};

struct FleetCostParams {
    double price_per_gpu_hour = 2.5;
    Link link = *link_preset("ib-ndr");
};

// The host tier in normal serving (FleetConfig::host): its bytes per instance, of which its state slots
// take theirs first, and each rank's host link.
struct FleetHostParams {
    double host_tier_gib = 0;  // per instance; 0 = no host tier
    uint32_t host_state_slots = 256;
    Link host_link = *link_preset("pcie5");
};

// Prefill/decode disaggregation (FleetConfig::pd): the architecture, how many of the instances prefill,
// how the state is handed over, a decode-side cache, layer-wise transfer, each rank's link.
enum class Architecture : uint8_t { colocated, pd };
struct FleetPdParams {
    Architecture architecture = Architecture::colocated;
    uint32_t prefill_instances = 1;
    StateHandoff state_handoff = StateHandoff::slot;
    bool decode_cache = false, layerwise = false;
    Link pd_link = *link_preset("ib-ndr");
    Hardware prefill_hardware;                    // the prefill pool's GPU (none: the instances' own)
    double slo_ttft_ms = 2000, slo_tpot_ms = 50;  // the comparison's service levels (DistServe's goodput)
};

// router, cache_threshold, balance_abs, balance_rel, load_factor, max_tree_tokens, eviction_interval_s,
// kv_event_delay_s, event_block_tokens, overlap_weight, temperature (UI group "Router").
void fleet_router_params(ParamList<FleetRouterParams>& l);
// engine, sglang_mode, chunked_prefill_tokens, vllm_block_tokens, retention_interval, policy, interval,
// state_capacity, kv_capacity_tokens, page_size, lru_refresh ("Prefix cache").
void fleet_cache_params(ParamList<FleetCacheParams>& l);
// instances, preset, hardware, gpus, attention_dp, working_gib, max_running, max_batch_tokens, max_prefills,
// max_prefill_tokens, max_partial_prefills, spec_state, draft_len, acceptance_len ("Instances").
// (compute_efficiency and memory_efficiency are retired: the step model's fitted factors replace them.)
void fleet_instance_params(ParamList<FleetInstanceParams>& l);
// price_per_gpu_hour, link ("Cost").
void fleet_cost_params(ParamList<FleetCostParams>& l);
// architecture, prefill_instances, state_handoff, decode_cache, layerwise, pd_link, prefill_hardware
// ("Disaggregation").
void fleet_pd_params(ParamList<FleetPdParams>& l);
// slo_ttft_ms, slo_tpot_ms: module 11's comparison with colocated serving.
void fleet_pd_slo_params(ParamList<FleetPdParams>& l);
void apply_pd(const FleetPdParams& p, FleetConfig& c);
// What pd_config_error refuses in c (apply_pd's), on the parameter it is about, and a prefill pool
// whose GPUs cannot hold what the instances ask of them.
void validate_pd(const FleetPdParams& p, const FleetConfig& c, Issues& issues);
// host_tier_gib, host_state_slots, host_link ("Host tier").
void fleet_host_params(ParamList<FleetHostParams>& l);
// c's host tier from the group (its KV is what the bytes leave beside the state slots), and what is
// wrong with it ("" when it can run).
void apply_host_tier(const FleetHostParams& h, FleetConfig& c);
void validate_host_tier(const FleetHostParams& h, const FleetConfig& c, Issues& issues);

// The `load` multiplier of the workload modules 11 and 13 replay (UI group "Workload").
template <class P>
ParamSpec& fleet_load_param(ParamList<P>& l, double P::*load) {
    return l.real(load, "load", "Load multiplier", "x", 0.05, 64)
        .log()
        .in_group("Workload")
        .describe("Arrival times are divided by this: 2 replays the same requests twice as fast.");
}

// What the workload group's seed also seeds in a fleet module.
WorkloadSeed fleet_workload_seed();

// The fleet the groups describe (load 1 and seed 1 unless the module sets them).
FleetConfig fleet_config(const FleetRouterParams& router, const FleetCacheParams& cache,
                         const FleetInstanceParams& instances, const FleetCostParams& cost);

// Errors (interval off the kernel chunk or the page grid, working memory too small for the state
// slots) and warnings (the device cannot hold weights, working memory and the cache at capacity).
void validate_fleet_groups(const FleetRouterParams& router, const FleetCacheParams& cache,
                           const FleetInstanceParams& instances, const FleetCostParams& cost, Issues& issues);

}  // namespace k3
