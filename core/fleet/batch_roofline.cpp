#include "core/fleet/batch_roofline.h"

#include <algorithm>
#include <cmath>

#include "core/fleet/tp_layout.h"

namespace k3 {

BatchRoofline::BatchRoofline(const ModelConfig& model, const Hardware& per_gpu, int gpus,
                             const Efficiency& eff, bool attention_dp)
    : model_(model), hw_(per_gpu), eff_(eff) {
    hw_.peak_flops *= double(std::max(gpus, 1));
    hw_.mem_bytes_per_s *= double(std::max(gpus, 1));
    const TpLayout l = tp_layout(model, gpus, attention_dp);
    state_bytes_ = double(l.state_bytes());
    kv_bytes_per_token_ = double(l.kv_bytes_per_token());
}

// decode_step_cost's terms for one sequence: its token at its context, its state, its KV read.
void BatchRoofline::add_decode(Pass& p, uint64_t context, Pass* next) {
    const double flops = flops_at(context);
    p.flops += flops;
    p.bytes += 2.0 * state_bytes_ + kv_bytes_per_token_ * double(context);
    p.tokens += 1;
    if (next) {
        next->flops += flops_at(context + 1) - flops;
        next->bytes += kv_bytes_per_token_;
    }
}

double BatchRoofline::flops_at(uint64_t context) {
    constexpr uint64_t kRemembered = uint64_t(1) << 20;  // contexts; longer ones are computed each time
    if (context >= kRemembered) return flops_per_token(model_, double(context));
    if (context >= flops_at_.size())
        flops_at_.resize(std::min(kRemembered, std::max<uint64_t>(context + 1, 2 * flops_at_.size())), NAN);
    double& f = flops_at_[context];
    if (std::isnan(f)) f = flops_per_token(model_, double(context));
    return f;
}

// prefill_cost's terms for one chunk: its tokens at the context plus half of themselves, its state,
// its KV written.
void BatchRoofline::add_chunk(Pass& p, double context, double tokens) const {
    p.flops += tokens * flops_per_token(model_, context + tokens / 2);
    p.bytes += 2.0 * state_bytes_ + kv_bytes_per_token_ * tokens;
    p.tokens += tokens;
}

double BatchRoofline::step_seconds(const Pass& first, const Pass& next, double j) const {
    return seconds({first.flops + j * next.flops, first.bytes + j * next.bytes, first.tokens});
}

double BatchRoofline::seconds(const Pass& p) const {
    if (p.tokens == 0) return 0;
    const double weights = 2.0 * std::min(model_.total_params, p.tokens * model_.active_params);
    return work_cost(p.flops, p.bytes + weights, hw_, eff_).seconds;
}

}  // namespace k3
