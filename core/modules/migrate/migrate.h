// Module 10 `migrate`: pause a live request on the runnable model, serialise it into the versioned,
// checksummed blob (core/lifecycle/blob.h), restore it in a second Model instance and continue; the
// continuation must have the bits of the run that never stopped. Three strategies (move everything,
// move KV and recompute the KDA state from a checkpoint, recompute everything) with their costs at the
// runnable scale and at a published configuration's scale, and fault injection into the blob.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/experiments/module.h"
#include "core/lifecycle/migrate.h"
#include "core/model/accounting.h"
#include "core/model/roofline.h"

namespace k3 {

// The runnable model's KDA chunk: checkpoint intervals must be multiples of it to stay bit-exact.
inline constexpr int kMigrateChunk = 64;

// Damage done to the move-everything blob before the second instance reads it. The last three are
// forged: the blob is re-checksummed, so only the check that targets the field can catch them.
enum class BlobFault : uint8_t { none, bit_flip, truncate, wrong_model, wrong_layout, wrong_position };

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks); apart from the
// injected fault above, which the reader is meant to catch.
enum class MigrateFalsify : uint8_t {
    none,
    resumed_state_bit,    // one bit of the resumed KDA state is flipped before the continuation
    section_size_lie,     // the recompute blob's first section header declares 4 B more than it holds
    pending_token_lost,   // the move-KV capture loses its pending token before its blob is written
    kv_row_dropped,       // the move-everything capture drops its newest KV row, position one token back
    cost_model_kv_dtype,  // the cost model counts the runnable model's KV in another dtype
    intact_blob_bit,      // a high bit of the intact blob's first payload is flipped (resealed)
    same_instance_bit,    // the same for the blob resumed in the same instance
    fault_resealed,       // the injected fault is followed by a recomputed checksum
    scale_conv_dtype,     // the cost model at scale counts the conv windows in fp32
    scale_wrong_model,    // the costs at scale are computed for the other preset
};

struct MigrateParams {
    // The live request on the runnable model (config.h default_runnable_config).
    int prompt = 100, before = 8, after = 8;  // tokens
    double temperature = 0;
    int interval = 64;  // tokens between the destination's state checkpoints
    uint64_t seed = 1;
    // Fault injection.
    BlobFault fault = BlobFault::none;
    int64_t fault_offset = 1000;  // B
    int fault_bit = 0;
    // At a published configuration's scale.
    ModelPreset preset = ModelPreset::kimi_k3;
    int64_t context = 131072, distance = 2048;  // tokens
    std::string link = "ib-ndr";                // link_preset() id (core/model/roofline.h)
    std::string hardware = "h100";              // hardware_preset() id
    lifecycle::RecomputeRegime regime = lifecycle::RecomputeRegime::alone;
    MigrateFalsify falsify = MigrateFalsify::none;  // not a declared parameter
};

// A step the run could not do: its failed check. The run stops there.
struct MigrateFailure {
    std::string key, name, error;
};

// The live request on instance A at the pause.
struct PausedRequest {
    uint64_t position = 0;     // tokens consumed
    uint64_t blob_crc32c = 0;  // the move-everything blob's trailer
    size_t prompt_tokens = 0;
    double prefill_ms = 0, pause_ms = 0;  // measured on this device
};

// A written blob parsed back from its own bytes (migrate_recount.cpp): its header's size and section
// count, then every section header in turn, the payloads summed by kind. Not the blob reader: it checks
// nothing against a layout, it only measures.
struct BlobRecount {
    struct Section {
        uint32_t kind = 0;
        uint64_t offset = 0, payload = 0;  // of the payload, in the blob
    };
    std::vector<Section> sections;
    std::string problem;  // where the walk failed; empty when header, sections and CRC tile the blob
    uint64_t state = 0, kv = 0, tokens = 0, sampler = 0;  // payload bytes: S + conv windows, KV, ids, sampler
};
BlobRecount recount_blob(const std::vector<std::byte>& blob);

// What a strategy's blob must carry by the accounting (core/model/accounting.h) and the request.
struct BlobAccount {
    double state = 0;            // the accounted KDA state, or 0 when the strategy recomputes it
    double kv_rows = 0, kv = 0;  // KV rows the strategy moves, and their accounted bytes
    double ids = 0;              // token ids: the prompt, the generated tokens and the pending one
};

// One strategy: written on A, read and resumed on B, continued.
struct StrategyOutcome {
    lifecycle::MigrationStrategy strategy = lifecycle::MigrationStrategy::move_all;
    double blob_bytes = 0;
    BlobRecount recount;                 // the written blob, parsed back
    BlobAccount accounted;               // what it must carry
    bool resumed = false;                // read and resumed on B (else the run failed there)
    lifecycle::StrategyCost counted;     // what the cost model counts for it
    std::optional<uint64_t> checkpoint;  // position of the checkpoint move_kv restarted from
    lifecycle::ResumeInfo resume;
    bool state_same = false;                // restored state and KV byte-identical to the source's
    bool continuation_same = false;         // the continuation is bitwise the uninterrupted run
    double resume_ms = 0, continue_ms = 0;  // measured on this device
};

// The damaged (or intact) blob and what the reader made of it.
struct BlobFaultOutcome {
    std::string what;  // the damage done
    double blob_bytes = 0;
    lifecycle::BlobStatus status;
    bool as_expected = false;  // the reader's error is one the damage should cause
    bool resumed_ok = false;   // accepted, resumed and continued bitwise
};

// The damage done to a blob and the reader errors that must follow from it.
struct FaultPlan {
    std::string what;
    std::vector<lifecycle::BlobError> expect;
};

// Paused, freed and resumed in instance A itself.
struct SameInstanceOutcome {
    lifecycle::BlobStatus status;
    bool freed = false;  // the paused sequence released its pages
    bool equal = false;  // the continuation is bitwise the uninterrupted run
};

// The strategies at a published configuration's scale (bytes exact, times roofline estimates).
struct ScaleCosts {
    ModelConfig model;
    MemoryAccount account;
    Link link;
    Hardware hardware;
    double context = 0, distance = 0;  // distance clamped to the context
    lifecycle::MigrationCosts alone, in_batch;
    double break_even_distance = 0;
    struct Point {
        double x;
        lifecycle::MigrationCosts costs;  // in the chosen regime
    };
    std::vector<Point> over_context, over_distance;
    const lifecycle::MigrationCosts& chosen(lifecycle::RecomputeRegime r) const {
        return r == lifecycle::RecomputeRegime::alone ? alone : in_batch;
    }
};

// What the run found, stage by stage; a stage's part is empty when the run stopped before it.
struct MigrateResult {
    std::optional<MigrateFailure> failure;
    int linear_layers = 0;           // of the runnable model
    lifecycle::Trace uninterrupted;  // the continuation of the run that never stopped
    std::optional<PausedRequest> paused;
    std::vector<StrategyOutcome> strategies;  // in kMigrationStrategies order, as far as they got
    bool all_strategies = false;
    std::optional<BlobFaultOutcome> fault;
    std::optional<SameInstanceOutcome> same_instance;
    std::optional<ScaleCosts> scale;
};

ParamList<MigrateParams> migrate_params();
void validate_migrate(const MigrateParams& p, Issues& issues);
const char* regime_id(lifecycle::RecomputeRegime r);  // "alone", "in_batch"
// The staged run; its last stage builds the report (report_migrate).
std::unique_ptr<Run> start_migrate(const MigrateParams& p, const Params& raw);
// Damages `blob` as p.fault says (migrate_faults.cpp).
FaultPlan inject_fault(const MigrateParams& p, std::vector<std::byte>& blob);
void report_migrate(const MigrateParams& p, const MigrateResult& m, Report& r);

}  // namespace k3
