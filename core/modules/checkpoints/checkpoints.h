// Module 5 `checkpoints`: checkpoint placement, retention and compression, measured by replaying a
// workload (synthetic, or the Mooncake conversation trace) through one instance's radix prefix cache
// in metadata mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cache/checkpoint_policy.h"
#include "core/cache/codec_effect.h"
#include "core/cache/radix_cache.h"
#include "core/cache/state_codec.h"
#include "core/cache/tree_view.h"
#include "core/experiments/module.h"
#include "core/fleet/trace_reference.h"
#include "core/fleet/workload_replay.h"
#include "core/fleet/workload_source.h"
#include "core/model/config.h"

namespace k3 {

struct CheckpointsParams {
    WorkloadSpec workload;
    PolicyKind policy = PolicyKind::interval;
    uint32_t interval = 512;  // tokens
    uint32_t chunk = 64;      // tokens
    uint32_t max_states_per_path = 3;
    uint32_t spread_states = 8;
    uint32_t retention_interval = 4096;  // tokens
    StateCodec codec = StateCodec::fp32;
    uint64_t state_capacity = 0;      // states, 0 = unbounded
    uint64_t kv_capacity_tokens = 0;  // 0 = unbounded
    LruRefresh lru_refresh = LruRefresh::node;
    uint32_t page_size = 1;  // tokens
    ModelPreset preset = ModelPreset::kimi_linear_48b;
    bool sweeps = true;
};

// Why a run was refused before replaying: the tree it would build exceeds what the page can hold.
struct NodeEstimate {
    uint64_t nodes = 0;   // up to one per checkpoint or branch
    uint64_t tokens = 0;  // cached tokens of the workload
    uint64_t finest = 0;  // the finest checkpoint interval the run would replay
    uint64_t limit = 0;
};

// The radix tree at the end of the headline run (the root counts only for the fan-out).
struct TreeSummary {
    uint64_t nodes = 0, leaves = 0, with_state = 0, tombstones = 0, never_had_state = 0, max_depth = 0,
             max_fan_out = 0, forks = 0;
};

// One codec on a random state shaped like a KDA head of the preset.
struct CodecOnRandomState {
    StateCodec codec = StateCodec::fp32;
    CodecError error;
    uint64_t checkpoint_bytes = 0;
};

struct CodecMeasurements {
    size_t rows = 0, cols = 0;  // of the random state
    uint64_t fp32_checkpoint_bytes = 0;
    std::vector<CodecOnRandomState> random;
    serve::CodecEffectConfig effect_config;
    std::vector<serve::CodecEffect> effects;  // on the runnable model; empty when it failed
    std::string effect_error;
};

struct CheckpointsResult {
    std::string load_error;               // the workload did not load
    std::optional<NodeEstimate> too_big;  // the run would not fit in the page's memory
    bool refused() const { return !load_error.empty() || too_big.has_value(); }

    ModelConfig model;
    ReplayConfig config;  // the headline run's
    std::string workload_name;
    uint64_t workload_requests = 0;
    bool from_trace = false, bundled_trace = false;

    // The headline run.
    ReplayTotals totals;
    CacheStats stats;                               // at the end of the replay
    uint64_t max_states_held = 0, max_kv_held = 0;  // between requests
    double replay_ms = 0;
    TreeSummary tree;
    CompressedTree view;
    std::string audit;  // "" when the tree's invariants hold
    uint64_t leases_after_replay = 0;
    CacheStats after_clear;  // once the cache is dropped
    // The trace's hits counted from its block ids alone (trace, unbounded, page size 1).
    std::optional<TraceReferenceHits> reference;

    // The sweeps (empty with sweeps=0).
    std::vector<ReplayResult> intervals, capacities, policies;
    bool interval_sweep_uses_interval_end = false;  // the chosen policy places no interval checkpoints

    CodecMeasurements codecs;
};

ParamList<CheckpointsParams> checkpoints_params();
void validate_checkpoints(const CheckpointsParams& p, Issues& issues);
std::unique_ptr<Run> start_checkpoints(const CheckpointsParams& p, const Params& raw);
void report_checkpoints(const CheckpointsParams& p, const CheckpointsResult& m, Report& r);

}  // namespace k3
