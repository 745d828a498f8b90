// Module 5 `checkpoints`: checkpoint placement, retention and compression, measured by replaying a
// workload (synthetic, or the Mooncake conversation trace) through one instance's radix prefix cache
// in metadata mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cache/cache_engine.h"
#include "core/cache/checkpoint_policy.h"
#include "core/cache/codec_effect.h"
#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"
#include "core/cache/radix_cache.h"
#include "core/cache/state_codec.h"
#include "core/cache/tree_view.h"
#include "core/experiments/module.h"
#include "core/fleet/trace_reference.h"
#include "core/fleet/workload_replay.h"
#include "core/fleet/workload_source.h"
#include "core/model/config.h"

namespace k3 {

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class CheckpointsFalsify : uint8_t {
    none,
    codec_bit_random,      // one bit of each encoded random state is flipped before decoding
    codec_bit_runnable,    // one bit of each encoded state of the runnable model is flipped before decoding
    checkpoint_bit,        // one bit of every stored checkpoint is flipped before the resume
    no_codec_prompts,      // the runnable-model codec measurement is asked for no prompts
    sweep_wrong_interval,  // the interval sweep replays its finest interval at its coarsest
    sweep_drops_request,   // the capacity sweep replays the workload without its last request
    tree_miscount,         // the headline tree counts one KV token more than its nodes hold
    leaked_lease,          // a lease on the last prompt is taken after the replay and never released
    capacity_lie,          // the headline cache gets twice the state capacity the run reports
    kv_evicted,            // half of the headline tree's KV is evicted unasked midway
    states_dropped,        // every checkpoint of the headline tree is dropped midway (KV kept)
    recompute_skewed,      // the headline replay's recomputed-token count is one token short
    missing_trace,         // the workload names a trace file that does not exist
    sglang_slot_leak,      // SGLang: one request's mamba slot is never freed at its finish
    sglang_kv_tail_kept,   // SGLang: one request's KV past its last tracked state is never freed
    sglang_lock_left,      // SGLang: one request's lock on its matched node is never released
    sglang_no_branching,   // SGLang: the branching point is never tracked (the driver's ablation)
    vllm_leaked_ref,       // engine=vllm: the first request's blocks are never released
    vllm_stray_block,      // engine=vllm: a hashed block drops out of the hash map midway
    vllm_no_junction,      // engine=vllm: the shared-prefix junction is never reported
};

struct CheckpointsParams {
    WorkloadSpec workload;
    PolicyKind policy = PolicyKind::interval;
    uint32_t interval = 512;  // tokens
    uint32_t chunk = 64;      // tokens
    uint32_t max_states_per_path = 3;
    uint32_t spread_states = 8;
    // Tokens per retained segment (policy=segmented); with engine=vllm also `0` or `dense`.
    std::string retention_interval = "4096";
    StateCodec codec = StateCodec::fp32;
    uint64_t state_capacity = 0;      // states, 0 = unbounded
    uint64_t kv_capacity_tokens = 0;  // 0 = unbounded
    LruRefresh lru_refresh = LruRefresh::node;
    uint32_t page_size = 1;  // tokens
    ModelPreset preset = ModelPreset::kimi_k3;
    CacheEngine engine = CacheEngine::ideal;
    SglangMode sglang_mode = SglangMode::extra_buffer;
    uint32_t chunked_prefill_tokens = 8192;  // tokens
    bool sweeps = true;
    uint32_t vllm_block_tokens = 0;  // 0 = derived as vLLM derives it (module 3's derivation)
    bool vllm_mla_align = true;      // the derivation aligns MLA kernels to 128 tokens (vLLM since #50000)
    uint32_t prefix_match_unit = 0;  // vLLM prefix_match_unit: 0 = unset (hash whole blocks)
    CheckpointsFalsify falsify = CheckpointsFalsify::none;  // not a declared parameter
};

// The SGLang replay (engine=sglang): its counts and the invariants engines.md checks after every
// configuration ("" = holds).
struct SglangOutcome {
    SglangConfig config;
    SglangTotals totals;
    std::string slots, kv, locks;
    uint64_t states_in_tree = 0;
    // engines.md's row of this configuration when the run replays the bundled trace (unbounded pools).
    const SglangReferenceRow* reference = nullptr;
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

// Every request's hits recounted from the workload's tokens without the tree (checkpoints_recount.cpp).
struct CheckpointHitRecount {
    std::vector<RequestHit> hits;  // per request, in replay order
    uint64_t prompt_tokens = 0, kv_hit_tokens = 0, state_hit_tokens = 0;
    uint64_t recomputed_tokens = 0;  // prompt tokens past each recounted state hit
};
// Empty when the recount does not apply (a capacity or a retention policy can drop what it assumes
// is cached) or would compare too many pairs of requests (the Mooncake trace: its block ids are
// counted instead, core/fleet/trace_reference.h).
std::optional<CheckpointHitRecount> recount_hits(const Workload& w, const ReplayConfig& c);

// The segment of policy=segmented (retention_interval as a token count; 4096 when it is not one).
uint32_t segment_tokens(const CheckpointsParams& p);

struct CheckpointsResult;
// engine=vllm: the replay of vLLM's own prefix cache (checkpoints_vllm.cpp).
struct CheckpointsVllm {
    VllmEngineConfig config;
    uint32_t derived_block = 0;    // Platform._align_hybrid_block_size (module 3's derivation)
    uint32_t kernel_multiple = 0;  // the MLA kernel alignment it used
    std::string derivation_error;
    VllmTotals totals;
    std::string audit;
    double replay_ms = 0;
    const VllmReferenceRow* reference = nullptr;  // the engines.md row this run is (bundled trace)
};
// The engine configuration of the parameters (block derived when vllm_block_tokens is 0).
CheckpointsVllm vllm_setup(const CheckpointsParams& p);
VllmFault vllm_fault(CheckpointsFalsify f);
void report_vllm(const CheckpointsParams& p, const CheckpointsResult& m, Report& r);

struct CheckpointsResult {
    std::string load_error;  // the workload did not load
    bool refused() const { return !load_error.empty(); }

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
    // The headline replay's hits per request, and the same recounted from the tokens (synthetic).
    std::vector<RequestHit> replay_hits;
    std::optional<CheckpointHitRecount> recount;
    std::optional<SglangOutcome> sglang;  // engine=sglang

    // The sweeps (empty with sweeps=0).
    std::vector<ReplayResult> intervals, capacities, policies;
    bool interval_sweep_uses_interval_end = false;  // the chosen policy places no interval checkpoints

    CodecMeasurements codecs;
    std::optional<CheckpointsVllm> vllm;  // engine=vllm (then the radix-tree replay and sweeps do not run)
};

ParamList<CheckpointsParams> checkpoints_params();
void validate_checkpoints(const CheckpointsParams& p, Issues& issues);
// What a run costs before it starts (checkpoints_estimate.cpp); a trace is loaded to be counted.
RunEstimate checkpoints_estimate(const CheckpointsParams& p);
std::unique_ptr<Run> start_checkpoints(const CheckpointsParams& p, const Params& raw);
void report_checkpoints(const CheckpointsParams& p, const CheckpointsResult& m, Report& r);

// engine=sglang (checkpoints_sglang.cpp): the replay's configuration, its totals in the headline's
// terms, its own figures and checks.
SglangConfig sglang_config(const CheckpointsParams& p, uint64_t state_bytes);
ReplayTotals sglang_headline_totals(const SglangTotals& t, const CacheStats& s, uint64_t kv_bytes_per_token);
void report_sglang(const SglangOutcome& o, Report& r);

}  // namespace k3
