// Module 14's fleet maps: small fleet simulations (core/fleet/fleet_sim.h) over a grid of two
// quantities, two runs a cell: a baseline and the method the map judges. A column's workload is made
// when its first run starts. A baseline that does not depend on x (baseline_per_row) runs once per row
// and serves every cell of it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/base/clock.h"
#include "core/fleet/fleet_sim.h"

namespace k3::boundaries {

struct FleetSweepConfig {
    std::vector<double> x, y;
    bool baseline_per_row = false;
    // Column ix's workload (a column may share another's), and cell (ix, iy)'s configuration.
    std::function<std::shared_ptr<const Workload>(size_t ix)> workload;
    std::function<FleetConfig(size_t ix, size_t iy, bool method)> fleet;
};

class FleetSweep {
  public:
    explicit FleetSweep(FleetSweepConfig c);
    // Runs simulations until the deadline passes; returns the fraction done.
    double step(const Deadline& d);
    bool done() const { return next_ >= order_.size(); }

    const FleetSweepConfig& config() const { return c_; }
    // The run of cell (ix, iy): its baseline or the method. Only after done().
    const FleetSim& run(size_t ix, size_t iy, bool method) const { return *runs_[index(ix, iy, method)]; }
    // Every simulation, in the order they ran (a row's shared baseline once).
    size_t runs() const { return order_.size(); }
    const FleetSim& run(size_t i) const { return *runs_[order_[i]]; }

  private:
    size_t index(size_t ix, size_t iy, bool method) const {
        if (!method && c_.baseline_per_row) ix = 0;
        return (ix * c_.y.size() + iy) * 2 + method;
    }
    FleetSweepConfig c_;
    std::vector<std::unique_ptr<FleetSim>> runs_;  // by index(); a shared baseline's slots stay empty
    std::vector<size_t> order_;                    // the indices that run, column by column
    std::shared_ptr<const Workload> workload_;     // of the column being run
    size_t workload_column_ = SIZE_MAX;
    size_t next_ = 0;
};

}  // namespace k3::boundaries
