// The engines' part of a fleet report (engine sglang or vllm, core/fleet/fleet_engine.h): the engine's
// counters as scalars, and the comparison with module 5's replay of the same engine when the run is one
// the replay describes (one instance, nothing evicted, requests that never overlapped, nothing cached
// past a prompt): the fleet's KV-visible and state-usable hits must then equal the replay's exactly.
#pragma once

#include <functional>
#include <string>

#include "core/experiments/report.h"
#include "core/fleet/fleet_sim.h"

namespace k3 {

// engine_states_tracked, engine_branch_tracks, engine_decode_tracks, engine_junctions,
// engine_states_not_retained (nothing under engine=ideal).
void report_engine_scalars(Report& r, const FleetSim& s);
// "" when s is a run module 5's replay describes, else why not.
std::string engine_replay_excluded(const FleetSim& s);
// The check engine_matches_replay (key through `key`), when the run qualifies.
void report_engine_check(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                         const std::string& name);

}  // namespace k3
