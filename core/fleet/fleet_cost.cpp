#include "core/fleet/fleet_cost.h"

#include <algorithm>
#include <string>

#include "core/fleet/calibration.h"

namespace k3 {

Engine fleet_step_engine(CacheEngine e) {
    if (e == CacheEngine::sglang) return Engine::sglang;
    if (e == CacheEngine::vllm) return Engine::vllm;
    return Engine::trtllm;
}

StepFactors fleet_step_factors(CacheEngine e) {
    StepFactors f = kFittedFactors;
    if (e != CacheEngine::ideal) return f;
    const double step = *std::min_element(f.overhead_s.begin(), f.overhead_s.end());
    const double layer = *std::min_element(f.prefill_layer_s.begin(), f.prefill_layer_s.end());
    f.overhead_s.fill(step);
    f.prefill_layer_s.fill(layer);
    return f;
}

Deployment fleet_deployment(const FleetConfig& c) {
    Deployment d;
    d.gpu = c.hardware;
    d.gpus = std::max(c.gpus, 1);
    d.tp = d.gpus;
    d.ep = 1;
    d.dp_attention = c.attention_dp;
    d.kv_dtype = c.model.kv_dtype;
    d.mxfp4_experts = ships_mxfp4_experts(c.model);
    d.engine = fleet_step_engine(c.engine);
    return d;
}

CostModel::CostModel(const FleetConfig& c, bool kv_view_dp)
    : InstanceShape(c.model, c.hardware, c.gpus, c.attention_dp) {
    Deployment d = fleet_deployment(c);
    d.dp_attention = d.dp_attention || kv_view_dp;
    step_ = StepModel(c.model, d, fleet_step_factors(c.engine));
}

WorkCost CostModel::cost(const IterationWork& w) const {
    const StepTerms s = step_.terms(w);
    WorkCost r;
    double compute_s = 0, other_s = 0;
    for (const TermCost& t : s.term) {
        r.flops += t.flops;
        r.bytes += t.bytes;
        (t.compute_bound && t.flops > 0 ? compute_s : other_s) += t.seconds;
    }
    r.seconds = s.seconds();
    r.compute_bound = compute_s >= other_s && compute_s > 0;
    return r;
}

}  // namespace k3
