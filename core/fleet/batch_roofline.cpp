#include "core/fleet/batch_roofline.h"

namespace k3 {

namespace {

enum : size_t { kDecode = 0, kPrefill = 1, kState = 2 };

}  // namespace

// One decode: its KV read and attention over its context, its state read and written.
void BatchRoofline::add_decode(Pass& p, uint64_t context, Pass* next) const {
    const StepModel::SequenceCoefficients& q = model_.sequence();
    const double x = double(context);
    p.flops[kDecode] += q.decode_flops_per_context * x;
    p.bytes[kDecode] += q.kv_bytes_per_token * x;
    p.flops[kState] += q.state_decode_flops;
    p.bytes[kState] += q.state_bytes;
    p.tokens += 1;
    if (next) {
        next->flops[kDecode] += q.decode_flops_per_context;
        next->bytes[kDecode] += q.kv_bytes_per_token;
    }
}

// One chunk: its tokens' attention at the context plus half of themselves, its KV written, its state.
void BatchRoofline::add_chunk(Pass& p, double context, double tokens) const {
    const StepModel::SequenceCoefficients& q = model_.sequence();
    p.flops[kPrefill] += q.prefill_flops_per_pair * (tokens * (context + tokens / 2));
    p.bytes[kPrefill] += q.kv_bytes_per_token * tokens;
    p.flops[kState] += q.state_chunk_flops_per_token * tokens;
    p.bytes[kState] += q.state_bytes;
    p.tokens += tokens;
    p.prefill = true;
}

double BatchRoofline::step_seconds(const Pass& first, const Pass& next, double j) const {
    Pass p = first;
    for (size_t i = 0; i < p.flops.size(); ++i) {
        p.flops[i] += j * next.flops[i];
        p.bytes[i] += j * next.bytes[i];
    }
    return seconds(p);
}

double BatchRoofline::seconds(const Pass& p) const {
    if (p.tokens == 0) return 0;
    StepTerms s = model_.batch_terms(p.tokens, p.prefill);
    const StepTerm per_sequence[3] = {StepTerm::attn_decode, StepTerm::attn_prefill, StepTerm::state};
    for (size_t i = 0; i < 3; ++i)
        s.term[size_t(per_sequence[i])] = model_.roof(per_sequence[i], p.flops[i], p.bytes[i]);
    return s.seconds();
}

}  // namespace k3
