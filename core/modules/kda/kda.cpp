// Module 1 `kda`: its parameters, the limits a run must stay within, and its declaration.
#include "core/modules/kda/kda.h"

#include "core/experiments/registry.h"

namespace k3 {

namespace {

// Each corrupts the run's data at one point; the check code is the same as in the intact run.
std::vector<Falsifier<KdaParams>> kda_falsifiers() {
    auto set = [](KdaFalsify f) { return [f](KdaParams& p) { p.falsify = f; }; };
    std::vector<Falsifier<KdaParams>> out = {
        {"fp32_gate",
         "one gate of the last token is lowered by 1 for the fp32 kernels, not for the fp64 reference",
         {"recurrent_close_to_fp64", "chunked_close_to_fp64", "affine_map_gives_final_state"},
         set(KdaFalsify::fp32_gate)},
        {"sweep_state",
         "the largest entry of the C = 1 sweep run's final state is doubled or halved (one exponent bit)",
         {"chunked_close_to_fp64"},
         set(KdaFalsify::sweep_state)},
        {"decode_state_bit",
         "one bit of the state is flipped between two decode steps",
         {"decode_steps_reproduce_prefill"},
         set(KdaFalsify::decode_state_bit)},
        {"split_carry",
         "the second call of the split prefill starts from the start state instead of the carried one",
         {"split_prefill_off_grid_close_to_fp64"},
         set(KdaFalsify::split_carry)},
        {"affine_b_sign",
         "the sign of the segment map's largest B entry is flipped",
         {"affine_map_gives_final_state"},
         set(KdaFalsify::affine_b_sign)},
    };
    if (kda::simd_enabled())  // a scalar build has no SIMD kernel, and no check of one
        out.push_back({"simd_output_bit",
                       "the lowest bit of one output of the SIMD chunked kernel is flipped",
                       {"scalar_simd_same_bits"},
                       set(KdaFalsify::simd_output_bit)});
    if (kda::fma_enabled())  // only builds with FMA have the FMA variants and their check
        out.push_back({"fma_output",
                       "the largest output of the FMA chunked kernel is doubled or halved",
                       {"fma_close_to_fp64"},
                       set(KdaFalsify::fma_output)});
    return out;
}

}  // namespace

const char* kda_model_preset(KdaModel m) {
    switch (m) {
        case KdaModel::none: return "";
        case KdaModel::k3_tiny: return "k3-tiny";
        case KdaModel::tiny: return "tiny";
        case KdaModel::small: return "small";
    }
    return "";
}

double kda_model_parameters(KdaModel m) {
    switch (m) {
        case KdaModel::none: return 0;
        case KdaModel::k3_tiny: return 8782360;
        case KdaModel::tiny: return 7518616;
        case KdaModel::small: return 43282824;
    }
    return 0;
}

kda::Shape kda_shape(const KdaParams& p) { return kda::Shape{p.heads, p.heads * p.group, p.k, p.v}; }

ParamList<KdaParams> kda_params() {
    ParamList<KdaParams> l;
    l.integer(&KdaParams::heads, "heads", "Query/key heads", "heads", 1, 64)
        .in_group("Shape")
        .describe("H: query/key heads of one layer. Kimi-Linear-48B-A3B has 32.");
    l.integer(&KdaParams::group, "group", "Value heads per q/k head", "", 1, 8).in_group("Shape");
    l.integer(&KdaParams::k, "k", "Key head dim K", "", 4, 256)
        .in_group("Shape")
        .describe("Rows of each state matrix (key channels). Kimi Linear: 128.");
    l.integer(&KdaParams::v, "v", "Value head dim V", "", 4, 256)
        .in_group("Shape")
        .describe("Columns of each state matrix (value channels). Kimi Linear: 128.");
    l.integer(&KdaParams::tokens, "tokens", "Tokens", "tokens", 1, 65536)
        .log()
        .in_group("Workload")
        .describe("T: tokens of one prefill of one sequence, fed to every kernel.");
    l.integer(&KdaParams::chunk, "chunk", "Chunk size", "tokens", 1, 1024)
        .log()
        .in_group("Workload")
        .describe("C of the chunked (WY) kernel. C = 1 is the recurrence; FLA uses 64 on GPUs.");
    l.choice(&KdaParams::gate, "gate", "Gate recipe",
             Choices<kda::GateRecipe>{
                 {kda::GateRecipe::logsigmoid, "logsigmoid", "logsigmoid(N(0,1)) x strength (FLA tests)"},
                 {kda::GateRecipe::model, "model", "-exp(A_log) softplus(z + dt_bias)"}})
        .in_group("Inputs");
    l.real(&KdaParams::gate_strength, "gate_strength", "Gate strength", "", 0.001, 100)
        .log()
        .in_group("Inputs");
    l.seed(&KdaParams::seed, "").in_group("Inputs");  // its help is in kda.md
    l.choice(&KdaParams::model, "model", "Runnable model on the roofline",
             Choices<KdaModel>{{KdaModel::k3_tiny, "k3-tiny", "k3-tiny (the default runnable model)"},
                               {KdaModel::tiny, "tiny", "tiny (Kimi Linear's design)"},
                               {KdaModel::small, "small", "small (4.9 times tiny's parameters)"},
                               {KdaModel::none, "none", "none: the kernels only"}})
        .in_group("Device");  // its help is in kda.md
    return l;
}

void validate_kda(const KdaParams& p, Issues& issues) {
    if (p.chunk > p.tokens)
        issues.warning(p.chunk, "chunk (" + std::to_string(p.chunk) + ") is longer than the run (" +
                                    std::to_string(p.tokens) +
                                    " tokens): the chunked kernel works on one partial chunk");
}

Experiment make_kda_experiment() {
    return make_experiment(Module<KdaParams>{
        .number = 1,
        .id = "kda",
        .title = "KDA kernel lab",
        .component = "foundation",
        .purpose =
            "The Kimi Delta Attention kernels every other module runs on, live in this build: accuracy "
            "against an fp64 reference, scalar against SIMD, recurrent against chunked.",
        .params = kda_params(),
        .validate = validate_kda,
        .estimate = kda_estimate,
        .start = start_kda,
        .live = false,
        .falsifiers = kda_falsifiers(),
    });
}

K3_REGISTER_EXPERIMENT(make_kda_experiment);

}  // namespace k3
