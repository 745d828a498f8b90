// How long one iteration of a fleet instance takes: the calibrated step-time model (core/fleet/step_model.h)
// at the fitted factors (core/fleet/calibration.h), the same terms, factors and Deployment module 15
// `cost` evaluates. fleet_deployment is the one mapping of a FleetConfig to a Deployment:
//   gpu = hardware, gpus = tp = gpus (one instance's ranks, tensor parallel), ep = 1 (the routed experts
//   tensor-sharded over the ranks), dp_attention = attention_dp, kv_dtype = the model's, MXFP4 experts
//   for the preset whose checkpoint ships them (ships_mxfp4_experts, as module 15), engine sglang / vllm
//   = theirs (fleet_step_factors: their fitted overheads); engine ideal, the upper bound, takes each
//   overhead (per step, per prefill layer) at the lowest any engine was fitted to.
// FleetConfig::efficiency does not enter the iteration time (it was the uncalibrated roofline's, now
// core/fleet/cost_model.h's RooflineCostModel); migrations (core/lifecycle) still read it.
#pragma once

#include <cstdint>

#include "core/fleet/fleet_config.h"
#include "core/fleet/instance_shape.h"
#include "core/fleet/iteration_work.h"
#include "core/fleet/step_model.h"

namespace k3 {

Engine fleet_step_engine(CacheEngine e);
// The factors an instance steps with: the fitted ones; under engine ideal every engine's overheads
// set to the lowest fitted (so the engine the Deployment names does not matter).
StepFactors fleet_step_factors(CacheEngine e);
Deployment fleet_deployment(const FleetConfig& c);

class CostModel : public InstanceShape {
  public:
    CostModel() = default;
    // `kv_view_dp`: cost the iterations with DP attention whatever c.attention_dp says (the falsifier
    // kv_read_sharded); the layout (what the ranks hold) stays c's.
    explicit CostModel(const FleetConfig& c, bool kv_view_dp = false);

    // Seconds one iteration takes (an estimate), its terms, and their FLOPs and bytes summed
    // (compute_bound: the compute-bound terms take at least as long as the others).
    double seconds(const IterationWork& w) const { return step_.seconds(w); }
    StepTerms terms(const IterationWork& w) const { return step_.terms(w); }
    WorkCost cost(const IterationWork& w) const;
    const StepModel& step_model() const { return step_; }
    const Deployment& deployment() const { return step_.deployment(); }
    double prefill_tokens_per_s(double chunk, double context) const {
        return chunk_tokens_per_s(*this, chunk, context);
    }

  private:
    StepModel step_;
};

}  // namespace k3
