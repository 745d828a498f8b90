// Module 5 `checkpoints`: its parameters (help longer than a line is in checkpoints.md), validation and
// declaration.
#include "core/modules/checkpoints/checkpoints.h"

#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"
#include "core/modules/shared/engine_params.h"
#include "core/modules/shared/workload_params.h"

namespace k3 {

namespace {

void checkpoint_params(ParamList<CheckpointsParams>& l) {
    const std::string group = "Checkpoints";
    l.choice(&CheckpointsParams::policy, "policy", "Checkpoint policy",
             choices_from<PolicyKind>(policy_ids(), policy_labels(), parse_policy))
        .in_group(group)
        .describe("Where requests leave state checkpoints and which ones the tree keeps (How it works).");
    l.integer(&CheckpointsParams::interval, "interval", "Checkpoint interval", "tokens", 16, 65536)
        .log()
        .in_group(group);
    l.integer(&CheckpointsParams::chunk, "chunk", "Kernel chunk", "tokens", 1, 1024)
        .log()
        .in_group(group)
        .describe(
            "Chunk of the chunked prefill kernel (FLA uses 64). Junction checkpoints are floored to "
            "this grid.");
    l.integer(&CheckpointsParams::max_states_per_path, "max_states_per_path", "States per path (cap)",
              "states", 1, 4096)
        .in_group(group)
        .active_when("policy", "cap");
    l.integer(&CheckpointsParams::spread_states, "spread_states", "States per path (spread)", "states", 1,
              4096)
        .in_group(group)
        .active_when("policy", "spread")
        .describe("At most this many states per path, chosen evenly spread along it.");
    l.text(&CheckpointsParams::retention_interval, "retention_interval", "Retention segment (tokens)",
           {"4096", "0", "dense"})
        .in_group(group);
    l.choice(&CheckpointsParams::codec, "codec", "Checkpoint codec",
             choices_from<StateCodec>(state_codec_ids(), {}, parse_state_codec))
        .in_group(group);
}

void engine_params(ParamList<CheckpointsParams>& l) {
    const std::string group = "Engine";
    using P = CheckpointsParams;
    engine_param_specs(
        l,
        EngineParamFields<P>{&P::engine, &P::sglang_mode, &P::chunked_prefill_tokens, &P::vllm_block_tokens},
        [&](ParamSpec& s) -> ParamSpec& { return s.in_group(group); });
    l.flag(&CheckpointsParams::vllm_mla_align, "vllm_mla_align", "vLLM MLA block alignment 128")
        .in_group(group)
        .active_when("engine", "vllm");
    l.integer(&CheckpointsParams::prefix_match_unit, "prefix_match_unit",
              "vLLM prefix match unit (0 = unset)", "tokens", 0, 65536)
        .in_group(group)
        .active_when("engine", "vllm");
}

void capacity_params(ParamList<CheckpointsParams>& l) {
    const std::string group = "Capacity";
    l.integer(&CheckpointsParams::state_capacity, "state_capacity", "State capacity", "states", 0, 1e8)
        .in_group(group);
    l.integer(&CheckpointsParams::kv_capacity_tokens, "kv_capacity_tokens", "KV capacity", "tokens", 0, 1e11)
        .in_group(group)
        .describe("Tokens of attention KV the cache may hold; 0 = unbounded. LRU leaves go first.");
    l.choice(&CheckpointsParams::lru_refresh, "lru_refresh", "LRU refresh on a hit",
             Choices<LruRefresh>{{LruRefresh::node, "node", "matched node only"},
                                 {LruRefresh::path, "path", "whole path"}})
        .in_group(group);
    l.integer(&CheckpointsParams::page_size, "page_size", "KV page size", "tokens", 1, 64)
        .log()
        .in_group(group)
        .describe(
            "KV is cached in whole pages: a prompt's partial last page is not cached (as in SGLang "
            "and vLLM).");
}

using Kv = std::vector<std::pair<std::string, std::string>>;

Falsifier<CheckpointsParams> falsifier(std::string id, std::string does, std::vector<std::string> keys,
                                       CheckpointsFalsify f, Kv params = {{"sweeps", "0"}}) {
    return {std::move(id), std::move(does), std::move(keys), [f](CheckpointsParams& p) { p.falsify = f; },
            std::move(params)};
}

// Most run without the sweeps, which only their own checks need; the trace's on the bundled trace.
std::vector<Falsifier<CheckpointsParams>> checkpoints_falsifiers() {
    using F = CheckpointsFalsify;
    const Kv trace = {{"trace", "mooncake"}, {"sweeps", "0"}};
    const Kv sglang = {{"engine", "sglang"}, {"sweeps", "0"}};
    const Kv vllm = {{"engine", "vllm"}, {"vllm_block_tokens", "256"}, {"sweeps", "0"}};
    return {
        falsifier("codec_bit_random", "one bit of each encoded random state is flipped before decoding",
                  {"codec_error_within_bound"}, F::codec_bit_random),
        falsifier("codec_bit_runnable",
                  "one bit of each encoded state of the runnable model is flipped before decoding",
                  {"codec_error_within_bound_runnable_model"}, F::codec_bit_runnable),
        falsifier("checkpoint_bit", "one bit of every stored checkpoint is flipped before the resume",
                  {"fp32_resume_bitwise"}, F::checkpoint_bit),
        falsifier("no_codec_prompts", "the codec measurement on the runnable model is asked for no prompts",
                  {"codecs_measured_on_runnable_model"}, F::no_codec_prompts),
        falsifier("sweep_wrong_interval", "the interval sweep replays its finest interval at its coarsest",
                  {"finer_interval_never_recomputes_more"}, F::sweep_wrong_interval, {}),
        falsifier("sweep_drops_request", "the capacity sweep replays the workload without its last request",
                  {"capacity_sweep_reproduces_headline"}, F::sweep_drops_request, {}),
        falsifier("tree_miscount", "the tree counts one kv token more than its nodes hold, midway",
                  {"tree_invariants_hold"}, F::tree_miscount),
        falsifier("leaked_lease", "a lease on the last prompt is taken after the replay and never released",
                  {"counts_return_to_zero"}, F::leaked_lease),
        falsifier("capacity_lie", "the cache is built with twice the state capacity the run reports",
                  {"capacities_hold"}, F::capacity_lie, {{"state_capacity", "200"}, {"sweeps", "0"}}),
        falsifier("kv_evicted", "half of the tree's kv is evicted unasked midway through the replay",
                  {"kv_hit_matches_token_recount"}, F::kv_evicted),
        falsifier("states_dropped", "every checkpoint of the tree is dropped midway, its kv kept",
                  {"state_hit_matches_token_recount"}, F::states_dropped),
        falsifier("recompute_skewed", "the replay's recomputed-token count is one token short",
                  {"recomputed_matches_recount"}, F::recompute_skewed),
        falsifier("kv_evicted_trace", "half of the tree's kv is evicted unasked midway through the trace",
                  {"kv_hit_matches_block_count", "mooncake_reference_hits"}, F::kv_evicted, trace),
        falsifier("states_dropped_trace", "every checkpoint of the tree is dropped midway through the trace",
                  {"state_hit_matches_block_count"}, F::states_dropped, trace),
        falsifier("missing_trace", "the workload names a trace file that does not exist", {"workload_loaded"},
                  F::missing_trace),
        falsifier("sglang_slot_leak", "SGLang: one request's mamba slot is never freed at its finish",
                  {"sglang_mamba_slots_match_states"}, F::sglang_slot_leak, sglang),
        falsifier("sglang_kv_tail_kept",
                  "SGLang: one request's KV past its last tracked state is never freed",
                  {"sglang_kv_slots_match_tree"}, F::sglang_kv_tail_kept, sglang),
        falsifier("sglang_lock_left", "SGLang: one request's lock on its matched node is never released",
                  {"sglang_no_locks_left", "counts_return_to_zero"}, F::sglang_lock_left, sglang),
        falsifier("sglang_tree_miscount",
                  "SGLang: the tree counts one kv token more than its nodes hold, midway",
                  {"sglang_sanity_checks", "tree_invariants_hold"}, F::tree_miscount, sglang),
        falsifier("sglang_no_branching",
                  "SGLang: the branching point is never tracked (the engines.md driver's ablation)",
                  {"sglang_engine_figures"}, F::sglang_no_branching,
                  {{"trace", "mooncake"}, {"engine", "sglang"}, {"sweeps", "0"}}),
        falsifier("vllm_leaked_ref", "engine=vllm: the first request's blocks are never released",
                  {"vllm_blocks_consistent"}, F::vllm_leaked_ref, vllm),
        falsifier("vllm_stray_block", "engine=vllm: a hashed block drops out of the hash map midway",
                  {"vllm_blocks_consistent"}, F::vllm_stray_block, vllm),
        falsifier("vllm_no_junction", "engine=vllm: the shared-prefix junction is never reported",
                  {"vllm_reference_hits"}, F::vllm_no_junction,
                  {{"trace", "mooncake"},
                   {"engine", "vllm"},
                   {"preset", "kimi-linear-48b"},
                   {"retention_interval", "0"},
                   {"sweeps", "0"}}),
    };
}

}  // namespace

ParamList<CheckpointsParams> checkpoints_params() {
    ParamList<CheckpointsParams> l;
    l.group(&CheckpointsParams::workload, [](ParamList<WorkloadSpec>& w) {
        workload_params(w, {.help = "Seed of the synthetic workload.", .synthetic_only = true});
    });
    engine_params(l);  // first: which engine's rules the replay follows decides what the rest means
    checkpoint_params(l);
    capacity_params(l);
    l.choice(&CheckpointsParams::preset, "preset", "Model",
             preset_choices({ModelPreset::kimi_k3, ModelPreset::kimi_linear_48b, ModelPreset::qwen3_next_80b,
                             ModelPreset::k3_tiny, ModelPreset::tiny}))
        .in_group("Model")
        .describe("Bytes per state checkpoint and per KV token (module 2's accounting).");
    l.flag(&CheckpointsParams::sweeps, "sweeps", "Sweeps (intervals, capacities, policies)").in_group("Run");
    return l;
}

uint32_t segment_tokens(const CheckpointsParams& p) {
    const std::optional<VllmRetention> r = parse_vllm_retention(p.retention_interval);
    return r && r->kind == VllmRetention::interval ? r->tokens : 4096;
}

namespace {

void validate_retention(const CheckpointsParams& p, Issues& issues) {
    const std::optional<VllmRetention> r = parse_vllm_retention(p.retention_interval);
    const std::string bad = "retention_interval '" + p.retention_interval + "'";
    if (!r) {
        issues.error(p.retention_interval, bad + " is not a token count, 0 or dense");
        return;
    }
    if (p.engine == CacheEngine::ideal && p.policy == PolicyKind::segmented &&
        (r->kind != VllmRetention::interval || r->tokens < 16 || r->tokens > 1048576))
        issues.error(p.retention_interval, bad +
                                               ": policy=segmented takes a segment of 16 to 1,048,576 tokens "
                                               "(0 and dense are vLLM's, engine=vllm)");
}

void validate_sglang(const CheckpointsParams& p, Issues& issues) {
    if (p.engine != CacheEngine::sglang) return;
    const std::string refused = sglang_config_error(sglang_config(p, 0));
    if (!refused.empty()) issues.error(p.page_size, refused);
    const std::string unbounded =
        "engine=sglang replays SGLang with unbounded pools (reference/engines.md, rule 8: eviction never "
        "triggers); set it to 0";
    if (p.state_capacity != 0) issues.error(p.state_capacity, "state_capacity: " + unbounded);
    if (p.kv_capacity_tokens != 0) issues.error(p.kv_capacity_tokens, "kv_capacity_tokens: " + unbounded);
}

void validate_vllm(const CheckpointsParams& p, Issues& issues) {
    if (p.engine != CacheEngine::vllm) return;
    if (p.state_capacity || p.kv_capacity_tokens)
        issues.error(p.engine,
                     "engine=vllm replays an unbounded block pool: state_capacity and kv_capacity_tokens "
                     "must be 0 (vLLM's one shared pool of blocks is not module 5's two capacities)");
    if (p.vllm_block_tokens && p.vllm_block_tokens < 16)
        issues.error(p.vllm_block_tokens, "vllm_block_tokens: vLLM's smallest block is 16 tokens");
    if (p.prefix_match_unit && p.prefix_match_unit < 16)
        issues.error(p.prefix_match_unit, "prefix_match_unit: at least 16 tokens");
    const CheckpointsVllm v = vllm_setup(p);
    if (!v.derivation_error.empty())
        issues.error(p.vllm_block_tokens,
                     "vLLM's block cannot be derived for this model: " + v.derivation_error);
    else if (p.prefix_match_unit && v.config.block_tokens % p.prefix_match_unit != 0)
        issues.error(p.prefix_match_unit, "prefix_match_unit " + std::to_string(p.prefix_match_unit) +
                                              " does not divide vLLM's block of " +
                                              std::to_string(v.config.block_tokens) + " tokens");
}

}  // namespace

void validate_checkpoints(const CheckpointsParams& p, Issues& issues) {
    validate_retention(p, issues);
    validate_sglang(p, issues);
    validate_vllm(p, issues);
    const std::string interval = "interval " + std::to_string(p.interval);
    if (p.interval % p.chunk != 0)
        issues.error(p.interval, interval + " is not a multiple of the kernel chunk " +
                                     std::to_string(p.chunk) +
                                     ": a resume from such a checkpoint is not bitwise exact");
    if (p.interval % p.page_size != 0)
        issues.error(p.interval,
                     interval + " is not a multiple of the page size " + std::to_string(p.page_size));
    validate_workload(p.workload, issues);
}

Experiment make_checkpoints_experiment() {
    return make_experiment(Module<CheckpointsParams>{
        .number = 5,
        .id = "checkpoints",
        .title = "Checkpoint placement, retention, compression",
        .component = "prefix caching",
        .purpose =
            "Where to keep recurrent-state checkpoints, how many, and in what format: token hit, memory "
            "and recompute of a workload replayed through one instance's prefix cache.",
        .params = checkpoints_params(),
        .validate = validate_checkpoints,
        .estimate = checkpoints_estimate,
        .start = start_checkpoints,
        .data_files = [](const CheckpointsParams& p) { return workload_data_files(p.workload); },
        .live = false,
        .falsifiers = checkpoints_falsifiers()});
}

K3_REGISTER_EXPERIMENT(make_checkpoints_experiment);

}  // namespace k3
