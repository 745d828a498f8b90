// Module 14's serving maps 7-9 (issue 17): when prefill/decode disaggregation, a host cache tier and
// speculative decoding pay, each from small fleet simulations (core/boundaries/fleet_sweep.h) of a
// baseline and the method on the same requests, under engine=ideal. boundaries_serving_report.cpp
// turns them into the report.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/boundaries/fleet_sweep.h"
#include "core/experiments/report.h"

namespace k3 {

// Deliberate corruptions that the serving maps' checks must catch (k3cli audit-checks).
enum class ServingMapFalsify : uint8_t {
    none,
    pd_column_shifted,    // map 7: the middle column's disaggregated runs split off one prefill instance more
    pd_record_drops,      // map 7: one disaggregated run's transfer record leaves out the state's bytes
    host_write_unlogged,  // map 8: one run's write to a host tier arrives and is neither inserted nor logged
    host_cell_without,    // map 8: the middle cell's run with the tier runs without it
    spec_column_shifted,  // map 9: the middle column's runs verify at the next column's acceptance length
    spec_accepts_all,     // map 9: the first column's first run keeps every draft (acceptance 1 + N)
};

struct ServingMapInputs {
    FleetConfig fleet;  // model, hardware, GPUs, instances, device cache, seed (engine ideal)
    uint32_t requests = 480;
    int grid = 5;
    double slo_ttft_ms = 2000, slo_tpot_ms = 50;  // map 7
    HostTierConfig host;                          // map 8's tier (the method)
    SpecState spec_state = SpecState::snapshot;   // map 9's scratch
    uint32_t draft_len = 7;
    ServingMapFalsify falsify = ServingMapFalsify::none;
};

// The runs of maps 7 (x: prefill instances, at most `grid` of the splits; y: load), 8 (x: reuse share, y:
// device state capacity) and 9 (x: acceptance length, y: load). Load is relative to the fleet's serving
// capacity without reuse (serving_capacity_per_s: prefill and decode).
std::unique_ptr<boundaries::FleetSweep> pd_sweep(const ServingMapInputs& in);
std::unique_ptr<boundaries::FleetSweep> host_sweep(const ServingMapInputs& in);
std::unique_ptr<boundaries::FleetSweep> spec_sweep(const ServingMapInputs& in);
inline constexpr double kHostMapLoad = 0.75;  // map 8's load: the middle of maps 6, 7 and 9's

// Module 11's checks on every run of a sweep (maps 6-9): every request accounted for (completed, or
// failed for a reason), its caches and pools released, every byte it moved arrived or was lost.
struct FleetRunsAudit {
    size_t runs = 0, failed_checks = 0;
    std::string first_failure;  // "name: detail" of the first failed check
};
FleetRunsAudit audit_fleet_runs(const boundaries::FleetSweep& s);

// One serving map: the heat map (baseline against method, per cell) and what its checks judge.
struct ServingMap {
    struct Row {
        double x, y, baseline, method, value;  // value: the cell's colour
        double baseline_ttft_ms, method_ttft_ms, baseline_tpot_ms, method_tpot_ms;
        uint64_t baseline_failed, method_failed;  // requests that failed (for their reason)
    };
    HeatMap heat;
    std::vector<Row> rows;
    uint32_t instances = 0, requests = 0;
    size_t runs = 0, failed_checks = 0;
    std::string first_failure;  // "name: detail" of the first failed check of a run
    // Cells left empty because a run failed requests (too large for what the memory leaves, say): the
    // means of the others would not compare the same requests.
    size_t failed_cells = 0;
    // The map's own check: every method run did what its cell says (map 7: only the column's prefill
    // instances prefilled without decoding; map 8: only the method runs used a host tier; map 9: the
    // decode steps yielded the column's acceptance length).
    size_t off_cell = 0;
    std::string first_off;
    size_t wins = 0, best = 0, worst = 0;  // cells where the method pays; the extremes
    double capacity_per_s = 0;
};
ServingMap pd_map(const ServingMapInputs& in, const boundaries::FleetSweep& s);
ServingMap host_map(const ServingMapInputs& in, const boundaries::FleetSweep& s);
ServingMap spec_map(const ServingMapInputs& in, const boundaries::FleetSweep& s);

}  // namespace k3
