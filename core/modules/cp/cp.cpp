// Module 9 `cp`: its parameters, validation and declaration.
#include "core/modules/cp/cp.h"

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

// Each corrupts the run's data at one point; the check code is the same as in the intact run.
std::vector<Falsifier<CpParams>> cp_falsifiers() {
    auto set = [](CpFalsify f) { return [f](CpParams& p) { p.falsify = f; }; };
    return {
        {"fp64_state_bit",
         "one exponent bit of the fp64 single-rank final state is flipped",
         {"naive_error_closed_form_fp64"},
         set(CpFalsify::fp64_state_bit)},
        {"map_b_bit",
         "the largest entry of rank 0's map B is doubled or halved before the ranks combine",
         {"naive_error_closed_form_fp32", "linear_naive_sum_exact", "exact_combiners_equal_one_rank"},
         set(CpFalsify::map_b_bit)},
        {"zero_start_output",
         "the largest zero-start output of the last rank, which the linear fix-up corrects, is doubled or "
         "halved",
         {"fixups_agree", "exact_combiners_equal_one_rank"},
         set(CpFalsify::zero_start_output)},
        {"kda_as_linear",
         "the KDA rows run plain linear attention (M = I)",
         {"naive_sum_wrong_for_kda"},
         set(CpFalsify::kda_as_linear)},
        {"halo_row",
         "rank 1's halo loses its newest raw q/k/v row",
         {"halo_core_inputs_bitwise", "halo_layer_equals_one_rank"},
         set(CpFalsify::halo_row)},
        {"no_halo_reads_halo",
         "the run without the halo reads the previous rank's rows anyway",
         {"no_halo_wrong_tokens"},
         set(CpFalsify::no_halo_reads_halo)},
        {"map_formula",
         "the map size is counted with a diagonal M (K floats per value head instead of K x K)",
         {"bytes_per_rank_match_held_maps"},
         set(CpFalsify::map_formula)},
        {"map_formula_kimi",
         "at Kimi Linear's scale, the map size is counted with a diagonal M (K floats per value head)",
         {"bytes_per_rank_match_held_maps"},
         set(CpFalsify::map_formula),
         {{"preset", "kimi-linear-48b"}}},
    };
}

}  // namespace

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
    l.choice(
         &CpParams::preset, "preset", "Model at scale",
         preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b}))
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

// One KDA layer of the runnable geometry run whole and over R ranks, three recurrences under three
// combiners, an fp64 pass for the closed form; the figures at scale are formulas. `/usr/bin/time` of
// `k3cli run cp` (native) at T = 16 ... 4,096, R = 1 ... 64, C = 1 ... 256 took 0.05 s + T x 0.29 ms x
// (1 + C / 512) + R x 13 ms of CPU (a cost per rank whatever T: 1.22 s at T = 4,096 on
// one rank, 1.92 s on 64), up to 1.45 times that on a loaded machine: doubled here. It held at most
// 30 MiB + T x (48 KiB + R x 0.5 KiB) (291 MiB at the largest).
RunEstimate cp_estimate(const CpParams& p) {
    const double T = p.tokens, R = p.ranks, C = p.chunk;
    return {.seconds = 2 * (0.05 + T * 0.29e-3 * (1 + C / 512) + R * 13e-3),
            .bytes = 30.0 * 1024 * 1024 + T * (55.0 + 0.5 * R) * 1024,
            .counted = format_grouped(T) + " tokens of one layer over " + format_grouped(R) + " ranks",
            .on = &p.tokens};
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
        .estimate = cp_estimate,
        .start = start_cp,
        .headlines =
            {
                {"Adding KDA states over 7 ranks (an all-reduce '+') leaves this relative error in the final "
                 "state",
                 {{"tokens", "200"}, {"ranks", "7"}},
                 "naive_state_rel_err"},
                {"Each rank sends this much per KDA layer of Kimi-K3 to make the split exact",
                 {{"tokens", "200"}, {"ranks", "7"}},
                 "bytes_per_rank_preset"},
            },
        .falsifiers = cp_falsifiers(),
        .audit_params = {{{"preset", "kimi-linear-48b"}, {"tokens", "120"}, {"ranks", "4"}}}});
}

K3_REGISTER_EXPERIMENT(make_cp_experiment);

}  // namespace k3
