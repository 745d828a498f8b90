// Running fleet simulations within what the page can afford: several simulations stepped one after
// another across time slices (what a run may build is estimated before it starts:
// core/modules/shared/fleet_estimate.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/fleet/fleet_config.h"
#include "core/fleet/workload.h"

namespace k3 {

// Steps simulations one after another within the deadline: `runs` hold a std::unique_ptr<FleetSim>
// `sim` each, `next` is the first unfinished one. Returns the progress of the whole list in [0, 1].
template <class Run>
double run_in_turn(std::vector<Run>& runs, size_t& next, const Deadline& d) {
    while (next < runs.size()) {
        runs[next].sim->run(&d);
        if (!runs[next].sim->done()) break;
        ++next;
        if (d.passed()) break;
    }
    if (next >= runs.size()) return 1.0;
    return (double(next) + runs[next].sim->progress()) / double(runs.size());
}

}  // namespace k3
