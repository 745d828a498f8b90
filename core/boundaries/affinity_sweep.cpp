#include "core/boundaries/affinity_sweep.h"

#include "core/fleet/fleet_cost.h"

namespace k3::boundaries {

double prefill_capacity_per_s(const FleetConfig& f, const ReuseMixConfig& w) {
    const CostModel m(f);
    const double tokens_per_s = m.prefill_tokens_per_s(double(f.max_batch_tokens), 0);
    return double(f.instances) * tokens_per_s / (double(w.prefix_len) + w.suffix_len_mean);
}

double serving_capacity_per_s(const FleetConfig& f, const ReuseMixConfig& w) {
    const CostModel m(f);
    const double prompt = double(w.prefix_len) + w.suffix_len_mean;
    const double prefill_s = prompt / m.prefill_tokens_per_s(double(f.max_batch_tokens), 0);
    IterationWork step;
    for (uint32_t i = 0; i < f.max_running; ++i) step.add_decode(prompt + w.output_len_mean / 2);
    const double decode_s = w.output_len_mean * m.seconds(step) / double(f.max_running);
    return double(f.instances) / (prefill_s + decode_s);
}

namespace {

// Columns are reuse shares (arrivals at load 1: each run divides their times by its load), rows
// loads; the baseline routes least loaded, the method by affinity.
FleetSweepConfig affinity_cells(const AffinitySweepConfig& c, double capacity) {
    FleetSweepConfig s;
    s.x = c.reuse;
    s.y = c.load;
    s.workload = [c, capacity](size_t ix) {
        ReuseMixConfig wc = c.workload;
        wc.reuse_share = c.reuse[ix];
        wc.rate_per_s = capacity;
        return std::make_shared<const Workload>(reuse_mix_workload(wc));
    };
    s.fleet = [c](size_t, size_t iy, bool method) {
        FleetConfig f = c.fleet;
        f.router.kind = method ? c.affinity : RouterKind::least_loaded;
        f.load = c.load[iy];
        return f;
    };
    return s;
}

}  // namespace

AffinitySweep::AffinitySweep(const AffinitySweepConfig& c)
    : FleetSweep(affinity_cells(c, prefill_capacity_per_s(c.fleet, c.workload))),
      c_(c),
      capacity_(prefill_capacity_per_s(c.fleet, c.workload)) {}

}  // namespace k3::boundaries
