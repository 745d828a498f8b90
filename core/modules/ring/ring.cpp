// Module 8 `ring`: its parameters, validation and declaration.
#include "core/modules/ring/ring.h"

#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"
#include "core/modules/shared/runnable_cost.h"

namespace k3 {

namespace {

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
}

// The runnable model's work (ring_run.cpp): the plain greedy reference (the prompt, then a state kept
// per token), then the ring's stream, which prefills the prompt again and verifies N + 1 tokens at a
// time until new_tokens are committed. A verification commits 1 + the drafts accepted in a row: with
// the chance drafter 1 + a + ... + a^N on average (a quarter more for the luck of the draw), with the
// self drafter at worst 1, each after N drafted tokens decoded on the quantised copy.
RunEstimate ring_estimate(const RingParams& p) {
    const double n = p.draft_len, prompt = p.prompt_len, reference = p.new_tokens + n + 1;
    const bool self = p.drafter == RingDrafter::self;
    double per_verification = 1, run = 1;
    for (int k = 0; k < p.draft_len && !self; ++k) per_verification += run *= p.accept;
    const double verifications = std::min<double>(p.new_tokens, 1.25 * p.new_tokens / per_verification);
    ForwardWork w;
    w.instances = self ? 2 : 1;
    w.add_prefill(prompt, 0, self ? 3 : 2);
    w.add_decode(reference, prompt);
    w.add_prefill(n + 1, prompt + p.new_tokens / 2.0, verifications);
    if (self) w.add_decode(n, prompt + p.new_tokens / 2.0, verifications);
    const ModelConfig model = *model_preset(p.model);
    // The reference keeps the state after every token for the bitwise comparisons.
    const double states = (reference + 1) * double(sequence_state_bytes(p.model));
    return {.seconds = forward_seconds(w, model),
            .bytes = forward_bytes(w, model) + states,
            .counted = forward_counted(w, model),
            .on = &p.new_tokens};
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
        .estimate = ring_estimate,
        .start = start_ring,
        .live = false,
        .falsifiers = ring_falsifiers(),
        .audit_params = {{{"variant", "recoverssm"}}}});
}

K3_REGISTER_EXPERIMENT(make_ring_experiment);

}  // namespace k3
