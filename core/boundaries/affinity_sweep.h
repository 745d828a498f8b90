// Module 14's affinity map: small fleet simulations (core/boundaries/fleet_sweep.h) of one workload
// per reuse share (reuse_mix_workload), each replayed at several loads under least-loaded routing (the
// baseline) and under an affinity router (the method). Load is relative to the fleet's prefill capacity
// without reuse: at load 1 requests arrive as fast as the instances can prefill their whole prompts.
#pragma once

#include <memory>
#include <vector>

#include "core/boundaries/fleet_sweep.h"

namespace k3::boundaries {

struct AffinitySweepConfig {
    FleetConfig fleet;  // model, hardware, instances, cache, batching; the router is set per run
    RouterKind affinity = RouterKind::prefix;
    std::vector<double> reuse;  // x: share of requests with a shared prefix
    std::vector<double> load;   // y: arrival rate / prefill capacity without reuse
    ReuseMixConfig workload;    // reuse_share and rate_per_s are set per column
};

// Requests per second the fleet prefills when nothing is cached: instances x prefill tokens/s of one
// instance (full token budget of chunks, no context) / mean prompt length.
double prefill_capacity_per_s(const FleetConfig& f, const ReuseMixConfig& w);
// Requests per second the fleet serves when nothing is cached and every instance is busy: each request
// takes its prompt's prefill (as above) and its share of decode steps of a full batch (max_running
// requests at the prompt plus half the output), output_len_mean of them.
double serving_capacity_per_s(const FleetConfig& f, const ReuseMixConfig& w);

class AffinitySweep : public FleetSweep {
  public:
    explicit AffinitySweep(const AffinitySweepConfig& c);
    const AffinitySweepConfig& affinity_config() const { return c_; }
    double capacity_per_s() const { return capacity_; }

  private:
    AffinitySweepConfig c_;
    double capacity_ = 0;
};

}  // namespace k3::boundaries
