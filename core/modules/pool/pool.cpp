// Module 3 `pool`: its parameters, validation and declaration.
#include "core/modules/pool/pool.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

// The stream's parameters up to the mix shift; its seed is declared after map_at (the page's order).
void stream_params(ParamList<PoolWorkload>& l) {
    l.integer(&PoolWorkload::requests, "requests", "Requests", "requests", 10, 5000)
        .log()
        .in_group("Workload")
        .describe("Length of the seeded request stream served by each design.");
    l.real(&PoolWorkload::arrival_rate, "arrival_rate", "Arrival rate", "requests/step", 0.001, 100)
        .log()
        .in_group("Workload")
        .describe(
            "Poisson arrivals per scheduler step (one step = one decode token for every running "
            "request).");
    l.integer(&PoolWorkload::prompt_tokens, "prompt_tokens", "Prompt (own part)", "tokens", 1, 131072)
        .log()
        .in_group("Workload")
        .describe("Mean of the part of each prompt after any shared prefix; uniform in 0.5x to 1.5x.");
    l.integer(&PoolWorkload::output_tokens, "output_tokens", "Output", "tokens", 1, 16384)
        .log()
        .in_group("Workload")
        .describe("Mean output length; uniform in 0.5x to 1.5x.");
    l.real(&PoolWorkload::prefix_share, "prefix_share", "Share wanting a cached prefix", "fraction", 0, 1)
        .in_group("Workload");
    l.integer(&PoolWorkload::prefixes, "prefixes", "Shared prefixes", "prefixes", 1, 64)
        .in_group("Workload")
        .describe("Distinct shared prefixes, lengths spread geometrically between the two bounds below.");
    l.integer(&PoolWorkload::prefix_min, "prefix_min", "Shortest prefix", "tokens", 1, 131072)
        .log()
        .in_group("Workload")
        .describe("Length of the shortest shared prefix.");
    l.integer(&PoolWorkload::prefix_max, "prefix_max", "Longest prefix", "tokens", 1, 131072)
        .log()
        .in_group("Workload")
        .describe("Length of the longest shared prefix (at least the shortest).");
    l.real(&PoolWorkload::shift_at, "shift_at", "Mix shifts after", "fraction", 0, 1)
        .in_group("Workload")
        .describe("Share of the stream after which prompts change length (the mix shift).");
    l.real(&PoolWorkload::shift_factor, "shift_factor", "Prompt length after the shift", "x", 0.05, 64)
        .log()
        .in_group("Workload");
}

void stream_seed(ParamList<PoolWorkload>& l) {
    l.seed(&PoolWorkload::seed, "Seed of the request stream (arrivals, prompt and output lengths).")
        .in_group("Workload");
}

// Which design could never admit one request (its state slots and a KV page), "" when each can.
std::string design_short_of_one_request(const PoolParams& p, const PoolModel& m, uint64_t budget) {
    const uint64_t states = uint64_t(p.states_per_request), state_bytes = m.state_bytes();
    const uint64_t static_slots =
        static_state_budget(m, {budget, uint32_t(p.page_tokens), p.state_ratio, 0}) / state_bytes;
    if (static_slots < states)
        return "the static split's state pool (" + std::to_string(static_slots) + " slots)";
    HybridBlockPlan plan;
    const bool planned =
        plan_hybrid_blocks(vllm_model_of(p), vllm_kernel_multiple(p), kVllmUserBlockTokens, &plan).empty();
    if (planned && budget / plan.block_bytes < plan.blocks_per_request(p.states_per_request))
        return "vLLM's blocks (" + std::to_string(budget / plan.block_bytes) + " of " +
               format_bytes(double(plan.block_bytes)) + ")";
    if (budget < states * state_bytes + uint64_t(p.page_tokens) * m.kv_bytes_per_token())
        return "the unified pool";
    return "";
}

std::vector<Falsifier<PoolParams>> pool_falsifiers() {
    auto set = [](PoolFalsify f) { return [f](PoolParams& p) { p.falsify = f; }; };
    return {
        {"budget",
         "every design's pool is made from one byte less than one state slot",
         {"pool_built_*"},
         set(PoolFalsify::budget)},
        {"second_owner",
         "the owner table records a running request's page as another request's",
         {"no_page_owned_twice_*"},
         set(PoolFalsify::second_owner)},
        {"page_count",
         "the pool's count of held pages drops by one while the page stays held (freed twice)",
         {"bytes_add_up_*"},
         set(PoolFalsify::page_count)},
        {"lost_page",
         "a page leaves the free list without reaching an owner",
         {"bytes_add_up_*"},
         set(PoolFalsify::lost_page)},
        {"leak_request",
         "a finished request's pages and state slots are never freed",
         {"freed_at_end_*"},
         set(PoolFalsify::leak_request)},
        {"lose_request",
         "one arriving request is lost: never queued, never counted",
         {"requests_accounted_*"},
         set(PoolFalsify::lose_request)},
        {"refuse_fitting",
         "a request that fits is dropped as if it never could",
         {"requests_accounted_*"},
         set(PoolFalsify::refuse_fitting)},
        {"state_size",
         "vLLM's block derivation is told each linear layer's state is half its size",
         {"vllm_block_minimal"},
         set(PoolFalsify::state_size)},
        {"mla_align",
         "vLLM's block derivation (and its pool) is told Kimi K3's MLA kernel alignment is 16, not 128",
         {"vllm_block_minimal", "vllm_block_k3_reference"},
         set(PoolFalsify::mla_align),
         {{"preset", "kimi-k3"}, {"tp", "8"}, {"kv_dtype", "fp8"}}},
        {"conv_draft",
         "vLLM's state page leaves the N draft columns out of the conv window (3 columns, not 3 + N)",
         {"vllm_block_minimal", "vllm_block_k3_reference"},
         set(PoolFalsify::conv_draft),
         {{"preset", "kimi-k3"}, {"tp", "1"}, {"kv_dtype", "fp8"}, {"draft_len", "7"}}},
        {"spec_blocks",
         "with RecoverSSM a request still holds one state block per draft token",
         {"vllm_state_residency_k3_reference"},
         set(PoolFalsify::spec_blocks),
         {{"preset", "kimi-k3"}, {"tp", "1"}, {"kv_dtype", "fp8"}, {"draft_len", "7"}, {"recoverssm", "on"}}},
        {"state_size_qwen",
         "vLLM's block derivation is told Qwen3-Next's state is half its size",
         {"vllm_block_qwen3_next_observed"},
         set(PoolFalsify::state_size),
         {{"preset", "qwen3-next-80b"}, {"tp", "1"}}},
    };
}

}  // namespace

ParamList<PoolParams> pool_params() {
    ParamList<PoolParams> l;
    l.choice(&PoolParams::preset, "preset", "Model",
             preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b,
                             ModelPreset::k3_tiny, ModelPreset::tiny}))
        .in_group("Model and budget")
        .describe(
            "Sizes of the state slot and of KV per token come from this model's exact accounting "
            "(module 2).");
    l.choice(&PoolParams::kv_dtype, "kv_dtype", "KV dtype", kv_dtype_choices()).in_group("Model and budget");
    l.integer(&PoolParams::tp, "tp", "Tensor parallel", "ranks", 1, 64).log().in_group("Model and budget");
    l.real(&PoolParams::budget_mib, "budget_mib", "Pool budget", "MiB", 16, 65536)
        .log()
        .in_group("Model and budget");
    l.integer(&PoolParams::page_tokens, "page_tokens", "KV page (static, unified)", "tokens", 1, 1024)
        .in_group("Designs");
    l.real(&PoolParams::state_ratio, "state_ratio", "mamba_full_memory_ratio r", "", 0.05, 20)
        .log()
        .in_group("Designs");
    l.integer(&PoolParams::block_multiple, "block_multiple", "vLLM kernel block multiple", "tokens", 1, 1024)
        .in_group("Designs")
        .describe("vLLM rounds the inflated attention block up to a multiple of this (FlashAttention: 16).");
    l.choice(&PoolParams::mla_align, "mla_align", "vLLM MLA alignment 128",
             Choices<MlaAlign>{{MlaAlign::automatic, "auto", "auto (Kimi K3 only)"},
                               {MlaAlign::on, "on", ""},
                               {MlaAlign::off, "off", ""}})
        .in_group("Designs");
    l.integer(&PoolParams::draft_len, "draft_len", "Speculative tokens N", "tokens", 0, 8)
        .in_group("Designs");
    l.flag(&PoolParams::recoverssm, "recoverssm", "RecoverSSM").in_group("Designs");
    l.flag(&PoolParams::prefix_caching, "prefix_caching", "vLLM prefix caching (align mode)")
        .in_group("Designs");
    l.integer(&PoolParams::states_per_request, "states_per_request", "State slots per running request",
              "slots", 1, 4)
        .in_group("Designs");
    l.group(&PoolParams::workload, stream_params);
    l.real(&PoolParams::map_at, "map_at", "Pool map taken at", "fraction", 0, 1)
        .in_group("Workload")
        .describe(
            "When the pool maps are recorded, as a share of the arrival period (the same step for every "
            "design).");
    l.group(&PoolParams::workload, stream_seed);
    return l;
}

void validate_pool(const PoolParams& p, Issues& issues) {
    const PoolWorkload& w = p.workload;
    if (w.prefix_min > w.prefix_max)
        issues.error(w.prefix_min, "shortest prefix (" + std::to_string(w.prefix_min) +
                                       ") exceeds the longest (" + std::to_string(w.prefix_max) + ")");
    if (const std::string e = tp_shard_error(pool_config_tp1(p), p.tp); !e.empty()) {
        issues.error(p.tp, e);
        return;
    }
    if (p.recoverssm && p.draft_len == 0)
        issues.error(p.recoverssm,
                     "RecoverSSM recovers speculative decoding: it needs draft_len of at least 1");
    if (p.recoverssm && model_preset(p.preset)->linear_name != "KDA")
        issues.error(p.recoverssm,
                     "RecoverSSM records KDA's delta-rule corrections and gates; this model's "
                     "linear layers are " +
                         model_preset(p.preset)->linear_name);
    const PoolModel m = pool_model_of(p);
    const uint64_t budget = pool_budget_bytes(p);
    if (const std::string short_of = design_short_of_one_request(p, m, budget); !short_of.empty())
        issues.error(p.budget_mib, "a budget of " + format_bytes(double(budget)) + " is too small for " +
                                       short_of + " to hold one request's " +
                                       std::to_string(p.states_per_request) + " state slot(s) of " +
                                       format_bytes(double(m.state_bytes())));
}

Experiment make_pool_experiment() {
    return make_experiment(Module<PoolParams>{
        .number = 3,
        .id = "pool",
        .title = "Unified page pool",
        .component = "page pool",
        .purpose =
            "One request stream against three ways of sharing memory between growing KV pages and fixed "
            "state slots: a static split, one page size for all, and one byte pool with two ends.",
        .params = pool_params(),
        .validate = validate_pool,
        .estimate = pool_estimate,
        .start = start_pool,
        // About 70 ms natively at defaults, more in the browser: run on release, with progress.
        .live = false,
        .headlines =
            {
                {"Kimi-K3 at TP8 (fp8 KV) under vLLM's one page size: attention block that holds one KDA "
                 "layer's state",
                 {{"kv_dtype", "fp8"}},
                 "vllm_block_tokens"},
                {"Kimi-Linear under vLLM's one page size: attention block needed to hold one KDA layer's "
                 "state",
                 {{"preset", "kimi-linear-48b"}, {"tp", "1"}},
                 "vllm_block_tokens"},
            },
        .falsifiers = pool_falsifiers()});
}

K3_REGISTER_EXPERIMENT(make_pool_experiment);

}  // namespace k3
