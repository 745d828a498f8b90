// Module 14's affinity map: small fleet simulations (core/fleet/fleet_sim.h) of one workload per reuse
// share (reuse_mix_workload), each replayed at several loads under least-loaded routing and under an
// affinity router. Load is relative to the fleet's prefill capacity without reuse: at load 1 requests
// arrive as fast as the instances can prefill their whole prompts.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/base/clock.h"
#include "core/fleet/fleet_sim.h"

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

class AffinitySweep {
  public:
    explicit AffinitySweep(const AffinitySweepConfig& c);
    // Runs simulations until the deadline passes; returns the fraction done.
    double step(const Deadline& d);
    bool done() const { return next_ >= runs_.size(); }

    const AffinitySweepConfig& config() const { return c_; }
    double capacity_per_s() const { return capacity_; }
    // The run of cell (ix, iy): least loaded or the affinity router. Only after done().
    const FleetSim& run(size_t ix, size_t iy, bool affinity) const;
    size_t runs() const { return runs_.size(); }
    const FleetSim& run(size_t i) const { return *runs_[i]; }

  private:
    size_t index(size_t ix, size_t iy, bool affinity) const {
        return (ix * c_.load.size() + iy) * 2 + affinity;
    }
    AffinitySweepConfig c_;
    double capacity_ = 0;
    std::vector<std::unique_ptr<FleetSim>> runs_;  // in index() order
    std::shared_ptr<const Workload> workload_;     // of the column being run
    size_t next_ = 0;
};

}  // namespace k3::boundaries
