// One iteration's step time (core/fleet/step_model.h) recounted request by request: each sequence's own
// attention and state FLOPs and bytes at its own context (SequenceCoefficients times that context or
// chunk), summed over the batch, each term then put on its roofline; plus the terms the batch's token
// count decides (weights, experts, communication, overhead), from the tokens counted the same way. A
// run of decode steps advances each context by one token per step: every sequence's terms at its context
// and what one more token adds (or a verify's accepted tokens). It does not go through the cost model's
// IterationWork (which sums the batch's contexts first): this is the second path the fleet simulation
// compares every iteration's simulated time with (FleetTotals::worst_clock_gap).
#pragma once

#include <array>
#include <cstdint>

#include "core/fleet/spec_decode.h"
#include "core/fleet/step_model.h"

namespace k3 {

class BatchRoofline {
  public:
    // The per-sequence terms (attn_decode, attn_prefill, state) and what the batch-level ones need.
    struct Pass {
        std::array<double, 3> flops{}, bytes{};
        double tokens = 0;
        bool prefill = false;
        // What the busiest DP group's share needs (core/fleet/step_model.h busiest_group): the
        // decodes, the chunks, their tokens and pairs, the largest chunk, the chunks' state FLOPs.
        double decodes = 0, chunks = 0, chunk_tokens = 0, chunk_pairs = 0, largest = 0, largest_pairs = 0;
        double chunk_state_flops = 0;
        // Speculative verifies (core/fleet/spec_decode.h): their draft tokens, the attention FLOPs and
        // KV bytes of the drafts (in the prefill term, on the decodes' share), the extra state transfers.
        double draft_tokens = 0, draft_flops = 0, draft_bytes = 0, extra_state_transfers = 0;
    };

    BatchRoofline() = default;
    explicit BatchRoofline(const StepModel& model) : model_(model) {}

    // A decode step of one sequence at `context`, a verify when `spec` has drafts; with `next`, what
    // the next step of a run of decode steps adds to it: `tokens_per_step` more tokens of context
    // (the acceptance length).
    void add_decode(Pass& p, double context, Pass* next = nullptr, const SpecWork& spec = {},
                    double tokens_per_step = 1) const;
    void add_chunk(Pass& p, double context, double tokens) const;
    double seconds(const Pass& p) const;
    // Step j of a run of decode steps whose first step is `first` and each step adds `next`.
    double step_seconds(const Pass& first, const Pass& next, double j) const;

  private:
    StepModel model_;
};

}  // namespace k3
