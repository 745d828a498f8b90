#include "core/modules/shared/workload_params.h"

#include "core/experiments/module_doc.h"
#include "core/fleet/trace.h"

namespace k3 {

void workload_params(ParamList<WorkloadSpec>& l, const WorkloadSeed& seed) {
    auto synthetic_only = [](ParamSpec& s) -> ParamSpec& {
        return s.in_group("Workload").active_when("trace", "synthetic");
    };
    auto documented = [](ParamSpec& s) -> ParamSpec& {
        return s.describe(doc_param_help("workload_params", s.key));
    };
    Choices<SyntheticKind> kinds;
    for (const SyntheticKindName& k : synthetic_kinds()) kinds.push_back({k.kind, k.id, k.label});
    documented(l.text(&WorkloadSpec::trace, "trace", "Workload", {"synthetic", kMooncakeTraceName})
                   .in_group("Workload"));
    documented(synthetic_only(l.choice(&WorkloadSpec::synthetic, "synthetic", "Synthetic workload", kinds)));
    synthetic_only(l.integer(&WorkloadSpec::sessions, "sessions", "Sessions", "sessions", 1, 4096).log())
        .describe(
            "Chat sessions; the mix adds sessions/4 agent tasks and 2 x sessions shared-prompt requests.");
    ParamSpec& s = l.seed(&WorkloadSpec::seed, seed.help);
    if (seed.synthetic_only)
        synthetic_only(s);
    else
        s.in_group("Workload");
}

void validate_workload(const WorkloadSpec& w, Issues& issues) {
    if (std::string e = check_trace_param(w.trace); !e.empty()) issues.error(w.trace, e);
}

std::vector<std::string> workload_data_files(const WorkloadSpec& w) {
    if (w.trace == kMooncakeTraceName) return {kMooncakeTraceFile};
    return {};
}

}  // namespace k3
