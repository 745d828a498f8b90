// Module 14 `boundaries`: a second count of what maps 1, 3, 4 and 5 price, item by item, that does not
// go through core/boundaries/economics.h. Bytes come from the blob writer (core/lifecycle/blob.h: the
// sizes of blobs it actually writes) and the sections of the blob layout; prefill and decode times from
// the fleet simulator's cost model (core/fleet/cost_model.h), which tallies an iteration's FLOPs and
// bytes its own way; the tokens a verification keeps from the distribution of its rejection point.
// The checks compare every cell of the four maps with this count, and map 5's break-even distance
// with the closed-form root of its condition.
#pragma once

#include <functional>

#include "core/modules/boundaries/boundaries_maps.h"

namespace k3 {

// A value of the count and the size of the terms it nets (what a difference is judged against).
struct LedgerValue {
    double value = 0, scale = 0;
};

// Sizes of state blobs measured from the writer at small geometries (one and two linear layers, zero
// and one KV rows, zero and one token ids) and extrapolated: a blob grows by one fixed amount per linear
// layer, per KV position and per token id. Moves send: everything; KV, token ids and sampler; or token
// ids and sampler only.
struct BlobSizes {
    double everything = 0, kv_and_ids = 0, ids_only = 0;  // at position 0 without token ids
    double per_position = 0, per_id = 0;
    double all(double position, double ids) const {
        return everything + position * per_position + ids * per_id;
    }
    double kv(double position, double ids) const {
        return kv_and_ids + position * per_position + ids * per_id;
    }
    double ids(double n) const { return ids_only + n * per_id; }
};
BlobSizes measure_blob_sizes(const ModelConfig& c);

// Map 1: a cached prefix of P tokens over its residence, GPU-us per prefix token at reuse p.
LedgerValue prefix_ledger(const BoundaryInputs& in, double prefix_tokens, double reuse);
// Map 3: one verification of N tokens at acceptance a, GPU-us saved by replay per kept token; the
// rollback storage is held for one decode step of the batch. With RecoverSSM N counts draft tokens
// (1 + N verified) and the pages are vLLM's.
LedgerValue replay_ledger(const BoundaryInputs& in, int draft_len, double accept);
// Map 4: the speed-up of R ranks over one on a prompt of R x n tokens.
LedgerValue cp_ledger(const BoundaryInputs& in, double tokens_per_rank, int ranks);
// Map 5: log10(recompute time / best move time) at this context and link bandwidth.
LedgerValue migration_ledger(const BoundaryInputs& in, const BlobSizes& b, double bandwidth, double context);
// The last checkpoint distance at which moving only the KV is at least as fast as moving everything, at
// the chosen context and instance link: the first root of the condition, solved in closed form.
double move_kv_break_even_closed_form(const BoundaryInputs& in, const BlobSizes& b);

// Every cell of `h` with a value against the count at (x, y): a mismatch when they differ by more than
// `tolerance` x the count's scale.
LedgerAgreement agree(const HeatMap& h, const std::function<LedgerValue(double x, double y)>& count,
                      double tolerance);

}  // namespace k3
