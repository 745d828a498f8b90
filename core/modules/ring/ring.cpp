// Module 8 `ring`: its parameters, validation and declaration.
#include "core/modules/ring/ring.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

constexpr double kMaxBytes = 256.0 * 1024 * 1024;  // refuse runs whose reference states exceed this

// The state of one sequence of `model` (all linear layers).
uint64_t sequence_state_bytes(ModelPreset model) {
    const ModelConfig c = *model_preset(model);
    return spec::snapshot_bytes_per_layer(c) * uint64_t(c.n_linear());
}

std::vector<Falsifier<RingParams>> ring_falsifiers() {
    auto set = [](RingFalsify f) { return [f](RingParams& p) { p.falsify = f; }; };
    return {
        {"commit_rejected",
         "the stream commits the first draft the verifier rejected",
         {"tokens_equal_greedy"},
         set(RingFalsify::commit_rejected)},
        {"record_bit",
         "one bit of the first kept record in the ring is flipped",
         {"rebuilds_bitwise", "ring_positions_bitwise", "final_checkpoint_bitwise"},
         set(RingFalsify::flip_record_bit)},
        {"fold_twice",
         "the first flush replays its first record twice",
         {"records_folded_once", "final_checkpoint_bitwise"},
         set(RingFalsify::fold_twice)},
        {"fold_skip",
         "the first flush leaves its first record out",
         {"records_folded_once", "final_checkpoint_bitwise"},
         set(RingFalsify::fold_skip)},
        {"overwrite_live",
         "a verification's records are written one slot early, over the last kept record",
         {"occupancy_within_capacity"},
         set(RingFalsify::overwrite_live)},
        {"spare_slot",
         "every layer allocates one record slot more than the capacity",
         {"ring_memory_equals_accounting"},
         set(RingFalsify::spare_slot)},
    };
}

}  // namespace

ParamList<RingParams> ring_params() {
    using P = RingParams;
    ParamList<P> l;
    Choices<ModelPreset> runnable =
        preset_choices({ModelPreset::k3_tiny, ModelPreset::tiny, ModelPreset::small});
    for (Choice<ModelPreset>& c : runnable) c.label = c.key;  // the label already says "Runnable"
    l.choice(&P::model, "model", "Runnable model", runnable)
        .in_group("Model")
        .describe("The seeded runnable model the request is decoded on.");
    l.integer(&P::draft_len, "draft_len", "Tokens per verification N", "tokens", 1, 16)
        .in_group("Speculation");
    l.integer(&P::ring_capacity, "ring_capacity", "Ring capacity L", "records", 1, 64)
        .in_group("Ring")
        .describe("Record slots per request (SGLang's ReplaySSM default: 16). Must be at least N.");
    l.choice(&P::overflow, "overflow", "When a verification does not fit",
             Choices<spec::Overflow>{{spec::Overflow::fold, "fold", "fold the checkpoint forward first"},
                                     {spec::Overflow::shorten, "shorten", "shorten the draft to fit"}})
        .in_group("Ring");
    l.integer(&P::commit_every, "commit_every", "Commit every", "tokens", 0, 1024).in_group("Ring");
    l.choice(&P::variant, "variant", "Record variant", record_variant_choices(true)).in_group("Ring");
    l.choice(&P::drafter, "drafter", "Drafter",
             Choices<RingDrafter>{{RingDrafter::chance, "chance", "set acceptance probability"},
                                  {RingDrafter::self, "self", "the model itself, quantised"}})
        .in_group("Drafter");
    l.real(&P::accept, "accept", "Draft acceptance", "fraction", 0, 1)
        .in_group("Drafter")
        .active_when("drafter", "chance")
        .describe("Probability that each draft is right, given the ones before it were.");
    l.integer(&P::drafter_bits, "drafter_bits", "Drafter weight bits", "bits", 2, 8)
        .in_group("Drafter")
        .active_when("drafter", "self")
        .describe("Symmetric per-output-channel quantisation of every projection matrix of the drafter.");
    l.integer(&P::new_tokens, "new_tokens", "Tokens to generate", "tokens", 8, 256)
        .in_group("Request")
        .describe("Tokens the request decodes after its prompt.");
    l.integer(&P::prompt_len, "prompt_len", "Prompt length", "tokens", 1, 256)
        .in_group("Request")
        .describe("Random prompt tokens prefilled before speculation starts.");
    l.seed(&P::seed, "Seed of the prompt and of the chance drafter.").in_group("Request");
    return l;
}

void validate_ring(const RingParams& p, Issues& issues) {
    if (std::string e = spec::RecordRing::check(p.ring_capacity, p.draft_len); !e.empty())
        issues.error(p.ring_capacity, e);
    // The reference run keeps a state per generated token for the bitwise checks.
    const double bytes = double(p.new_tokens + p.draft_len + 2) * double(sequence_state_bytes(p.model));
    if (bytes > kMaxBytes)
        issues.error(p.new_tokens, "the reference states for " + format_number(p.new_tokens) +
                                       " tokens need " + format_bytes(bytes) + ", above the limit of " +
                                       format_bytes(kMaxBytes) + "; generate fewer tokens");
}

Experiment make_ring_experiment() {
    return make_experiment(Module<RingParams>{
        .number = 8,
        .id = "ring",
        .title = "Ring buffer for speculative decoding",
        .component = "speculative decoding",
        .purpose =
            "A per-request ring of per-token records with one checkpoint state, folded forward when it "
            "fills or on commit: rollback by a cursor move, exact replay from any position.",
        .params = ring_params(),
        .validate = validate_ring,
        .start = start_ring,
        .live = false,
        .falsifiers = ring_falsifiers(),
        .audit_params = {{{"variant", "recoverssm"}}}});
}

K3_REGISTER_EXPERIMENT(make_ring_experiment);

}  // namespace k3
