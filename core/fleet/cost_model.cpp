#include "core/fleet/cost_model.h"

#include <algorithm>

namespace k3 {

RooflineCostModel::RooflineCostModel(const ModelConfig& model, const Hardware& hw, int gpus,
                                     const Efficiency& eff, bool attention_dp)
    : InstanceShape(model, hw, gpus, attention_dp), eff_(eff) {
    // flops_per_token is affine in the context: probe it rather than restating its terms.
    a_ = flops_per_token(model, 0);
    c_ = flops_per_token(model, 1) - a_;
    total_params_ = model.total_params;
    active_params_ = model.active_params;
}

WorkCost RooflineCostModel::cost(const IterationWork& w) const {
    WorkCost r;
    if (w.empty()) return r;
    const double T = double(w.decode) + w.prefill_tokens;
    const double seqs = double(w.decode) + double(w.prefill_chunks);
    // Same association as roofline.cpp so that pure batches give its figures to the last bit.
    const double decode_flops = double(w.decode) * a_ + c_ * w.decode_context;
    const double prefill_flops = a_ * w.prefill_tokens + c_ * w.prefill_attention;
    r.flops = decode_flops + prefill_flops;
    const double weights = 2.0 * std::min(total_params_, T * active_params_);
    r.bytes = weights + 2.0 * double(layout().state_bytes()) * seqs +
              double(layout().kv_bytes_per_token()) * (w.decode_context + w.prefill_tokens);
    const double tc = r.flops / (instance_hardware().peak_flops * eff_.compute);
    const double tm = r.bytes / (instance_hardware().mem_bytes_per_s * eff_.memory);
    r.compute_bound = tc >= tm;
    r.seconds = std::max(tc, tm);
    return r;
}

double RooflineCostModel::seconds(const IterationWork& w) const { return cost(w).seconds; }

}  // namespace k3
