// Module 14 `boundaries`: where each method stops paying. Six break-even maps computed with the core
// code of the modules they judge: the cost of each method in one currency (core/boundaries/economics.h),
// module 5's workload replay for checkpoint intervals, module 11's fleet simulator for routing. Each map
// has its break-even contour; the break-evens read off for the chosen model and hardware fill a verdict
// table. The maps are computed in boundaries_maps.cpp and reported in boundaries_report.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "core/experiments/module.h"
#include "core/modules/boundaries/boundaries_maps.h"

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
    uint32_t fleet_requests = 960;
    int fleet_grid = 5;
    RouterKind affinity = RouterKind::prefix;
    uint64_t seed = 1;
    BoundariesFalsify falsify = BoundariesFalsify::none;  // not a declared parameter
};

struct BoundariesResult {
    BoundaryInputs in;
    std::shared_ptr<const Workload> interval_workload;  // map 2's
    ReplayQueue interval_replays;
    std::unique_ptr<boundaries::AffinitySweep> sweep;  // map 6's fleet runs
    FleetRecords fleet_records;                        // their request records, as map 6 reads them
    PrefixMap prefix;
    IntervalMap interval;
    ReplayMap replay;
    CpMap cp;
    MigrationMap migration;
    AffinityMap affinity;
};

ParamList<BoundariesParams> boundaries_params();
void validate_boundaries(const BoundariesParams& p, Issues& issues);
BoundaryInputs boundary_inputs(const BoundariesParams& p);
std::unique_ptr<Run> start_boundaries(const BoundariesParams& p, const Params& raw);
void report_boundaries(const BoundariesResult& b, Report& r);

}  // namespace k3
