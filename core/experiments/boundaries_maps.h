// The six maps of module 14 `boundaries`: each builds its heat map with the break-even contour, its
// read-off scalars and tables, and checks that can fail, into the report, and returns its row of the
// verdict table. The costs come from core/boundaries; the simulations (maps 2 and 6) are run by the
// module and passed in.
#pragma once

#include <string>
#include <vector>

#include "core/boundaries/affinity_sweep.h"
#include "core/experiments/report.h"
#include "core/fleet/workload_replay.h"
#include "core/model/roofline.h"

namespace k3 {

struct BoundaryInputs {
    ModelConfig model;
    Hardware hardware;
    Efficiency eff;           // roofline efficiencies (the defaults of core/model/roofline.h)
    double residence_s = 30;  // maps 1 and 2: how long a cached entry is held
    double context = 32768;   // read-offs of maps 1, 3 and 5
    double batch = 64;        // map 3: requests in a decode step
    Link link;                // map 5 read-off: between instances
    Link cp_link;             // map 4: between ranks
    bool dest_checkpoint = false;
    double checkpoint_distance = 512;  // map 5: when the destination holds a checkpoint
    int resolution = 20;
};

// One row of the verdict table.
struct Verdict {
    std::string method, use, dont, break_even, module;
};

Verdict prefix_map(Report& r, const BoundaryInputs& in);
// Map 2 from replays of `w` at intervals 64, 128, ..., each twice the previous (ReplayResult::x).
Verdict interval_map(Report& r, const BoundaryInputs& in, const Workload& w,
                     const std::vector<ReplayResult>& runs);
Verdict replay_map(Report& r, const BoundaryInputs& in);
Verdict cp_map(Report& r, const BoundaryInputs& in);
Verdict migration_map(Report& r, const BoundaryInputs& in);
Verdict affinity_map(Report& r, const boundaries::AffinitySweep& s);
void verdict_table(Report& r, const std::vector<Verdict>& rows);

}  // namespace k3
