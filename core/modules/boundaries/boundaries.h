// Module 14 `boundaries`: where each method stops paying. Nine break-even maps computed with the core
// code of the modules they judge: the cost of each method in one currency (core/boundaries/economics.h),
// module 5's workload replay for checkpoint intervals, module 11's fleet simulator for routing,
// disaggregation, the host tier and speculative decoding. Each map has its break-even contour; the
// break-evens read off for the chosen model and hardware fill a verdict table. Maps 1-6 are computed in
// boundaries_maps.cpp and reported in boundaries_report.cpp, maps 7-9 in boundaries_serving_*.
#pragma once

#include <cstdint>
#include <memory>

#include "core/experiments/module.h"
#include "core/modules/boundaries/boundaries_maps.h"
#include "core/modules/boundaries/boundaries_serving_maps.h"
#include "core/modules/shared/fleet_params.h"

namespace k3 {

struct BoundariesParams {
    ModelPreset preset = ModelPreset::kimi_linear_48b;
    Hardware hardware = *hardware_preset("h100");
    double residence_s = 30;
    uint32_t context = 32768;  // tokens
    uint32_t batch = 64;       // running requests
    Link link = *link_preset("ib-ndr");
    Link cp_link = *link_preset("nvlink4");
    bool dest_checkpoint = false;
    uint32_t checkpoint_distance = 512;  // tokens
    int resolution = 20;                 // cells per axis
    // Map 3: what replay records, and vLLM's align mode (prefix caching) for RecoverSSM's pages.
    spec::RecordVariant variant = spec::RecordVariant::minimal_exact;
    bool prefix_caching = true;
    // The fleet map.
    uint32_t instances = 4;
    uint64_t state_capacity = 64;
    uint32_t fleet_requests = 480;
    int fleet_grid = 5;
    RouterKind affinity = RouterKind::prefix;
    uint64_t seed = 1;
    // The serving maps 7-9: the service levels of map 7, map 8's host tier, map 9's speculation.
    double slo_ttft_ms = 2000, slo_tpot_ms = 50;
    FleetHostParams host{.host_tier_gib = 256};
    SpecState spec_state = SpecState::snapshot;
    uint32_t draft_len = 7;
    ServingMapFalsify serving_falsify = ServingMapFalsify::none;  // not a declared parameter
    // Whose rules place the states of map 2 and run the fleet of map 6 (module 5's engine parameters,
    // same names and choices): the idealised placement (the upper bound), SGLang's or vLLM's.
    CacheEngine engine = CacheEngine::ideal;
    SglangMode sglang_mode = SglangMode::extra_buffer;
    uint32_t chunked_prefill_tokens = 8192;    // tokens
    uint32_t vllm_block_tokens = 0;            // 0 = derived as vLLM derives it (module 3's derivation)
    std::string retention_interval = "dense";  // vLLM's prefix_cache_retention_interval
    BoundariesFalsify falsify = BoundariesFalsify::none;  // not a declared parameter
};

struct BoundariesResult {
    BoundaryInputs in;
    std::shared_ptr<const Workload> interval_workload;  // map 2's
    ReplayQueue interval_replays;
    std::unique_ptr<boundaries::EngineSpacingSweep> engine_sweep;  // map 2 under an engine, instead
    size_t engine_axis_runs = 0;                                   // its first runs are the axis
    std::unique_ptr<boundaries::AffinitySweep> sweep;              // map 6's fleet runs
    FleetRecords fleet_records;  // their request records, as map 6 reads them
    PrefixMap prefix;
    IntervalMap interval;
    ReplayMap replay;
    CpMap cp;
    MigrationMap migration;
    AffinityMap affinity;
    ServingMapInputs serving_in;
    std::unique_ptr<boundaries::FleetSweep> pd_runs, host_runs, spec_runs;  // maps 7, 8, 9
    ServingMap pd, host, spec;
};

ParamList<BoundariesParams> boundaries_params();
void validate_boundaries(const BoundariesParams& p, Issues& issues);
BoundaryInputs boundary_inputs(const BoundariesParams& p);
// The GPUs of one of map 6's instances: the fewest of 2, 4, 8 and 16 that hold the model's weights and
// module 11's working memory (and divide its heads); 0 when even kFleetMapMaxGpus do not.
inline constexpr int kFleetMapMaxGpus = 16;
int fleet_map_gpus(const ModelConfig& m, const Hardware& h);
// The engines' configurations of the parameters (map 2's base, map 6's fleet); the vLLM block derived
// by module 3's derivation when vllm_block_tokens is 0, `error` saying why it cannot be.
SglangConfig boundaries_sglang(const BoundariesParams& p);
VllmEngineConfig boundaries_vllm(const BoundariesParams& p, std::string* error = nullptr);
std::unique_ptr<Run> start_boundaries(const BoundariesParams& p, const Params& raw);
void report_boundaries(const BoundariesResult& b, Report& r);
// Maps 7-9's inputs from the parameters (module 11's instance, engine ideal) and their report.
ServingMapInputs serving_map_inputs(const BoundariesParams& p);
struct BoundaryVerdict {  // one row of the verdict table
    std::string method, use, dont, break_even, module;
};
std::vector<BoundaryVerdict> report_serving_maps(const BoundariesResult& b, Report& r);

}  // namespace k3
