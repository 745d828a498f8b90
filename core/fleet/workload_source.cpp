#include "core/fleet/workload_source.h"

#include <algorithm>

#include "core/base/crc32c.h"
#include "core/base/data_files.h"
#include "core/base/numfmt.h"

namespace k3 {

namespace {
constexpr uint32_t kBundledCrc = 0x33f5c259u;  // tests/data/traces/mooncake_conversation_trace.jsonl
constexpr uint64_t kBundledBytes = 3029533;
}  // namespace

const std::vector<SyntheticKindName>& synthetic_kinds() {
    static const std::vector<SyntheticKindName> k = {
        {SyntheticKind::mix, "mix", "mix of all three"},
        {SyntheticKind::chat, "chat", "multi-turn chat"},
        {SyntheticKind::agentic, "agentic", "agentic branching"},
        {SyntheticKind::shared, "shared", "shared system prompts"}};
    return k;
}

Workload synthetic_workload(const WorkloadSpec& s) {
    const uint32_t n = s.sessions;
    ChatConfig cc;
    cc.sessions = n;
    cc.seed = s.seed * 4 + 1;
    AgenticConfig ac;
    ac.tasks = std::max<uint32_t>(1, n / 4);
    ac.seed = s.seed * 4 + 2;
    SharedPromptConfig sc;
    sc.requests = 2 * n;
    sc.seed = s.seed * 4 + 3;
    switch (s.synthetic) {
        case SyntheticKind::chat: return chat_workload(cc);
        case SyntheticKind::agentic: return agentic_workload(ac);
        case SyntheticKind::shared: return shared_prompt_workload(sc);
        case SyntheticKind::mix: break;
    }
    return merge_workloads({chat_workload(cc), agentic_workload(ac), shared_prompt_workload(sc)}, "mix");
}

TraceLimits workload_trace_limits() {
    TraceLimits lim;
    lim.max_total_ids = 4u << 20;  // 2 G tokens: beyond what a page replays
    return lim;
}

LoadedWorkload load_workload(const WorkloadSpec& s) {
    LoadedWorkload lw;
    if (s.is_synthetic()) {
        lw.workload = std::make_shared<const Workload>(synthetic_workload(s));
        return lw;
    }
    static LoadedWorkload cached;  // one file at a time
    const TraceLimits lim = workload_trace_limits();
    std::string text, err, path;
    if (!read_trace_text(s.trace, lim.max_bytes, text, path, err)) {
        lw.error = err;
        return lw;
    }
    const uint32_t crc = crc32c(text.data(), text.size());
    const std::string key = path + "#" + std::to_string(text.size()) + "#" + std::to_string(crc);
    if (cached.key == key && cached.workload) return cached;
    TraceResult tr = parse_mooncake(text, lim);
    if (!tr.ok()) {
        lw.error = path + ": " + tr.error;
        return lw;
    }
    lw.key = key;
    lw.bundled = crc == kBundledCrc && text.size() == kBundledBytes;
    lw.trace = std::make_shared<const MooncakeTrace>(std::move(tr.trace));
    lw.workload = std::make_shared<const Workload>(mooncake_workload(*lw.trace));
    cached = lw;
    return lw;
}

std::string check_trace_param(const std::string& trace) {
    // The bundled trace may arrive later (the web page fetches it before the run). A path is loaded
    // in full, so that a malformed file is refused as bad input before the run, naming its line; the
    // parse is kept for the run (load_workload's cache), so it is paid once. Where there is no disk (the
    // page) a path is refused before anything touches a file (core/base/data_files.h), unless it names
    // a trace imported there, whose bytes are registered.
    if (trace == "synthetic" || trace == kMooncakeTraceName) return {};
    if (!disk_files() && !registered_data_file(trace))
        return "trace '" + shown_text(trace) +
               "' is not available here: the page reads no files from disk, only the bundled trace "
               "('mooncake'), a synthetic workload ('synthetic') or a trace imported in this session";
    WorkloadSpec s;
    s.trace = trace;
    return load_workload(s).error;
}

}  // namespace k3
