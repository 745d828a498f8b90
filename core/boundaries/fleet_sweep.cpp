#include "core/boundaries/fleet_sweep.h"

namespace k3::boundaries {

FleetSweep::FleetSweep(FleetSweepConfig c) : c_(std::move(c)) {
    runs_.resize(c_.x.size() * c_.y.size() * 2);
    for (size_t ix = 0; ix < c_.x.size(); ++ix)
        for (size_t iy = 0; iy < c_.y.size(); ++iy)
            for (bool method : {false, true})
                if (method || !c_.baseline_per_row || ix == 0) order_.push_back(index(ix, iy, method));
}

// Simulations are made when their turn comes: the workload of a column with its first run.
double FleetSweep::step(const Deadline& d) {
    while (next_ < order_.size()) {
        const size_t i = order_[next_];
        if (!runs_[i]) {
            const size_t ix = i / (2 * c_.y.size()), iy = (i / 2) % c_.y.size();
            if (ix != workload_column_) {
                workload_ = c_.workload(ix);
                workload_column_ = ix;
            }
            runs_[i] = std::make_unique<FleetSim>(workload_, c_.fleet(ix, iy, i % 2 == 1));
        }
        runs_[i]->run(&d);
        if (!runs_[i]->done()) break;
        ++next_;
        if (d.passed()) break;
    }
    if (done()) return 1.0;
    const size_t i = order_[next_];
    const double part = runs_[i] ? runs_[i]->progress() : 0.0;
    return (double(next_) + part) / double(order_.size());
}

}  // namespace k3::boundaries
