// Module 7 `spec-storage`: rolling back a rejected speculative draft with a recurrent state, by a full
// state snapshot per verified token or by the confirmed state plus per-token records replayed on
// rejection (reference/kda.md §6, reference/serving.md §3). The storage is exact accounting of the
// chosen preset (core/spec/storage.h); the rollback itself runs on the runnable model
// (core/spec/rollback_lab.h) and is compared bitwise with a cold run (copy) and with token-by-token
// decoding (replay), for every rejection point and every record variant; RecoverSSM's closed-form commit
// (vLLM's kernel) is measured beside its exact token-order fold.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/experiments/module.h"
#include "core/spec/rollback_lab.h"
#include "core/spec/storage.h"

namespace k3 {

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class SpecStorageFalsify : uint8_t {
    none,
    window_row,          // the storage accounting is given the model with a conv window one row shorter
    gate_per_head,       // the storage accounting counts one gate value per head, as for Gated DeltaNet
    short_record,        // the demo's records are under-allocated (spec::VerifyFault::short_record)
    record_bit,          // one bit of a demo record is flipped before the replay
    snapshot_position,   // the demo's copy restore takes the snapshot of the next draft position
    chunked_verify,      // the demo's one-pass verification runs the chunked kernel
    records_without_kg,  // RecoverSSM's records (and vLLM's kg_cache) lose the raw key and raw gate
    conv_without_draft,  // vLLM's conv window is counted W - 1 wide, without the N draft columns
    closed_form_skip,    // RecoverSSM's closed-form commit leaves the first token's decay factor out
    correction_bit,      // one bit of a demo record's correction is flipped before the fold
};

struct SpecStorageParams {
    ModelPreset preset = ModelPreset::kimi_k3;
    int draft_len = 7;  // N: tokens per verification (7: Kimi-K3's DSpark draft length, kimi_k3.md §3.3)
    spec::RecordVariant variant = spec::RecordVariant::recoverssm;
    int running_requests = 128;                             // R
    int ring_capacity = 16;                                 // L, for comparison with module 8
    bool demo = true;                                       // run the rollback on the runnable model
    double accept = 0.6;                                    // the demo drafter's acceptance
    SpecStorageFalsify falsify = SpecStorageFalsify::none;  // not a declared parameter
};

// The largest N: the range of draft_len and of the plots against N.
constexpr int kSpecMaxDraft = 32;
// vLLM's page comparison (kimi_k3.md §3.3) is tabulated for N = 1 .. kVllmPageTableDraft.
constexpr int kVllmPageTableDraft = 8;

// The closed-form commit's bound: max |closed form - direct decoding| <= this x max |S| for every n up
// to kSpecMaxDraft. Derivation in spec_storage_report.cpp (closed_form_checks).
constexpr double kClosedFormTolerance = 1e-5;

// vLLM's pages of one KDA layer (spec::vllm_kda_page_tensors, TP1), KDA presets only.
struct VllmPageComparison {
    std::vector<spec::PageTensor> tensors;  // at the chosen N
    spec::VllmPages chosen;                 // N = draft_len
    std::vector<spec::VllmPages> table;     // N = 1 .. kVllmPageTableDraft
    uint64_t conv_column_bytes = 0;         // one column of the layer's conv window (its layout)
    uint64_t recoverssm_record = 0;         // record_fields(recoverssm) per token per layer
};

// The storage accounting of the chosen preset.
struct StorageAccounting {
    ModelConfig model;
    spec::SpecStorage chosen;                     // the chosen variant at N, R, L
    std::vector<spec::SpecStorage> variants;      // every variant at N, R, L, in accounting_variants() order
    std::vector<spec::SpecStorage> by_draft_len;  // the chosen variant at N = 1 .. kSpecMaxDraft
    std::vector<spec::RecordField> fields;        // of one record of the chosen variant
    // One layer's snapshot recounted from the layer's own layout (core/model/dims.h, the dims the
    // runnable model addresses its state with), not from the accounting: S and the conv windows.
    uint64_t layout_S_bytes = 0, layout_window_bytes = 0;
    std::optional<spec::SpecStorage> kimi_reference;   // Kimi-Linear only: minimal exact at N = 4
    std::vector<spec::RecordField> recoverssm_fields;  // of one RecoverSSM record
    std::optional<VllmPageComparison> vllm;            // KDA presets
};

// The rollback on the runnable tiny model: one verification of N tokens, rejected at every n in 0..N
// and restored both ways.
struct RollbackDemo {
    bool ran = false;
    std::string error;  // why it did not run
    int draft_len = 0, accepted = 0, vocab = 0;
    uint64_t state_bytes = 0;           // the tiny model's state per sequence
    uint64_t snapshot_bytes_held = 0;   // confirmed + N snapshots, as held
    uint64_t confirmed_bytes_held = 0;  // the confirmed state the snapshot verifier keeps, as held
    bool logits_match = false;          // one-pass verification = token by token, bitwise
    std::vector<std::vector<spec::RestoreOutcome>> outcomes;  // per variant, n = 0..N
    std::vector<uint64_t> record_bytes_held;                  // per variant: confirmed + N records
    spec::SpecStorage tiny_accounting;                        // the accounting of the tiny preset, R = 1
    // Wall clock (the report's "timing").
    std::vector<double> copy_ms, replay_ms;          // median restore of n kept tokens, n = 0..N
    spec::LayerRestoreTiming layer;                  // one KDA layer at Kimi-Linear dimensions
    std::vector<spec::ClosedFormError> closed_form;  // RecoverSSM's closed-form commit, n = 0..N
};

struct SpecStorageResult {
    StorageAccounting accounting;
    std::optional<RollbackDemo> demo;  // with p.demo
};

ParamList<SpecStorageParams> spec_storage_params();
void validate_spec_storage(const SpecStorageParams& p, Issues& issues);
StorageAccounting account_spec_storage(const SpecStorageParams& p);
std::unique_ptr<Run> start_spec_storage(const SpecStorageParams& p, const Params& raw);
void report_spec_storage(const SpecStorageParams& p, const SpecStorageResult& result, Report& r);

}  // namespace k3
