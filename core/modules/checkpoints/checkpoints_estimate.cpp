// Module 5 `checkpoints`: what a run costs before it starts (Module::estimate). The replays walk every
// request's path through the radix tree and create one node per checkpoint or branch of what is new;
// the tree of the largest replay is the run's peak. A trace is loaded to be counted (load_workload
// keeps it for the run); a synthetic workload is counted from its configured sizes.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/modules/checkpoints/checkpoints.h"

namespace k3 {

namespace {

// Native costs, measured with `/usr/bin/time -f '%U %S'` on `k3cli run checkpoints` (the bundled trace
// at interval 64 ... 16,384 with and without the sweeps; synthetic mixes of 1 ... 4,096 sessions;
// engine=sglang at chunked_prefill_tokens 64 ... 8,192; engine=vllm at blocks of 64 and 256) on a
// loaded 2-core machine, each then doubled (kMargin) for a slower one.
constexpr double kBaseSeconds = 0.6;      // the codec measurement on the runnable model, the report
constexpr double kRequestSeconds = 1e-6;  // one request's walk in one replay, its branch nodes included
// One checkpoint node of distinct tokens in one replay, and in one replay of the capacity and policy
// sweeps (fewer states kept, but evicted). On the synthetic mix: 1.5 us (2,048 sessions at interval 64
// without the sweeps: 1.0 s) and 0.4 us per headline node (the sweeps took 5.8 s of 6.8 with them). On
// the bundled trace, its tokens counted as distinct (63 % are): 0.56 and a quarter of that, taken as 1
// and 0.15 us.
struct NodeCost {
    double headline, sweep;
};
constexpr NodeCost kSyntheticNode{1.5e-6, 0.4e-6}, kTraceNode{1e-6, 0.15e-6};
constexpr double kBlockSeconds = 0.8e-6;  // engine=vllm: one block of a prompt hashed and looked up
// engine=sglang grows faster than its tree: 13.2 s for the bundled trace at chunks of 64 tokens (2.29 M
// nodes as counted here), 5.2 s at 128 and 1.3 s at 256: a power of 1.4 of the node count.
constexpr double kSglangSeconds = 13.2, kSglangNodes = 2.29e6, kSglangPower = 1.4;
constexpr double kSglangRequestSeconds = 10e-6;
constexpr double kNodeBytes = 384;  // a node with its state handle, child links and LRU entry
constexpr double kMargin = 2;

// The workload's size: requests, tokens cached (prompt + output) and how many of them are distinct
// (what the tree holds: shared system prompts and earlier turns are held once).
struct WorkloadSize {
    double requests = 0, tokens = 0, distinct = 0;
    NodeCost node = kSyntheticNode;
};

// The synthetic kinds per session (core/fleet/workload_source.cpp: the agentic tasks are sessions / 4,
// at least one): requests, tokens and distinct tokens of `k3cli run checkpoints synthetic=KIND
// sessions=4096 sweeps=0` (its requests, prompt_tokens plus outputs at their configured means, and
// kv_tokens_held), the distinct ones as the system prompts held once plus each session's own; +25 %
// for the spread of the lognormal lengths.
WorkloadSize synthetic_size(const WorkloadSpec& s) {
    const double n = s.sessions, tasks = std::max(1.0, std::floor(n / 4));
    const bool mix = s.synthetic == SyntheticKind::mix;
    WorkloadSize w;
    auto add = [&](double units, double requests, double tokens, double fixed, double own) {
        w.requests += 1.25 * units * requests;
        w.tokens += 1.25 * units * tokens;
        w.distinct += std::min(1.25 * units * tokens, fixed + 1.25 * units * own);
    };
    if (mix || s.synthetic == SyntheticKind::chat) add(n, 5.02, 22190, 8192, 3492);
    if (mix || s.synthetic == SyntheticKind::agentic) add(tasks, 21.9, 152375, 3072, 17000);
    if (mix || s.synthetic == SyntheticKind::shared) add(n, 2.0, 9180, 32768, 981);
    return w;
}

// A trace as loaded (its tokens are prompts only: their outputs are unknown), every token counted as
// distinct (the bundled trace's are 63 %). Nothing when it does not load: the run reports that.
WorkloadSize trace_size(const WorkloadSpec& s) {
    const LoadedWorkload loaded = load_workload(s);
    WorkloadSize w{.node = kTraceNode};
    if (!loaded.workload) return w;
    w.requests = double(loaded.workload->requests.size());
    for (const Request& r : loaded.workload->requests) w.tokens += double(r.cache_len());
    w.distinct = w.tokens;
    return w;
}

// The replays of engine=ideal: the headline and, with the sweeps, the intervals from 256 tokens, then
// the capacities under both refresh modes and every policy at the chosen interval (checkpoints_run.cpp
// plan_sweeps).
struct Replays {
    double walks = 0, seconds = 0, peak_nodes = 0;
};

void add_replay(Replays& r, const WorkloadSize& w, double interval, double node_seconds, double times = 1) {
    const double nodes = w.distinct / std::max(interval, 1.0);
    r.walks += times * w.requests;
    r.seconds += times * (kRequestSeconds * w.requests + node_seconds * nodes);
    r.peak_nodes = std::max(r.peak_nodes, nodes + 2 * w.requests);
}

Replays ideal_replays(const CheckpointsParams& p, const WorkloadSize& w) {
    Replays r;
    add_replay(r, w, p.interval, w.node.headline);
    if (!p.sweeps) return r;
    for (double x = 256; x <= 16384; x *= 2) add_replay(r, w, x, w.node.headline);
    add_replay(r, w, p.interval, w.node.sweep, 14 + double(policy_ids().size()));
    return r;
}

RunEstimate estimate_of(const CheckpointsParams& p, const WorkloadSize& w) {
    std::string counted;
    double seconds = kBaseSeconds, peak = 0;
    if (p.engine == CacheEngine::vllm) {
        const double block = std::max<uint32_t>(vllm_setup(p).config.block_tokens, 1);
        seconds += kBlockSeconds * w.tokens / block + kRequestSeconds * w.requests;
        peak = w.distinct / block + 2 * w.requests;
        counted = format_si(w.tokens / block) + " blocks of " + format_grouped(block) + " tokens hashed";
    } else if (p.engine == CacheEngine::sglang) {
        peak = w.distinct / std::max<uint32_t>(p.chunked_prefill_tokens, 1) + 2 * w.requests;
        seconds +=
            kSglangSeconds * std::pow(peak / kSglangNodes, kSglangPower) + kSglangRequestSeconds * w.requests;
        counted = format_si(peak) + " tree nodes (one state per chunk of the prefill)";
    } else {
        const Replays r = ideal_replays(p, w);
        seconds += r.seconds;
        peak = r.peak_nodes;
        counted =
            format_si(r.walks) + " request walks over the replays, up to " + format_si(peak) + " tree nodes";
    }
    return {.seconds = kMargin * seconds,
            .bytes = 48.0 * 1024 * 1024 + kNodeBytes * peak + 64.0 * w.requests,
            .counted = counted};
}

}  // namespace

RunEstimate checkpoints_estimate(const CheckpointsParams& p) {
    const WorkloadSize w = p.workload.is_synthetic() ? synthetic_size(p.workload) : trace_size(p.workload);
    RunEstimate e = estimate_of(p, w);
    // What to change: fewer sessions of a synthetic workload; for a trace, a coarser grid of states.
    if (p.workload.is_synthetic()) {
        e.on = &p.workload.sessions;
        return e;
    }
    e.larger_is_cheaper = true;
    e.on = p.engine == CacheEngine::sglang ? static_cast<const void*>(&p.chunked_prefill_tokens)
           : p.engine == CacheEngine::vllm ? static_cast<const void*>(&p.vllm_block_tokens)
                                           : &p.interval;
    return e;
}

}  // namespace k3
