// What one instance of g GPUs is and holds, whichever model times its iterations: the hardware of the
// g GPUs combined (what a migration's recompute runs on), one copy of a request's state and of a
// token's KV (what a checkpoint, the host tier or a link holds and moves), and the same summed over the
// ranks that hold them (TpLayout: what an iteration reads). The calibrated step model
// (core/fleet/fleet_cost.h CostModel) and the uncalibrated roofline (core/fleet/cost_model.h
// RooflineCostModel) both are one.
#pragma once

#include <cstdint>

#include "core/fleet/iteration_work.h"
#include "core/fleet/tp_layout.h"
#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3 {

class InstanceShape {
  public:
    InstanceShape() = default;
    InstanceShape(const ModelConfig& model, const Hardware& hw, int gpus, bool attention_dp);

    const Hardware& instance_hardware() const { return hw_; }
    int gpus() const { return gpus_; }
    uint64_t state_bytes() const { return state_bytes_; }
    uint64_t kv_bytes_per_token() const { return kv_bytes_; }
    uint64_t held_state_bytes() const { return layout_.state_bytes(); }
    uint64_t held_kv_bytes_per_token() const { return layout_.kv_bytes_per_token(); }
    const TpLayout& layout() const { return layout_; }

  private:
    Hardware hw_;
    int gpus_ = 1;
    uint64_t state_bytes_ = 0, kv_bytes_ = 0;
    TpLayout layout_;
};

// Prefill tokens per second of one instance for a chunk of `chunk` tokens after `context` cached tokens
// (capacity figures for token budgets and for the text), by either cost model's seconds().
template <class Cost>
double chunk_tokens_per_s(const Cost& cost, double chunk, double context) {
    IterationWork w;
    w.add_chunk(context, chunk);
    const double s = cost.seconds(w);
    return s > 0 ? chunk / s : 0;
}

}  // namespace k3
