// The workload parameters the trace-driven modules share (5 checkpoints, 11 fleet, 13 faults, and
// 14 boundaries): which trace or synthetic mix, its size and seed, declared once for a WorkloadSpec.
#pragma once

#include <string>

#include "core/experiments/param_list.h"
#include "core/fleet/workload_source.h"

namespace k3 {

// What differs between the modules that declare it: what the seed also seeds, and whether it
// matters only for synthetic workloads (shown disabled for a trace).
struct WorkloadSeed {
    std::string help;
    bool synthetic_only = false;
};

// trace, synthetic, sessions, seed (in that order, UI group "Workload").
void workload_params(ParamList<WorkloadSpec>& l, const WorkloadSeed& seed);

// The errors of a workload: a trace that cannot be read, or a malformed one (naming its line).
void validate_workload(const WorkloadSpec& w, Issues& issues);

// The data files a run of the workload reads (the page fetches them first).
std::vector<std::string> workload_data_files(const WorkloadSpec& w);

}  // namespace k3
