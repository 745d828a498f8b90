// One forward pass's roofline time evaluated request by request, with core/model/roofline.h's
// per-token FLOPs (flops_per_token at each sequence's own context) and its byte rules (weights read
// once per pass, the experts a batch touches; each sequence's state read and written; KV read by a
// decode, written by a prefill chunk). A run of decode steps advances each context by one token per
// step: from every sequence's own FLOPs at its context and one token later. It does not use the cost model
// (core/fleet/cost_model.h), which sums the batch first and evaluates an affine form: this is the second path
// the fleet simulation compares every iteration's simulated time with (FleetTotals::worst_clock_gap).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3 {

class BatchRoofline {
  public:
    struct Pass {
        double flops = 0, bytes = 0, tokens = 0;
    };

    BatchRoofline() = default;
    // An instance of `gpus` GPUs of `per_gpu` (gpus x peak and bandwidth, no communication), its KV and
    // states laid out as core/fleet/tp_layout.h says (tensor parallel or DP attention).
    BatchRoofline(const ModelConfig& model, const Hardware& per_gpu, int gpus, const Efficiency& eff,
                  bool attention_dp = false);

    // A decode step of one sequence at `context`; with `next`, what one more token of context adds
    // to it (the next step of a run of decode steps: flops_per_token is affine in the context).
    void add_decode(Pass& p, uint64_t context, Pass* next = nullptr);
    void add_chunk(Pass& p, double context, double tokens) const;
    double seconds(const Pass& p) const;
    // Step j of a run of decode steps whose first step is `first` and each step adds `next`.
    double step_seconds(const Pass& first, const Pass& next, double j) const;

  private:
    ModelConfig model_;
    Hardware hw_;
    Efficiency eff_;
    double state_bytes_ = 0, kv_bytes_per_token_ = 0;
    // flops_per_token at whole contexts, as computed (NaN: not yet): a decode step asks for the same
    // contexts again and again, and the function walks the model's layers.
    std::vector<double> flops_at_;
    double flops_at(uint64_t context);
};

}  // namespace k3
