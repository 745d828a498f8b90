#include "core/boundaries/affinity_sweep.h"

#include "core/fleet/fleet_cost.h"

namespace k3::boundaries {

double prefill_capacity_per_s(const FleetConfig& f, const ReuseMixConfig& w) {
    const CostModel m(f);
    const double tokens_per_s = m.prefill_tokens_per_s(double(f.max_batch_tokens), 0);
    return double(f.instances) * tokens_per_s / (double(w.prefix_len) + w.suffix_len_mean);
}

AffinitySweep::AffinitySweep(const AffinitySweepConfig& c) : c_(c) {
    capacity_ = prefill_capacity_per_s(c.fleet, c.workload);
    runs_.resize(c.reuse.size() * c.load.size() * 2);
}

// Simulations are made when their turn comes: the workload of a column with its first run.
double AffinitySweep::step(const Deadline& d) {
    while (next_ < runs_.size()) {
        if (!runs_[next_]) {
            const size_t ix = next_ / (2 * c_.load.size()), iy = (next_ / 2) % c_.load.size();
            if (next_ % (2 * c_.load.size()) == 0) {
                ReuseMixConfig wc = c_.workload;
                wc.reuse_share = c_.reuse[ix];
                wc.rate_per_s = capacity_;  // load 1; each run divides arrival times by its load
                workload_ = std::make_shared<const Workload>(reuse_mix_workload(wc));
            }
            FleetConfig f = c_.fleet;
            f.router.kind = next_ % 2 ? c_.affinity : RouterKind::least_loaded;
            f.load = c_.load[iy];
            runs_[next_] = std::make_unique<FleetSim>(workload_, f);
        }
        runs_[next_]->run(&d);
        if (!runs_[next_]->done()) break;
        ++next_;
        if (d.passed()) break;
    }
    if (done()) return 1.0;
    const double part = runs_[next_] ? runs_[next_]->progress() : 0.0;
    return (double(next_) + part) / double(runs_.size());
}

const FleetSim& AffinitySweep::run(size_t ix, size_t iy, bool affinity) const {
    return *runs_[index(ix, iy, affinity)];
}

}  // namespace k3::boundaries
