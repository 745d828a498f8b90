// What a fleet module's simulations cost before they run (issue 20, Experiment::estimate), for
// modules 11 fleet, 12 tenants and 13 faults. Counted from the workload and the configuration:
//   events   = 4 R + P / B: an arrival, a routing, an admission and a completion per request, and an
//              iteration per chunk of prompt (B = the prefill budget of one iteration); runs of
//              decode-only iterations between events are one event (FleetConfig::fast_decode);
//   visits   = events x C: each iteration visits its running requests, C = min(max_running,
//              R / instances);
//   nodes    = (P + outputs) / interval + 2 R prefix-tree nodes (checkpoints and request ends);
//   routes   = R x instances: a router weighs every instance for every request;
//   blocks   = P / event_block_tokens under the KV-event routers (kv_events, kv_cost): their index;
//   pages    = instances x the working pool's pages (their page tables).
// Each count times its measured per-unit cost (fleet_estimate.cpp), summed over the simulations.
#pragma once

#include "core/experiments/module.h"
#include "core/fleet/fleet_config.h"
#include "core/fleet/workload.h"
#include "core/modules/shared/fleet_params.h"

namespace k3 {

// Simulations of `w` under each of `sims` (each with its own trees and pools, all alive at the end).
// The refusal names the parameter behind the largest share of the cost: the module's own field for
// the workload's size (`requests_field`), else max_batch_tokens (prefill iterations), the KV event
// block (the KV-event routers' index), the working memory (pool pages) or the checkpoint interval
// (tree nodes).
RunEstimate estimate_fleet_sims(const Workload& w, const std::vector<FleetConfig>& sims,
                                const FleetRouterParams& router, const FleetCacheParams& cache,
                                const FleetInstanceParams& instances, const void* requests_field);

}  // namespace k3
