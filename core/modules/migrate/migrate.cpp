// Module 10 `migrate`: its parameters, validation and declaration.
#include "core/modules/migrate/migrate.h"

#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"
#include "core/modules/shared/runnable_cost.h"

namespace k3 {

using lifecycle::RecomputeRegime;

namespace {

const Choices<RecomputeRegime>& regime_choices() {
    static const Choices<RecomputeRegime> choices = {
        {RecomputeRegime::alone, "alone", "alone (streams all weights)"},
        {RecomputeRegime::in_batch, "in_batch", "inside running batches (FLOPs only)"}};
    return choices;
}

// A core preset list (links, hardware) as choices whose value is the preset's id.
Choices<std::string> preset_id_choices(const std::vector<std::string>& ids,
                                       const std::vector<std::string>& names) {
    Choices<std::string> out;
    for (size_t i = 0; i < ids.size(); ++i) out.push_back({ids[i], ids[i], names[i]});
    return out;
}

void request_params(ParamList<MigrateParams>& l) {
    auto request = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Request (runnable model)"); };
    request(l.integer(&MigrateParams::prompt, "prompt", "Prompt", "tokens", 1, 2048).log())
        .describe("Prompt tokens of the live request on the runnable model, prefilled in one call.");
    request(l.integer(&MigrateParams::before, "before", "Generated before the pause", "tokens", 0, 512))
        .describe("Tokens decoded before the request is paused (one more is sampled and pending).");
    request(l.integer(&MigrateParams::after, "after", "Generated after resuming", "tokens", 1, 512));
    request(l.real(&MigrateParams::temperature, "temperature", "Temperature", "", 0, 2))
        .describe(
            "0 = greedy. Above 0 the sampler draws from the seeded generator, whose state travels in the "
            "blob.");
    request(l.integer(&MigrateParams::interval, "interval", "Checkpoint interval", "tokens", 64, 4096).log());
    request(l.seed(&MigrateParams::seed, "Seed of the model weights (both instances) and of the prompt."));
}

void fault_params(ParamList<MigrateParams>& l) {
    auto fault = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Fault injection"); };
    fault(l.choice(
        &MigrateParams::fault, "fault", "Injected fault",
        Choices<BlobFault>{
            {BlobFault::none, "none", "none"},
            {BlobFault::bit_flip, "bit_flip", "flip one bit"},
            {BlobFault::truncate, "truncate", "truncate"},
            {BlobFault::wrong_model, "wrong_model", "another model's hash (re-checksummed)"},
            {BlobFault::wrong_layout, "wrong_layout", "[V][K] state order (re-checksummed)"},
            {BlobFault::wrong_position, "wrong_position", "position one token off (re-checksummed)"}}));
    fault(l.integer(&MigrateParams::fault_offset, "fault_offset", "Fault byte offset", "B", 0, 2147483647))
        .describe("Bit flip: the byte to change; truncate: bytes kept. Clamped to the blob's size - 1.");
    fault(l.integer(&MigrateParams::fault_bit, "fault_bit", "Bit to flip", "", 0, 7))
        .active_when("fault", "bit_flip")
        .describe("Which bit (0 = least significant) of the byte at the fault offset is flipped.");
}

void scale_params(ParamList<MigrateParams>& l) {
    auto scale = [](ParamSpec& s) -> ParamSpec& { return s.in_group("At scale"); };
    scale(l.choice(&MigrateParams::preset, "preset", "Model at scale",
                   preset_choices(
                       {ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b})))
        .describe(
            "Published configuration for the strategy costs at real scale (exact bytes, roofline times).");
    scale(l.integer(&MigrateParams::context, "context", "Context at scale", "tokens", 1, 16777216).log())
        .describe("Tokens the migrated request holds.");
    scale(
        l.integer(&MigrateParams::distance, "distance", "Checkpoint distance at scale", "tokens", 1, 16777216)
            .log());
    scale(l.choice(&MigrateParams::link, "link", "Link",
                   preset_id_choices(link_preset_ids(), link_preset_names())));
    scale(l.choice(&MigrateParams::hardware, "hardware", "Hardware",
                   preset_id_choices(hardware_preset_ids(), hardware_preset_names())))
        .describe("Destination GPU for the roofline estimate of recompute time.");
    scale(l.choice(&MigrateParams::regime, "regime", "Recompute regime", regime_choices()));
}

// Each corrupts the run's data at one point; the check code is the same as in the intact run.
std::vector<Falsifier<MigrateParams>> migrate_falsifiers() {
    auto set = [](MigrateFalsify f) { return [f](MigrateParams& p) { p.falsify = f; }; };
    return {
        {"resumed_state_bit",
         "one bit of the resumed KDA state is flipped before the continuation",
         {"migrated_bitwise_*"},
         set(MigrateFalsify::resumed_state_bit)},
        {"section_size_lie",
         "the recompute blob's first section header declares 4 bytes more than it holds (checksum "
         "recomputed)",
         {"blob_recount_matches_accounting_recompute"},
         set(MigrateFalsify::section_size_lie)},
        {"pending_token_lost",
         "the move-KV capture loses its pending (sampled, not yet fed) token before its blob is written",
         {"blob_recount_matches_accounting_move_kv"},
         set(MigrateFalsify::pending_token_lost)},
        {"kv_row_dropped",
         "the move-everything capture drops its newest KV row and moves its position back one token",
         {"blob_recount_matches_accounting_move_all"},
         set(MigrateFalsify::kv_row_dropped)},
        {"cost_model_kv_dtype",
         "the cost model counts the runnable model's KV in another dtype than it is stored in",
         {"blob_recount_matches_accounting_move_all", "blob_recount_matches_accounting_move_kv"},
         set(MigrateFalsify::cost_model_kv_dtype)},
        {"intact_blob_bit",
         "one bit of the intact blob's first state value is flipped and the checksum recomputed",
         {"intact_blob_resumes_bitwise"},
         set(MigrateFalsify::intact_blob_bit)},
        {"same_instance_bit",
         "one bit of the blob the same instance resumes from is flipped and the checksum recomputed",
         {"same_instance_resumes_bitwise"},
         set(MigrateFalsify::same_instance_bit)},
        {"fault_resealed",
         "the injected bit flip is followed by a recomputed checksum",
         {"injected_fault_detected"},
         set(MigrateFalsify::fault_resealed),
         {{"fault", "bit_flip"}}},
        {"scale_conv_dtype",
         "the cost model at scale counts the conv windows in fp32 (the configuration says bf16)",
         {"scale_blob_is_accounted"},
         set(MigrateFalsify::scale_conv_dtype)},
        {"scale_wrong_model",
         "the costs at scale are computed for the other preset",
         {"scale_blob_is_accounted"},
         set(MigrateFalsify::scale_wrong_model)},
        {"scale_conv_dtype_kimi",
         "at Kimi Linear's scale, the cost model counts the conv windows in fp32 (the configuration says "
         "bf16)",
         {"scale_blob_is_accounted"},
         set(MigrateFalsify::scale_conv_dtype),
         {{"preset", "kimi-linear-48b"}, {"prompt", "16"}, {"before", "1"}, {"after", "1"}}},
        {"scale_wrong_model_kimi",
         "at Kimi Linear's scale, the costs are computed for Qwen3-Next",
         {"scale_blob_is_accounted"},
         set(MigrateFalsify::scale_wrong_model),
         {{"preset", "kimi-linear-48b"}, {"prompt", "16"}, {"before", "1"}, {"after", "1"}}},
    };
}

}  // namespace

const char* regime_id(RecomputeRegime r) {
    for (const Choice<RecomputeRegime>& c : regime_choices())
        if (c.value == r) return c.key.c_str();
    return "";
}

ParamList<MigrateParams> migrate_params() {
    ParamList<MigrateParams> l;
    request_params(l);
    fault_params(l);
    scale_params(l);
    return l;
}

void validate_migrate(const MigrateParams& p, Issues& issues) {
    if (p.interval % kMigrateChunk != 0)
        issues.error(p.interval, "interval (" + std::to_string(p.interval) +
                                     ") must be a multiple of the chunk size " +
                                     std::to_string(kMigrateChunk) +
                                     " (recomputing from a checkpoint off the chunk grid is not bit-exact)");
}

// The runnable model's work on its two instances (migrate_run.cpp): the uninterrupted run and the live
// request each prefill the prompt and decode `before` tokens; move-KV and recompute prefill it again
// with the tokens before the pause (counted whole, from the start); every continuation decodes `after`
// tokens: the uninterrupted run's, three strategies', the fault injection's and the same instance's.
// The figures at scale are formulas.
RunEstimate migrate_estimate(const MigrateParams& p) {
    const double prompt = p.prompt, before = p.before, after = p.after;
    ForwardWork w;
    w.instances = 2;
    w.add_prefill(prompt, 0, 2);
    w.add_decode(before, prompt, 2);
    w.add_prefill(prompt + before, 0, 2);
    w.add_decode(after, prompt + before, 6);
    // What to make smaller: the prompt when its four prefills cost more than the decoded tokens (a
    // decode token costs about four prefilled ones), else the longer of the two decodes.
    const bool prompt_most = 4 * prompt > 4 * (2 * before + 6 * after);
    return {.seconds = forward_seconds(w),
            .bytes = forward_bytes(w),
            .counted = forward_counted(w),
            .on = prompt_most      ? &p.prompt
                  : before > after ? &p.before
                                   : &p.after};
}

Experiment make_migrate_experiment() {
    return make_experiment(Module<MigrateParams>{
        .number = 10,
        .id = "migrate",
        .title = "Split, pause, resume, migrate",
        .component = "request lifecycle",
        .purpose = "Move a live request between two model instances and get exactly the tokens it would have "
                   "produced; what each way of moving it costs.",
        .params = migrate_params(),
        .validate = validate_migrate,
        .estimate = migrate_estimate,
        .start = start_migrate,
        .headlines =
            {
                {"Bytes to migrate a Kimi-K3 request of 128k tokens (state + KV)",
                 {{"prompt", "16"}, {"before", "1"}, {"after", "1"}},
                 "scale_move_all_bytes"},
                {"Recomputing that request instead: seconds of one H100 (roofline estimate)",
                 {{"prompt", "16"}, {"before", "1"}, {"after", "1"}},
                 "scale_recompute_s"},
            },
        .falsifiers = migrate_falsifiers(),
        .audit_params = {{{"preset", "kimi-linear-48b"}}}});
}

K3_REGISTER_EXPERIMENT(make_migrate_experiment);

}  // namespace k3
