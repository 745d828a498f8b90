#include "core/fleet/batch_roofline.h"

namespace k3 {

namespace {

enum : size_t { kDecode = 0, kPrefill = 1, kState = 2 };

}  // namespace

// One decode: its KV read and attention over its context, its state read and written; a verify's
// drafts besides: their attention over the context and their KV written, their state FLOPs and the
// speculative state traffic.
void BatchRoofline::add_decode(Pass& p, double context, Pass* next, const SpecWork& spec,
                               double tokens_per_step) const {
    const StepModel::SequenceCoefficients& q = model_.sequence();
    const double x = context, n = spec.drafts;
    p.flops[kDecode] += q.decode_flops_per_context * x;
    p.bytes[kDecode] += q.kv_bytes_per_token * x;
    p.flops[kState] += q.state_decode_flops + q.state_chunk_flops_per_token * n;
    p.bytes[kState] += q.state_bytes * (1 + spec.extra_state_transfers / 2);
    const double draft_flops = q.prefill_flops_per_pair * n * (x + (n + 1) / 2);
    p.flops[kPrefill] += draft_flops;
    p.bytes[kPrefill] += q.kv_bytes_per_token * n;
    p.draft_flops += draft_flops;
    p.draft_bytes += q.kv_bytes_per_token * n;
    p.draft_tokens += n;
    p.extra_state_transfers += spec.extra_state_transfers;
    p.tokens += 1 + n;
    p.decodes += 1;
    if (next) {
        next->flops[kDecode] += q.decode_flops_per_context * tokens_per_step;
        next->bytes[kDecode] += q.kv_bytes_per_token * tokens_per_step;
        next->flops[kPrefill] += q.prefill_flops_per_pair * n * tokens_per_step;
        next->draft_flops += q.prefill_flops_per_pair * n * tokens_per_step;
    }
}

// One chunk: its tokens' attention at the context plus half of themselves, its KV written, its state.
void BatchRoofline::add_chunk(Pass& p, double context, double tokens) const {
    const StepModel::SequenceCoefficients& q = model_.sequence();
    const double pairs = tokens * (context + tokens / 2);
    p.flops[kPrefill] += q.prefill_flops_per_pair * pairs;
    p.bytes[kPrefill] += q.kv_bytes_per_token * tokens;
    p.flops[kState] += q.state_chunk_flops_per_token * tokens;
    p.bytes[kState] += q.state_bytes;
    p.tokens += tokens;
    p.prefill = true;
    p.chunks += 1;
    p.chunk_tokens += tokens;
    p.chunk_pairs += pairs;
    p.chunk_state_flops += q.state_chunk_flops_per_token * tokens;
    if (tokens > p.largest) {
        p.largest = tokens;
        p.largest_pairs = pairs;
    }
}

namespace {

// The busiest DP group's part of a pass (core/fleet/step_model.h): decodes at 1/dp, chunks at their
// shares; at dp = 1 the pass itself.
BatchRoofline::Pass busiest_group_pass(const BatchRoofline::Pass& p, double dp, double state_bytes) {
    if (dp <= 1) return p;
    const GroupShare g =
        busiest_group(dp, p.chunks, p.chunk_tokens, p.chunk_pairs, p.largest, p.largest_pairs);
    BatchRoofline::Pass r = p;
    r.flops[kDecode] *= g.decode;
    r.bytes[kDecode] *= g.decode;
    r.flops[kPrefill] = (p.flops[kPrefill] - p.draft_flops) * g.chunk_attention + p.draft_flops * g.decode;
    r.bytes[kPrefill] = (p.bytes[kPrefill] - p.draft_bytes) * g.chunk_tokens + p.draft_bytes * g.decode;
    r.flops[kState] =
        (p.flops[kState] - p.chunk_state_flops) * g.decode + p.chunk_state_flops * g.chunk_tokens;
    r.bytes[kState] =
        state_bytes * (p.decodes * g.decode + p.chunks * g.chunks + p.extra_state_transfers * g.decode / 2);
    r.tokens = (p.decodes + p.draft_tokens) * g.decode + p.chunk_tokens * g.chunk_tokens;
    return r;
}

}  // namespace

double BatchRoofline::step_seconds(const Pass& first, const Pass& next, double j) const {
    Pass p = first;
    for (size_t i = 0; i < p.flops.size(); ++i) {
        p.flops[i] += j * next.flops[i];
        p.bytes[i] += j * next.bytes[i];
    }
    p.draft_flops += j * next.draft_flops;
    return seconds(p);
}

double BatchRoofline::seconds(const Pass& p) const {
    if (p.tokens == 0) return 0;
    const Pass g = busiest_group_pass(p, model_.dp_groups(), model_.sequence().state_bytes);
    StepTerms s = model_.batch_terms(p.tokens, g.tokens, p.prefill);
    const StepTerm per_sequence[3] = {StepTerm::attn_decode, StepTerm::attn_prefill, StepTerm::state};
    for (size_t i = 0; i < 3; ++i)
        s.term[size_t(per_sequence[i])] = model_.roof(per_sequence[i], g.flops[i], g.bytes[i]);
    return s.seconds();
}

}  // namespace k3
