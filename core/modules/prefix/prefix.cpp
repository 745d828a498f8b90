// Module 4 `prefix`: its parameters, validation and declaration.
#include "core/modules/prefix/prefix.h"

#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/experiments/module_doc.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/engine_params.h"
#include "core/modules/shared/runnable_cost.h"

namespace k3 {

namespace {

void workload_params(ParamList<PrefixParams>& l) {
    auto workload = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Workload"); };
    workload(l.choice(
        &PrefixParams::workload, "workload", "Workload",
        Choices<PrefixWorkload>{{PrefixWorkload::mix, "mix", "all three, interleaved"},
                                {PrefixWorkload::system, "system", "shared system prompt"},
                                {PrefixWorkload::chat, "chat", "multi-turn chat"},
                                {PrefixWorkload::branches, "branches", "branches off one document"}}));
    workload(l.integer(&PrefixParams::requests, "requests", "Requests per scenario", "requests", 1, 32))
        .describe("Requests of each scenario (chat: turns).");
    workload(l.integer(&PrefixParams::shared_tokens, "shared_tokens", "Shared prefix", "tokens", 1, 2048))
        .log()
        .describe("The system prompt, the document of the branches; the chat opens with half of it.");
    workload(
        l.integer(&PrefixParams::user_tokens, "user_tokens", "Unique part per request", "tokens", 1, 1024))
        .log()
        .describe("Each question, turn or branch: this many tokens, +-25 % (seeded).");
    workload(l.integer(&PrefixParams::gen, "gen", "Output tokens", "tokens", 1, 64));
    workload(l.seed(&PrefixParams::seed,
                    "Seed of the workload's tokens (the runnable model's weights are fixed, seed 1)."));
}

void cache_params(ParamList<PrefixParams>& l) {
    auto cache = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Cache"); };
    cache(l.integer(&PrefixParams::interval, "interval", "Checkpoint interval N", "tokens", 1, 4096)).log();
    cache(l.integer(&PrefixParams::chunk, "chunk", "Kernel chunk", "tokens", 16, 128)).log();
    cache(l.integer(&PrefixParams::page_size, "page_size", "KV page size", "tokens", 1, 64)).log();
    cache(l.integer(&PrefixParams::state_capacity, "state_capacity", "State capacity", "states", 0, 4096))
        .describe("Checkpoints the tree may hold (LRU); 0 = unbounded.");
    cache(l.choice(
        &PrefixParams::kv_only_start, "kv_only_start", "KV-only: recurrent state",
        Choices<serve::KvOnlyStart>{{serve::KvOnlyStart::zero, "zero", "zero (has_initial_states false)"},
                                    {serve::KvOnlyStart::stale, "stale", "stale (previous request's)"}}));
    cache(l.choice(&PrefixParams::codec, "codec", "Checkpoint codec",
                   choices_from<StateCodec>(state_codec_ids(), {}, parse_state_codec)));
}

// The engine parameters modules 5 and 11-13 declare (core/modules/shared/engine_params.h), at this
// module's scale: a vLLM block is given, on the kernel chunk grid (no derivation for the runnable
// model), and chunks may be as short as 16 tokens.
void engine_params(ParamList<PrefixParams>& l) {
    using P = PrefixParams;
    const auto engine_group = [doc = doc_help_in_group("prefix", "Engine")](ParamSpec& s) -> ParamSpec& {
        if (s.key == "vllm_block_tokens") s.label = "vLLM block";
        if (s.key == "vllm_block_tokens" || s.key == "chunked_prefill_tokens") s.min = 16;
        return doc(s);
    };
    engine_param_specs(l,
                       EngineParamFields<P>{&P::engine, &P::sglang_mode, &P::chunked_prefill_tokens,
                                            &P::vllm_block_tokens, &P::retention_interval},
                       engine_group);
}

using Kv = std::vector<std::pair<std::string, std::string>>;

Falsifier<PrefixParams> falsifier(std::string id, std::string does, std::vector<std::string> keys,
                                  PrefixFalsify f, Kv extra = {}) {
    // Two requests sharing a system prompt reach every check at a fraction of the defaults' cost.
    Kv kv = {{"workload", "system"}, {"requests", "2"}, {"user_tokens", "4"}, {"gen", "2"}};
    kv.insert(kv.end(), extra.begin(), extra.end());
    return {std::move(id), std::move(does), std::move(keys), [f](PrefixParams& p) { p.falsify = f; },
            std::move(kv)};
}

std::vector<Falsifier<PrefixParams>> prefix_falsifiers() {
    using F = PrefixFalsify;
    return {
        falsifier("flip_resumed_state",
                  "the state methods flip the sign bit of one value of every state they resume from",
                  {"aligned_resumes_bitwise"}, F::flip_resumed_state),
        falsifier("zero_resumed_state", "the state methods resume from a zero state, as kv-only reuse does",
                  {"other_resumes_within_rounding"}, F::zero_resumed_state),
        falsifier("exact_kv_only", "kv-only reuse is given the true state of the prefix it skips",
                  {"kv_only_flagged"}, F::exact_kv_only),
        falsifier("probe_zero_state", "the off-grid probe resumes with a zero state",
                  {"off_grid_within_rounding"}, F::probe_zero_state),
        falsifier("probe_on_grid", "the off-grid probe resumes on the chunk grid instead",
                  {"off_grid_within_rounding"}, F::probe_on_grid),
        falsifier("states_dropped", "the trees drop every checkpoint they hold after each request",
                  {"hits_match_token_recount"}, F::states_dropped),
        falsifier("kv_evicted", "the trees evict half of their kv after each request",
                  {"hits_match_token_recount"}, F::kv_evicted),
        falsifier("recomputed_skewed", "every resumed request's recomputed count is recorded one token short",
                  {"prefilled_exactly_the_rest"}, F::recomputed_skewed),
        falsifier("stray_state_slot",
                  "a state slot is taken from each method's pool behind the tree after request 1",
                  {"tree_pages_pool_agree"}, F::stray_state_slot),
        falsifier("leaked_slot", "a state slot is taken from each method's pool after its cache is dropped",
                  {"pool_returns_to_zero"}, F::leaked_slot),
        falsifier("bad_prompt_token", "the first prompt holds a token outside the vocabulary",
                  {"run_completed"}, F::bad_prompt_token),
        falsifier("bad_output_token", "kv-only reuse is fed an output token outside the vocabulary",
                  {"served_every_request_*"}, F::bad_output_token),
        falsifier("sglang_state_misplaced",
                  "engine=sglang: every state is saved one page below where SGLang's rule puts it",
                  {"engine_states_where_rules_put_them"}, F::engine_misplaced, {{"engine", "sglang"}}),
        falsifier("vllm_state_misplaced",
                  "engine=vllm: every state is saved one page below where vLLM's rule puts it",
                  {"engine_states_where_rules_put_them", "vllm_hits_on_block_grid"}, F::engine_misplaced,
                  {{"engine", "vllm"}}),
    };
}

}  // namespace

ParamList<PrefixParams> prefix_params() {
    ParamList<PrefixParams> l;
    workload_params(l);
    cache_params(l);
    engine_params(l);
    return l;
}

std::string prefix_engine_label(const PrefixParams& p) {
    if (p.engine == CacheEngine::sglang)
        return std::string("SGLang MambaRadixCache (") + sglang_mode_id(p.sglang_mode) + ", chunks of " +
               std::to_string(p.chunked_prefill_tokens) + ")";
    if (p.engine == CacheEngine::vllm)
        return "vLLM V1 align mode (block " + std::to_string(p.vllm_block_tokens) + ", retention " +
               p.retention_interval + ")";
    return kPrefixMethods[size_t(PrefixMethod::engine)].label;
}

void prefix_engine_config(const PrefixParams& p, serve::ServerConfig& c) {
    c.engine = p.engine;
    c.sglang.mode = p.sglang_mode;
    c.sglang.chunked_prefill_tokens = p.chunked_prefill_tokens;
    c.sglang.page_size = p.page_size;
    c.vllm.block_tokens = p.vllm_block_tokens;
    c.vllm.retention = parse_vllm_retention(p.retention_interval).value_or(VllmRetention{});
}

namespace {

void validate_engine(const PrefixParams& p, Issues& issues) {
    if (p.engine == CacheEngine::ideal) return;
    const std::optional<VllmRetention> r = parse_vllm_retention(p.retention_interval);
    if (!r)
        issues.error(p.retention_interval,
                     "retention_interval '" + p.retention_interval + "' is not a token count, 0 or dense");
    if (p.state_capacity != 0)
        issues.error(p.state_capacity, "engine=" + std::string(cache_engine_id(p.engine)) +
                                           " follows the engine's rules with unbounded pools (reference/"
                                           "engines.md): set state_capacity to 0");
    serve::ServerConfig c;
    c.cache.page_size = p.page_size;
    prefix_engine_config(p, c);
    const uint64_t chunk = p.chunk;
    if (p.engine == CacheEngine::sglang) {
        if (const std::string e = sglang_config_error(c.sglang); !e.empty())
            issues.error(p.page_size, e);
        else if (c.sglang.mamba_chunk() % p.page_size != 0 || c.sglang.mamba_chunk() % chunk != 0)
            issues.error(p.chunk, "SGLang keeps states on a grid of max(FLA chunk 64, page) = " +
                                      std::to_string(c.sglang.mamba_chunk()) +
                                      " tokens, which must be a multiple of the kernel chunk and the page");
        else if (p.chunked_prefill_tokens % chunk != 0)
            issues.warning(p.chunked_prefill_tokens,
                           "chunked_prefill_tokens is off the kernel chunk grid: SGLang's chunks split the "
                           "prefill off the grid (within rounding only)");
    }
    if (p.engine == CacheEngine::vllm) {
        if (p.vllm_block_tokens % p.page_size != 0)
            issues.error(p.vllm_block_tokens, "vllm_block_tokens is not a multiple of the page size");
        else if (p.vllm_block_tokens % chunk != 0)
            issues.warning(
                p.vllm_block_tokens,
                "vllm_block_tokens is off the kernel chunk grid: resumes at a block are exact only "
                "within rounding");
    }
}

}  // namespace

void validate_prefix(const PrefixParams& p, Issues& issues) {
    validate_engine(p, issues);
    const uint64_t interval = p.interval, chunk = p.chunk, page = p.page_size;
    if (interval % page != 0)
        issues.error(p.interval, "interval " + std::to_string(interval) +
                                     " is not a multiple of the page size " + std::to_string(page) +
                                     ": checkpoints sit on page boundaries");
    else if (interval % chunk != 0)
        issues.warning(p.interval, "interval " + std::to_string(interval) +
                                       " is off the kernel chunk grid (" + std::to_string(chunk) +
                                       "): resumes are exact only within rounding, and requests split their "
                                       "own prefill");
    const PrefixEstimate e = estimate_prefix(p);
    const uint64_t states = prefix_states(e, prefix_state_grid(p), p.state_capacity);
    const uint64_t bytes = prefix_pool_bytes(default_runnable_config(), e, states, p.page_size);
    if (bytes > kMaxBackingBytes)
        issues.error(p.interval, "the checkpoints and KV of this workload need up to " +
                                     format_bytes(double(bytes)) + " of pool, over the pool's limit of " +
                                     format_bytes(double(kMaxBackingBytes)) +
                                     ": raise the interval, set a state capacity or shorten the workload");
}

namespace {

// The runnable model's work. The cold pass (and the engine's method, with another engine) prefill every
// prompt whole; the other methods resume what an earlier request left: KV-only reuse on its pages,
// states every N tokens on their grid, states at request ends only a conversation's earlier turn,
// states at branch points a shared prefix from the third request on (the second makes the branch).
// A state capacity evicts the least recently used, and what these workloads reuse is their latest
// (`k3cli run prefix workload=chat requests=32 state_capacity=4` recomputed 1,405 of 8,765 tokens): not
// counted. Every pass decodes every request's outputs; then the off-grid probe resumes the longest
// prompt.
ForwardWork prefix_work(const PrefixParams& p) {
    const bool engine = p.engine != CacheEngine::ideal;
    ForwardWork w;
    w.instances = 1;
    uint64_t longest = 0;
    for_each_prefix_request(p, [&](const PrefixRequestSize& r) {
        const double prompt = double(r.prompt);
        auto serve = [&](double shared, double grid) {
            const double kept = std::floor(shared / std::max(grid, 1.0)) * std::max(grid, 1.0);
            w.add_prefill(prompt - kept, kept);
        };
        const bool chat = r.scenario == PrefixScenario::chat;
        for (int i = 0; i < (engine ? 2 : 1); ++i) serve(0, 1);
        serve(double(r.shared), p.page_size);
        serve(chat ? double(r.shared) : 0, 1);
        serve(double(r.shared), p.interval);
        serve(!chat && r.index >= 2 ? double(r.shared) : 0, 1);
        w.add_decode(p.gen, prompt, engine ? 6 : 5);
        longest = std::max(longest, r.prompt);
    });
    w.add_prefill(double(longest), 0);
    w.add_decode(p.gen, double(longest));
    return w;
}

}  // namespace

RunEstimate prefix_estimate(const PrefixParams& p) {
    const ForwardWork w = prefix_work(p);
    const PrefixEstimate e = estimate_prefix(p);
    const uint64_t states = prefix_states(e, prefix_state_grid(p), p.state_capacity);
    const ModelConfig m = default_runnable_config();
    // One method's pool (with its storage) at a time, and every request's cold logits kept for the
    // comparisons.
    const double held =
        double(prefix_pool_bytes(m, e, states, p.page_size)) + 8.0 * double(e.requests) * p.gen * m.vocab;
    // One request alone past the limits: its prompt is too long, whatever the request count.
    PrefixParams one = p;
    one.requests = 1;
    const bool long_prompt = forward_seconds(prefix_work(one)) > kRunSecondsLimit;
    const void* on = !long_prompt                       ? static_cast<const void*>(&p.requests)
                     : p.shared_tokens >= p.user_tokens ? static_cast<const void*>(&p.shared_tokens)
                                                        : &p.user_tokens;
    return {.seconds = forward_seconds(w),
            .bytes = forward_bytes(w) + held,
            .counted = forward_counted(w),
            .on = on};
}

Experiment make_prefix_experiment() {
    return make_experiment(Module<PrefixParams>{
        .number = 4,
        .id = "prefix",
        .title = "Dual-granularity prefix cache",
        .component = "prefix caching",
        .purpose =
            "What a second request sharing a prefix really saves on a hybrid model, and why reusing the "
            "KV alone gives wrong outputs: served on the runnable model, compared with cold runs bit for "
            "bit.",
        .params = prefix_params(),
        .validate = validate_prefix,
        .estimate = prefix_estimate,
        .start = start_prefix,
        .live = false,
        .headlines =
            {
                {"KV-only reuse on a hybrid: largest next-token logit error against a cold run",
                 {{"workload", "system"}, {"requests", "2"}, {"shared_tokens", "64"}, {"gen", "2"}},
                 "kv_only_max_logit_diff"},
            },
        .falsifiers = prefix_falsifiers()});
}

K3_REGISTER_EXPERIMENT(make_prefix_experiment);

}  // namespace k3
