// Module 7 `spec-storage`: its parameters, validation and declaration.
#include "core/modules/spec_storage/spec_storage.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

// The view of Kimi-Linear's published figures (reference/kda.md §6): N = 4, minimal exact, no demo.
std::vector<std::pair<std::string, std::string>> kimi_linear_n4() {
    return {{"preset", "kimi-linear-48b"}, {"draft_len", "4"}, {"variant", "minimal_exact"}, {"demo", "0"}};
}

std::vector<Falsifier<SpecStorageParams>> spec_storage_falsifiers() {
    auto set = [](SpecStorageFalsify f) { return [f](SpecStorageParams& p) { p.falsify = f; }; };
    const std::vector<std::pair<std::string, std::string>> kimi_n4 = kimi_linear_n4();
    const std::vector<std::pair<std::string, std::string>> k3_pages = {{"demo", "0"}};
    return {
        {"window_row",
         "the storage accounting counts each snapshot with one conv window row too few",
         {"snapshot_equals_layer_state", "kimi_linear_reference_figures"},
         set(SpecStorageFalsify::window_row),
         kimi_n4},
        {"gate_per_head",
         "the record accounting counts one gate value per head (as for gated deltanet), not one per key "
         "channel",
         {"kimi_linear_record_variants", "kimi_linear_reference_figures",
          "recoverssm_page_records_equal_records"},
         set(SpecStorageFalsify::gate_per_head),
         kimi_n4},
        {"short_record",
         "each record is allotted its last field's floats too few (that field overlaps the one before)",
         {"held_bytes_equal_accounting", "ratios_from_held_bytes"},
         set(SpecStorageFalsify::short_record)},
        {"record_bit",
         "one bit of the first recorded gate value is flipped before the replay",
         {"copy_equals_replay", "replay_equals_direct", "variant_exactness_claims", "recoverssm_fold_bitwise",
          "closed_form_within_tolerance"},
         set(SpecStorageFalsify::record_bit)},
        {"snapshot_position",
         "the copy restore takes the snapshot of the next draft position (the kv is still cut at n)",
         {"copy_equals_direct", "copy_equals_replay", "none_kept_leaves_confirmed_state"},
         set(SpecStorageFalsify::snapshot_position)},
        {"chunked_verify",
         "the one-pass verification runs the chunked kernel instead of the recurrent one",
         {"one_pass_logits_bitwise"},
         set(SpecStorageFalsify::chunked_verify)},
        {"records_without_kg",
         "recoverssm's records and vllm's kg_cache are counted without the raw key and the raw gate",
         {"kimi_k3_recoverssm_record", "kimi_k3_vllm_page_table"},
         set(SpecStorageFalsify::records_without_kg),
         k3_pages},
        {"conv_without_draft",
         "vllm's conv window is counted w - 1 columns wide, without the n draft columns",
         {"vllm_snapshot_page_widens_window", "kimi_k3_vllm_page_table"},
         set(SpecStorageFalsify::conv_without_draft),
         k3_pages},
        {"closed_form_skip",
         "recoverssm's closed-form commit leaves the first accepted token's decay factor out of the product",
         {"closed_form_within_tolerance"},
         set(SpecStorageFalsify::closed_form_skip)},
        {"correction_bit",
         "one bit of the first recorded correction c_t (layer 0) is flipped before the fold",
         {"recoverssm_fold_bitwise", "closed_form_within_tolerance"},
         set(SpecStorageFalsify::correction_bit)},
    };
}

// The accounting is closed form; the demo's rollback restores every n of 0 ... N with every record
// variant on the runnable model and times one KDA layer at Kimi-Linear's size. `/usr/bin/time` of
// `k3cli run spec-storage` took 0.28, 1.04 and 2.18 s of CPU at N = 1, 16 and 32 (native, the demo
// on): 0.25 + 0.04 N + 0.0008 N^2 s, doubled for a slower machine; 34 to 84 MiB.
RunEstimate spec_storage_estimate(const SpecStorageParams& p) {
    if (!p.demo) return {.seconds = 0.05, .bytes = 16.0 * 1024 * 1024, .counted = "closed form"};
    const double n = p.draft_len;
    return {.seconds = 2 * (0.25 + 0.04 * n + 0.0008 * n * n),
            .bytes = (40.0 + 2.0 * n) * 1024 * 1024,
            .counted = "the rollback of " + std::to_string(p.draft_len) + " draft tokens, every variant",
            .on = &p.draft_len};
}

}  // namespace

ParamList<SpecStorageParams> spec_storage_params() {
    using P = SpecStorageParams;
    ParamList<P> l;
    l.choice(&P::preset, "preset", "Model",
             preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b,
                             ModelPreset::tiny, ModelPreset::small}))
        .in_group("Model");
    l.integer(&P::draft_len, "draft_len", "Tokens per verification N", "tokens", 1, kSpecMaxDraft)
        .in_group("Speculation");
    l.choice(&P::variant, "variant", "Record variant", record_variant_choices()).in_group("Speculation");
    l.integer(&P::running_requests, "running_requests", "Running requests R", "requests", 1, 4096)
        .log()
        .in_group("Fleet");
    l.integer(&P::ring_capacity, "ring_capacity", "Ring capacity L", "records", 1, 256)
        .log()
        .in_group("Fleet")
        .describe(
            "For comparison: a ReplaySSM-style ring of L records per request (module 8). "
            "SGLang's default is 16.");
    l.flag(&P::demo, "demo", "Run the rollback on the runnable model").in_group("Runnable model");
    l.real(&P::accept, "accept", "Draft acceptance (demo)", "fraction", 0, 1)
        .in_group("Runnable model")
        .active_when("demo", "1");
    return l;
}

void validate_spec_storage(const SpecStorageParams& p, Issues& issues) {
    if (p.ring_capacity < p.draft_len)
        issues.warning(p.ring_capacity,
                       "a ring of " + format_number(p.ring_capacity) +
                           " records cannot hold one verification of N = " + format_number(p.draft_len) +
                           " tokens (module 8 refuses it); its figure is shown anyway");
}

Experiment make_spec_storage_experiment() {
    const std::vector<std::pair<std::string, std::string>> kimi_n4 = kimi_linear_n4();
    return make_experiment(Module<SpecStorageParams>{
        .number = 7,
        .id = "spec-storage",
        .title = "Projection replay vs snapshots",
        .component = "speculative decoding",
        .purpose =
            "What rolling back a rejected speculative draft costs with a recurrent state: a full state "
            "snapshot per verified token, or the confirmed state plus small per-token records "
            "replayed on rejection.",
        .params = spec_storage_params(),
        .validate = validate_spec_storage,
        .estimate = spec_storage_estimate,
        .start = start_spec_storage,
        .live = false,
        .headlines =
            {
                {"Kimi-K3, N = 7 draft tokens: vLLM's snapshot pages per request against RecoverSSM's one "
                 "page",
                 {{"preset", "kimi-k3"}, {"variant", "recoverssm"}, {"draft_len", "7"}, {"demo", "0"}},
                 "vllm_ratio_none"},
                {"Kimi-Linear, N = 4: N snapshots against one state + N records (extra storage convention)",
                 kimi_n4, "ratio_n_snapshots"},
                {"Kimi-Linear, N = 4: the same, counting the confirmed state on both sides", kimi_n4,
                 "ratio_counting_confirmed"},
            },
        .falsifiers = spec_storage_falsifiers(),
        .audit_params = {kimi_linear_n4()}});
}

K3_REGISTER_EXPERIMENT(make_spec_storage_experiment);

}  // namespace k3
