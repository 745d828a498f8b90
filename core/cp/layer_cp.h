// One KDA layer of the runnable model (core/model/kda_layer.h) run over R simulated ranks, with the
// short-conv halo (reference/kda.md §4.2): the first W-1 tokens of rank r convolve over the last W-1
// RAW (pre-conv) q/k/v projection rows before its slice, which live on rank r-1, or on several earlier
// ranks when slices are shorter than W-1 (FLA's causal_conv1d `cp_context`). Without the halo each
// rank starts from a zero window and its first W-1 tokens are wrong even when S is right.
//
// Stages, each independent per rank except the two exchanges:
//   project (per rank) -> halo exchange (raw rows) -> conv + activate (per rank)
//   -> core: local maps, combine, fix-up (context_parallel.h) -> output (per rank).
// Projections, conv, activation and output are row by row, so with the halo every pre-core activation
// has the bits of the single-rank layer; only the core's combination rounds differently.
#pragma once

#include "core/cp/context_parallel.h"
#include "core/model/kda_layer.h"

namespace k3::cp {

struct LayerCpOptions {
    Combiner combiner = Combiner::scan;
    Fixup fixup = Fixup::rerun;
    bool halo = true;  // false: every rank after the first starts its conv from a zero window
    int chunk = 64;
    Impl impl = Impl::simd;
    // Falsifier hook (k3cli audit-checks): this rank's halo loses its newest raw row (zeroed); -1: none.
    int drop_newest_halo_row = -1;
};

struct LayerRun {
    FloatBuf out;               // [T][d_model]
    FloatBuf state;             // final layer state in KdaState layout (S, then the windows)
    FloatBuf q, k, v, g, beta;  // the core's inputs for all tokens, in order
    int halo_max_ranks = 0;     // most earlier ranks one halo reads from
    double halo_bytes = 0;      // raw rows sent between ranks for the halos, fp32
};

// The layer over the slices `bounds` of x [T][d_model], from `start` (d.layer_floats() floats in
// KdaState layout, or null for a sequence start). Bounds must pass check_bounds.
LayerRun layer_context_parallel(const model::KdaWeights& w, const model::KdaDims& d, const float* x,
                                const Bounds& bounds, const float* start, const LayerCpOptions& o);

// The same layer on one rank: model::kda_forward with the chunked core.
LayerRun layer_single_rank(const model::KdaWeights& w, const model::KdaDims& d, const float* x, int T,
                           const float* start, int chunk, Impl impl = Impl::simd);

}  // namespace k3::cp
