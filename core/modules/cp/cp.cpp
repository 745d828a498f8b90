// Module 9 `cp`: its parameters, validation and declaration.
#include "core/modules/cp/cp.h"

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

ParamList<CpParams> cp_params() {
    ParamList<CpParams> l;
    l.integer(&CpParams::tokens, "tokens", "Prompt tokens", "tokens", 16, 4096).log().in_group("Run");
    l.integer(&CpParams::ranks, "ranks", "Ranks", "ranks", 1, 64)
        .in_group("Run")
        .describe("R: simulated ranks, each holding a contiguous slice of the prompt.");
    l.choice(&CpParams::split, "split", "Slices",
             Choices<CpSplit>{{CpSplit::uneven, "uneven", "uneven, off the chunk grid, one rank of 2 tokens"},
                              {CpSplit::even, "even", "even"}})
        .in_group("Run");
    l.integer(&CpParams::chunk, "chunk", "Chunk size", "tokens", 1, 256)
        .log()
        .in_group("Run")
        .describe("C of the chunked KDA kernel on every rank (chunks restart at each slice start).");
    l.choice(&CpParams::start, "start", "Start state",
             Choices<CpStart>{{CpStart::zero, "zero", "zero (a fresh prompt)"},
                              {CpStart::prefix, "prefix", "random (after a prefix)"}})
        .in_group("Run");
    l.seed(&CpParams::seed, "Seed of the layer weights, the layer inputs x ~ N(0, 1) and the uneven slices.")
        .in_group("Run");
    l.choice(&CpParams::preset, "preset", "Model at scale",
             preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::qwen3_next_80b}))
        .in_group("At scale")
        .describe("Published configuration for the bytes and work at real scale (formulas, not runs).");
    l.integer(&CpParams::context, "context", "Context at scale", "tokens", 1024, 16777216)
        .log()
        .in_group("At scale")
        .describe("Prompt length split over the ranks for the at-scale figures and the speed-up sweep.");
    l.choice(&CpParams::link, "link", "Link", link_choices())
        .in_group("At scale")
        .describe("Interconnect for the exchange time estimate (nominal line rate, no latency).");
    return l;
}

bool cp_even_fallback(const CpParams& p) {
    const int ranks = std::min(p.ranks, p.tokens);
    return p.split == CpSplit::uneven && ranks >= 2 && p.tokens < 4 * ranks + 2;
}

void validate_cp(const CpParams& p, Issues& issues) {
    if (p.ranks > p.tokens)
        issues.error(p.ranks, "ranks (" + format_number(p.ranks) + ") exceed the prompt (" +
                                  format_number(p.tokens) + " tokens): every rank needs at least one token");
    else if (cp_even_fallback(p))
        issues.warning(p.split, "too few tokens for uneven slices with a 2-token rank (needs 4 R + 2 = " +
                                    std::to_string(4 * p.ranks + 2) + "): even slices are used");
}

Experiment make_cp_experiment() {
    return make_experiment(Module<CpParams>{
        .number = 9,
        .id = "cp",
        .title = "Context parallelism and the non-additive state",
        .component = "context parallelism",
        .purpose =
            "Split one prompt over R ranks: what it takes to get exactly the single-rank KDA state and "
            "outputs, and why adding the ranks' states is wrong.",
        .params = cp_params(),
        .validate = validate_cp,
        .start = start_cp,
        .headlines = {
            {"Adding KDA states over 7 ranks (an all-reduce '+') leaves this relative error in the final "
             "state",
             {{"tokens", "200"}, {"ranks", "7"}},
             "naive_state_rel_err"},
            {"Each rank sends this much per KDA layer of Kimi Linear to make the split exact",
             {{"tokens", "200"}, {"ranks", "7"}},
             "bytes_per_rank_preset"},
        }});
}

K3_REGISTER_EXPERIMENT(make_cp_experiment);

}  // namespace k3
