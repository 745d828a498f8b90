// Module 4 `prefix`: its parameters, validation and declaration.
#include "core/modules/prefix/prefix.h"

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"

namespace k3 {

namespace {

constexpr uint64_t kMaxWorkloadTokens = 20000;  // prompt tokens of the cold pass (the run makes five passes)
constexpr uint64_t kMaxPoolBytes = 192ull << 20;  // backing storage of one method's pool

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
                    "Seed of the workload's tokens (the tiny model's weights are fixed, seed 1)."));
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

}  // namespace

ParamList<PrefixParams> prefix_params() {
    ParamList<PrefixParams> l;
    workload_params(l);
    cache_params(l);
    return l;
}

void validate_prefix(const PrefixParams& p, Issues& issues) {
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
    if (e.prompt_tokens > kMaxWorkloadTokens)
        issues.error(p.requests, "the workload has up to " + format_grouped(double(e.prompt_tokens)) +
                                     " prompt tokens, served five times on the tiny model; the limit is " +
                                     format_grouped(double(kMaxWorkloadTokens)) +
                                     " (fewer requests or shorter prompts)");
    const uint64_t states = prefix_states(e, std::min(interval, chunk), p.state_capacity);
    const uint64_t bytes = prefix_pool_bytes(*model_preset("tiny"), e, states, p.page_size);
    if (bytes > kMaxPoolBytes)
        issues.error(p.interval,
                     "the checkpoints and KV of this workload need up to " + format_bytes(double(bytes)) +
                         " of pool, over the " + format_bytes(double(kMaxPoolBytes)) +
                         " limit: raise the interval, set a state capacity or shorten the workload");
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
        .start = start_prefix,
        .live = false,
        .headlines = {
            {"KV-only reuse on a hybrid: largest next-token logit error against a cold run",
             {{"workload", "system"}, {"requests", "2"}, {"shared_tokens", "64"}, {"gen", "2"}},
             "kv_only_max_logit_diff"},
        }});
}

K3_REGISTER_EXPERIMENT(make_prefix_experiment);

}  // namespace k3
