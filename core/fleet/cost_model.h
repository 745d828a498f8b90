// The uncalibrated roofline of an iteration (the fleet's cost before issue 16; the fleet now runs on the
// calibrated step model, core/fleet/fleet_cost.h). Module 14 `boundaries` keeps it for its ledger, whose
// other maps are all this roofline at the module's own efficiencies.
//
// How long one iteration of an instance takes: a roofline ESTIMATE from the model preset and a
// hardware preset (core/model/roofline.h), for a continuous batch that mixes decode steps with
// chunks of prefill.
//
// One iteration is one forward pass over T tokens (one per decoding sequence plus every prefill
// chunk). Per the roofline of core/model/roofline.h:
//   FLOPs = sum over tokens of flops_per_token(context of that token)
//         = a x T + c x (sum of decode contexts + sum over chunks of n x (context + n / 2)),
//     where flops_per_token(x) = a + c x (projections + MoE, KDA core, attention over x tokens);
//   bytes = weights read once (2 B x min(total parameters, T x active parameters): the experts a
//           batch touches) + KV read by every decoding sequence + KV written by every prefill chunk
//           + each sequence's recurrent state read and written;
//   seconds = max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency)).
// A pure decode batch gives exactly roofline.h's decode_step_cost and a pure prefill of n tokens
// (n x active >= total) its prefill_cost (tests/unit/test_fleet.cpp checks both). An instance
// of g GPUs is taken as ideal tensor parallelism: g x the peak FLOP/s and g x the bandwidth, no
// communication cost. No kernel-launch or scheduling overhead is modelled.
#pragma once

#include <cstdint>
#include <string>

#include "core/fleet/instance_shape.h"
#include "core/fleet/iteration_work.h"
#include "core/model/roofline.h"

namespace k3 {

class RooflineCostModel : public InstanceShape {
  public:
    RooflineCostModel() = default;
    RooflineCostModel(const ModelConfig& model, const Hardware& hw, int gpus, const Efficiency& eff = {},
                      bool attention_dp = false);

    // Seconds one iteration takes (an estimate).
    double seconds(const IterationWork& w) const;
    WorkCost cost(const IterationWork& w) const;
    const Efficiency& efficiency() const { return eff_; }
    double prefill_tokens_per_s(double chunk, double context) const {
        return chunk_tokens_per_s(*this, chunk, context);
    }

  private:
    Efficiency eff_;
    double a_ = 0, c_ = 0;  // flops_per_token(x) = a + c x
    double total_params_ = 0, active_params_ = 0;
};

}  // namespace k3
