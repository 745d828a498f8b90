// Where the modules get their workloads: a seeded synthetic mix or a trace file in the Mooncake
// format (the bundled conversation trace by name). Parsed traces are kept between runs of the same
// file, so moving a slider does not parse 3 MB again. Modules 5, 11, 12 and 13 share this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/fleet/trace.h"
#include "core/fleet/workload.h"

namespace k3 {

// The synthetic workloads: multi-turn chat, agent trees forking off a common prefix, single-turn
// requests sharing system prompts, or all three interleaved.
enum class SyntheticKind : uint8_t { mix, chat, agentic, shared };

struct WorkloadSpec {
    std::string trace = "synthetic";  // "synthetic", "mooncake" (bundled) or a path
    SyntheticKind synthetic = SyntheticKind::mix;
    uint32_t sessions = 96;  // chat sessions; the mix adds sessions/4 agent tasks and 2 x sessions
                             // shared-prompt requests
    uint64_t seed = 1;
    bool is_synthetic() const { return trace == "synthetic"; }
};

struct LoadedWorkload {
    std::shared_ptr<const Workload> workload;    // null when loading failed
    std::shared_ptr<const MooncakeTrace> trace;  // null for synthetic workloads
    bool bundled = false;                        // the trace is byte for byte the bundled conversation trace
    std::string key;                             // what identifies the file (path, size, checksum)
    std::string error;                           // why loading failed
};

// The limits a trace file is read with for a run (an import checks a file with the same).
TraceLimits workload_trace_limits();

// The synthetic workload of a spec (every generator seeded from spec.seed).
Workload synthetic_workload(const WorkloadSpec& s);
LoadedWorkload load_workload(const WorkloadSpec& s);

// "" when the trace parameter names something loadable (synthetic, the bundled trace, which the
// web page may fetch later, or a file that loads as a trace); otherwise what is wrong, naming the
// line for a malformed file.
std::string check_trace_param(const std::string& trace);

// Every synthetic kind with its id ("mix", "chat", "agentic", "shared") and display name.
struct SyntheticKindName {
    SyntheticKind kind;
    const char* id;
    const char* label;
};
const std::vector<SyntheticKindName>& synthetic_kinds();

}  // namespace k3
