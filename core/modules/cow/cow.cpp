// Module 6 `cow`: its parameters, validation and declaration.
#include "core/modules/cow/cow.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/memory/pool.h"
#include "core/modules/shared/runnable_cost.h"

namespace k3 {

namespace {

std::vector<Falsifier<CowParams>> cow_falsifiers() {
    auto set = [](CowFalsify f) { return [f](CowParams& p) { p.falsify = f; }; };
    return {
        {"flip_state_bit",
         "one bit of an eager fork's copied state is flipped",
         {"eager_equals_alone"},
         set(CowFalsify::flip_state_bit)},
        {"skip_state_copy",
         "a fork that must copy the shared state decodes from a fresh slot instead",
         {"cow_equals_alone", "cow_state_copies"},
         set(CowFalsify::skip_state_copy)},
        {"wrong_page_copy",
         "a copy-on-write copy of the shared page is filled from the page before it",
         {"cow_equals_alone"},
         set(CowFalsify::wrong_page_copy)},
        {"extra_page_copy",
         "the last reader of the shared page copies it instead of writing in place",
         {"cow_copies_partial_page_only"},
         set(CowFalsify::extra_page_copy)},
        {"keep_memory",
         "the first fork to finish keeps its sequence and page references",
         {"released_eager", "released_cow"},
         set(CowFalsify::keep_memory)},
        {"one_state_slot",
         "the pool is made with one state slot whatever the forks need",
         {"run_completed"},
         set(CowFalsify::one_state_slot)},
    };
}

}  // namespace

ParamList<CowParams> cow_params() {
    ParamList<CowParams> l;
    l.choice(&CowParams::scenario, "scenario", "Scenario",
             Choices<CowScenario>{{CowScenario::sampling, "sampling", "parallel sampling (n > 1)"},
                                  {CowScenario::branching, "branching", "branching (agent tree)"}})
        .in_group("Forks");
    l.integer(&CowParams::forks, "forks", "Forks", "forks", 1, 32)
        .in_group("Forks")
        .describe("Sequences forked from the shared prompt (n of parallel sampling, or branches).");
    l.integer(&CowParams::prompt_tokens, "prompt_tokens", "Shared prompt", "tokens", 1, 2048)
        .log()
        .in_group("Forks");
    l.integer(&CowParams::branch_tokens, "branch_tokens", "Branch suffix", "tokens", 1, 512)
        .log()
        .in_group("Forks")
        .active_when("scenario", "branching")
        .describe("Tokens each fork prefills after the fork (branching only).");
    l.integer(&CowParams::gen, "gen", "Tokens sampled per fork", "tokens", 1, 64)
        .in_group("Forks")
        .describe("Decode steps each fork takes after the fork (and its branch suffix).");
    l.real(&CowParams::temperature, "temperature", "Temperature", "", 0, 2)
        .in_group("Forks")
        .describe(
            "Sampling temperature (0 = greedy: every fork of parallel sampling then writes the same "
            "tokens).");
    l.seed(&CowParams::seed, "Seed of the prompt, the branch suffixes and each fork's sampler.")
        .in_group("Forks");
    l.integer(&CowParams::page_size, "page_size", "KV page size", "tokens", 1, 64).log().in_group("Memory");
    return l;
}

void validate_cow(const CowParams& p, Issues& issues) {
    const uint64_t pool = cow_pool_bytes(p, default_runnable_config());
    if (pool > kMaxBackingBytes)
        issues.error(p.forks, "the forks need a pool of " + format_bytes(double(pool)) + ", over " +
                                  format_bytes(double(kMaxBackingBytes)));
}

// The runnable model's work (cow_run.cpp): eager copies and copy-on-write each prefill the prompt once,
// then every fork prefills its branch and decodes its tokens; then every fork runs alone from the
// start. One pool with its storage at a time.
RunEstimate cow_estimate(const CowParams& p) {
    const double n = p.forks, prompt = p.prompt_tokens, gen = p.gen;
    const double branch = p.scenario == CowScenario::branching ? p.branch_tokens : 0;
    ForwardWork w;
    w.instances = 1;
    w.add_prefill(prompt, 0, 2 + n);
    w.add_prefill(branch, prompt, 3 * n);
    w.add_decode(gen, prompt + branch, 3 * n);
    // What to make smaller: the prompt when its prefills cost more than the forks' own work (a decode
    // token costs about four prefilled ones), else the forks.
    const bool prompt_most = prompt * (2 + n) > 3 * n * (branch + 4 * gen);
    return {.seconds = forward_seconds(w),
            .bytes = forward_bytes(w) + double(cow_pool_bytes(p, default_runnable_config())),
            .counted = forward_counted(w),
            .on = prompt_most ? static_cast<const void*>(&p.prompt_tokens) : &p.forks};
}

Experiment make_cow_experiment() {
    return make_experiment(Module<CowParams>{
        .number = 6,
        .id = "cow",
        .title = "Copy-on-write forks",
        .component = "prefix caching",
        .purpose =
            "Parallel sampling and branching on the runnable model: forks that share the prefix's state "
            "and KV pages and copy on first write, against eager copies.",
        .params = cow_params(),
        .validate = validate_cow,
        .estimate = cow_estimate,
        .start = start_cow,
        .live = false,
        .falsifiers = cow_falsifiers(),
    });
}

K3_REGISTER_EXPERIMENT(make_cow_experiment);

}  // namespace k3
