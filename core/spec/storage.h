// Storage of speculative decoding with a recurrent state (reference/kda.md §6, reference/serving.md §3):
// full state snapshots per verified token against the confirmed state plus per-token records that are
// replayed. Exact byte counts for any ModelConfig; pure functions, no model needed.
//
// Conventions (kda.md §6). N = draft_len = tokens verified in one pass. Per KDA layer:
//   snapshot approach  : a full state (S + conv windows) after every verified token   N x snapshot
//   projection approach: the confirmed state stays; N per-token records                snapshot + N x record
//   ratio_n_snapshots        = N x snapshot / (snapshot + N x record)          3.72 at Kimi-Linear, N = 4
//   ratio_counting_confirmed = (N + 1) x snapshot / (snapshot + N x record)    4.65: the snapshot side also
//                              keeps the confirmed state it rolls back to on a full rejection
// A ring of capacity L (module 8) holds L records instead of N: snapshot + L x record per layer.
//
// Dtypes: S in the config's state dtype; the raw projection rows, post-conv k and v, the raw gate
// inputs and the layer input in the activation dtype, which is the conv window's dtype (bf16 for the
// published models, fp32 for the runnable ones); g, beta and the delta always fp32 (kda.md §6: bf16
// storage of g or delta makes replay inexact).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/config.h"

namespace k3::spec {

// What is recorded per token per layer (kda.md §6 table).
enum class RecordVariant : uint8_t {
    core_only,          // (a)  k, v post-conv; g; beta
    minimal_exact,      // (b)  raw pre-conv q, k, v; g; beta (k, v recomputed through the conv)
    raw_gates,          // (b') raw q, k, v; raw gate input z; raw beta logit (gates recomputed)
    no_conv_recompute,  // (c)  (a) + raw q, k, v for the conv window
    layer_input,        // (d)  the layer input x; every projection recomputed
    delta,              // (e)  k; delta = beta (v - k^T D S); g   (replay S = D S + k delta^T)
    delta_conv,         // (e) + raw q, k, v for the conv window
    recoverssm,         // Kimi-K3's RecoverSSM (kimi_k3.md §3.2): correction c_t; k before L2; raw gate z
};

struct VariantInfo {
    RecordVariant variant;
    const char* id;     // parameter value ("minimal_exact")
    const char* row;    // row of the kda.md §6 table ("(b)")
    const char* label;  // display name
    const char* contents;
    // Replay restores the whole layer state (S and the conv windows) bitwise on the runnable model
    // (tests/unit/test_spec_replay.cpp checks every claim, including the "no" ones).
    bool exact;
    bool restores_window;  // false: S is exact, the conv windows are not rebuilt
};

// Every variant, in enum order; the runnable model records and replays each (core/spec/records.h).
const std::vector<VariantInfo>& record_variants();
// The same list (callers that tabulate the accounting of every variant).
inline const std::vector<VariantInfo>& accounting_variants() { return record_variants(); }
const VariantInfo& variant_info(RecordVariant v);
std::optional<RecordVariant> parse_variant(std::string_view id);
std::vector<std::string> variant_ids();  // of accounting_variants()

// One field of a record: elements per token per layer, stored in `dtype`.
struct RecordField {
    std::string name;
    uint64_t elements = 0;
    DType dtype = DType::fp32;
    uint64_t bytes() const { return elements * dtype_bytes(dtype); }
};

// Gate values per token per layer: one per key channel for KDA (HV x K), one per head for GDN (HV).
uint64_t gate_elements(const ModelConfig& c);
std::vector<RecordField> record_fields(const ModelConfig& c, RecordVariant v);
uint64_t record_bytes_per_token_per_layer(const ModelConfig& c, RecordVariant v);
// RecoverSSM keeps each draft token's raw pre-conv q, k, v rows as a column of the conv window vLLM widens
// to W - 1 + N columns (kimi_k3.md §3.1-3.2), so they are not part of its record (record_fields), but
// they are held per token all the same: one column per token for recoverssm, none for the others (whose
// records carry the raw rows themselves, or do not rebuild the window).
int record_conv_columns(RecordVariant v);
// One column of a linear layer's conv window: the raw q, k and v channels of one token, conv dtype.
uint64_t conv_column_bytes(const ModelConfig& c);
// What a token's rollback data holds per layer: its record plus its conv columns. The runnable model's
// RecordLayout::floats x 4 is this figure (its dtypes are fp32).
uint64_t held_bytes_per_token_per_layer(const ModelConfig& c, RecordVariant v);
// S + conv windows of one linear layer (core/model/accounting.h).
uint64_t snapshot_bytes_per_layer(const ModelConfig& c);

struct SpecStorage {
    int draft_len = 0, running_requests = 0, ring_capacity = 0, linear_layers = 0;
    uint64_t snapshot_per_layer = 0;  // one full state
    uint64_t record_per_token = 0;    // one record, per layer
    uint64_t held_per_token = 0;      // one record + its conv columns (held_bytes_per_token_per_layer)

    // Per layer. "extra" is what speculation adds on top of the confirmed state.
    uint64_t snapshots_extra_per_layer = 0;  // N x snapshot
    // "record" below is what a token holds, held_per_token (= record_per_token but for recoverssm).
    uint64_t records_extra_per_layer = 0;     // N x record
    uint64_t snapshots_total_per_layer = 0;   // (N + 1) x snapshot
    uint64_t projection_total_per_layer = 0;  // snapshot + N x record
    uint64_t ring_total_per_layer = 0;        // snapshot + L x record
    double ratio_n_snapshots = 0;             // N x snapshot / (snapshot + N x record)
    double ratio_counting_confirmed = 0;      // (N + 1) x snapshot / (snapshot + N x record)
    double ratio_per_token = 0;               // snapshot / record (= extra vs extra, any N)

    // Per sequence (all linear layers) and per fleet of R running requests.
    uint64_t per_sequence(uint64_t per_layer) const { return per_layer * uint64_t(linear_layers); }
    uint64_t per_fleet(uint64_t per_layer) const {
        return per_sequence(per_layer) * uint64_t(running_requests);
    }
};

// N >= 1, R >= 1, L >= 0 (0: no ring figures).
SpecStorage spec_storage(const ModelConfig& c, RecordVariant v, int draft_len, int running_requests,
                         int ring_capacity = 0);

// vLLM's page of one KDA layer per request under speculative decoding (kimi_k3.md §3.1-3.3), built
// from the tensors vLLM allocates (mamba_utils.py): the recurrent state (HV, K, V) in the state dtype and
// a conv window (q, k, v channels, W - 1 + N) in the conv dtype; RecoverSSM appends correction_cache
// (HV, 1 + N, V) fp32 and kg_cache (HV, 1 + N, 2 K) in the activation dtype. N = draft tokens
// (num_speculative_tokens), TP shards every tensor by heads.
struct PageTensor {
    std::string name;
    std::vector<uint64_t> shape;
    DType dtype = DType::fp32;
    bool record = false;  // RecoverSSM's record caches (not in a snapshot page)
    uint64_t bytes() const {
        uint64_t e = 1;
        for (uint64_t d : shape) e *= d;
        return e * dtype_bytes(dtype);
    }
};
std::vector<PageTensor> vllm_kda_page_tensors(const ModelConfig& c, int draft_tokens, int tp = 1);

struct VllmPages {
    int draft_tokens = 0;
    uint64_t state = 0, conv = 0, records = 0;  // S, C_N, R_N
    uint64_t snapshot_page = 0;                 // S + C_N: one state block of the baseline
    uint64_t recoverssm_page = 0;               // S + C_N + R_N: RecoverSSM's one state block
    // State blocks per request: baseline 1 + N (none) or 2 + N (align, prefix caching); RecoverSSM 1 or 2.
    uint64_t snapshot_none = 0, recoverssm_none = 0, snapshot_align = 0, recoverssm_align = 0;
    double ratio_none = 0, ratio_align = 0;  // snapshot / RecoverSSM bytes per request
};
VllmPages vllm_pages(const std::vector<PageTensor>& tensors, int draft_tokens);

}  // namespace k3::spec
