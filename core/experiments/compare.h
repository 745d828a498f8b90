// Compare mode: a run pinned as the baseline beside the current one. The pin is a module and its
// parameters (a link holds both sets); in a module that shares the pinned module's parameter set
// (fleet, tenants and faults share the fleet's) the baseline is the same settings run there.
#pragma once

#include <optional>
#include <string>

#include "core/experiments/experiment.h"

namespace k3 {

struct Pin {
    const Experiment* module = nullptr;  // where the baseline was pinned
    Params params;                       // its parameters, in that module's declaration
};

// Whether a baseline pinned in `pinned` can be run in `shown`: the same module, or one whose
// parameters include at least half of the pinned module's (the shared groups: workload, fleet, ...).
bool shares_parameter_set(const Experiment& pinned, const Experiment& shown);

// The baseline's parameters in `shown`: its defaults, with every parameter both modules declare set
// to the pinned value. Empty, with the reason in `why`, when the modules share no parameter set or
// `shown` refuses the result.
std::optional<Params> baseline_params(const Pin& pin, const Experiment& shown, std::string& why);

// The parameters whose values differ between two runs of the same module: "engine=vllm (baseline
// sglang), instances=8 (baseline 4)". Empty when they are equal.
std::string parameter_differences(const Params& current, const Params& baseline);

// A table with a baseline column after each numeric column ("TTFT p50 (baseline)"), rows matched
// by their first cell when it is text, else by position. Unmatched cells stay empty text.
Table table_with_baseline(const Table& current, const Table& baseline);

// "+12.5 %" or "-3.1 %" (relative to the baseline), "+2.5 pp" for fractions (percentage points),
// absolute ("+3 GiB") when the baseline is 0; "same" when equal.
std::string format_difference(double current, double baseline, const std::string& unit);

}  // namespace k3
