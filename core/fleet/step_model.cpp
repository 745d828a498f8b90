#include "core/fleet/step_model.h"

#include <algorithm>

#include "core/base/fmath.h"
#include "core/model/accounting.h"
#include "core/model/tp_shard.h"

namespace k3 {

const char* engine_name(Engine e) {
    switch (e) {
        case Engine::sglang: return "sglang";
        case Engine::vllm: return "vllm";
        case Engine::trtllm: return "trtllm";
    }
    return "?";
}

const char* step_term_name(StepTerm t) {
    switch (t) {
        case StepTerm::dense_weights: return "dense_weights";
        case StepTerm::moe_experts: return "moe_experts";
        case StepTerm::attn_decode: return "attn_decode";
        case StepTerm::attn_prefill: return "attn_prefill";
        case StepTerm::state: return "state";
        case StepTerm::tp_allreduce: return "tp_allreduce";
        case StepTerm::ep_alltoall: return "ep_alltoall";
        case StepTerm::overhead: return "overhead";
        case StepTerm::count: break;
    }
    return "?";
}

double StepTerms::seconds() const {
    double s = 0;
    for (const TermCost& t : term) s += t.seconds;
    return s;
}

MoeSplit moe_split(const ModelConfig& m) {
    MoeSplit s;
    const double width = double(m.moe.latent ? m.moe.latent : m.d_model);
    if (m.moe.experts > 0 && m.moe.top_k > 0) {
        s.expert_params = 3.0 * width * double(m.moe.intermediate);
        s.moe_layers = std::max(m.n_layers() - m.moe.dense_layers, 0);
    }
    const double active_routed = double(s.moe_layers) * double(m.moe.top_k) * s.expert_params;
    s.dense_params = std::max(m.active_params - active_routed, 0.0);
    return s;
}

bool ships_mxfp4_experts(const ModelConfig& m) { return m.id == preset_id(ModelPreset::kimi_k3); }

WeightBytes weight_bytes(const ModelConfig& m) {
    const MoeSplit s = moe_split(m);
    const double routed = double(s.moe_layers) * double(m.moe.experts) * s.expert_params;
    WeightBytes w;
    w.routed = routed * (ships_mxfp4_experts(m) ? 0.53125 : 2.0);
    w.other = 2.0 * std::max(m.total_params - routed, s.dense_params);
    return w;
}

std::string deployment_error(const ModelConfig& m, const Deployment& d) {
    if (d.gpus < 1 || d.tp < 1 || d.ep < 1) return "gpus, tp and ep must be at least 1";
    if (d.gpus % d.tp != 0) return "gpus must be a multiple of tp";
    if (d.gpus % d.ep != 0) return "gpus must be a multiple of ep";
    if (!d.dp_attention && d.tp > 1 && m.lin_v_heads % d.tp != 0) return "tp must divide the linear heads";
    if (!d.dp_attention && d.tp > 1 && m.attn_heads % d.tp != 0) return "tp must divide the attention heads";
    return "";
}

namespace {

double rate_of(const StepModel::Rates& r, StepTerm t) {
    if (t == StepTerm::dense_weights) return r.gemm;
    if (t == StepTerm::moe_experts) return r.expert;
    return r.attn;
}

// MXFP4 experts run as W4A8 where the GPU has FP4 tensor cores (Blackwell: TensorRT-LLM's
// W4A8_MXFP4_MXFP8 and SGLang's FlashInfer W4A8 runner quantise the activations to MXFP8, and an
// FP8 x FP4 MMA runs at the FP8 rate), else weight-only, dequantised to BF16 (Marlin W4A16 on Hopper).
double mxfp4_expert_flops(const Hardware& h) {
    if (h.fp4_flops > 0 && h.fp8_flops > 0) return h.fp8_flops;
    return h.peak_flops;
}

// Attention FLOPs per (query, key) pair per layer per head: decode in MLA's absorbed form, prefill
// non-absorbed (FlashAttention over q/k nope + rope and v), GQA the same both ways.
double decode_pair_flops(const ModelConfig& m) {
    if (m.attn_kind == AttnKind::mla) return 2.0 * double(2 * m.mla_latent + m.mla_rope);
    return 4.0 * double(m.attn_head_dim);
}
double prefill_pair_flops(const ModelConfig& m) {
    if (m.attn_kind == AttnKind::mla) return 2.0 * double(m.mla_nope_dim + m.mla_rope + m.mla_v_dim);
    return 4.0 * double(m.attn_head_dim);
}

}  // namespace

StepModel::StepModel(const ModelConfig& m, const Deployment& d, const StepFactors& f)
    : m_(m), d_(d), f_(f), split_(moe_split(m)) {
    r_.gemm = d.gpu.peak_flops * f.f_gemm;
    r_.expert = (d.mxfp4_experts ? mxfp4_expert_flops(d.gpu) : d.gpu.peak_flops) * f.f_gemm;
    r_.attn = d.gpu.peak_flops * f.f_attn;
    r_.bw = d.gpu.mem_bytes_per_s * f.f_mem;
    // What one rank sees: widths, shares and its KV / state bytes.
    ta_ = d.dp_attention ? 1.0 : double(d.tp);
    dp_ = double(std::max(d.gpus, 1)) / ta_;
    ModelConfig c = m;
    c.kv_dtype = d.kv_dtype;
    const MemoryAccount a = account_memory(shard_for_tp(c, int(ta_)));
    const double kv = double(a.kv_bytes_per_token), state = double(a.state_bytes);
    const double heads = double(m.attn_heads) / ta_, La = double(m.n_attention());
    seq_.decode_flops_per_context = decode_pair_flops(m) * heads * La;
    seq_.kv_bytes_per_token = kv;
    seq_.prefill_flops_per_pair = prefill_pair_flops(m) * heads * La;
    const double hv = double(m.lin_v_heads) / ta_, K = double(m.head_k), V = double(m.head_v);
    const double Ll = double(m.n_linear());
    seq_.state_decode_flops = 8.0 * hv * K * V * Ll;
    seq_.state_chunk_flops_per_token = (8.0 * K * V + 4.0 * 64.0 * (K + V)) * hv * Ll;
    seq_.state_bytes = 2.0 * state;
}

TermCost StepModel::roof(StepTerm t, double flops, double bytes) const {
    TermCost c;
    c.flops = flops;
    c.bytes = bytes;
    const double peak = rate_of(r_, t);
    const double tc = peak > 0 ? flops / peak : 0;
    const double tm = r_.bw > 0 ? bytes / r_.bw : 0;
    c.compute_bound = tc >= tm;
    c.seconds = std::max(tc, tm);
    return c;
}

void StepModel::weight_terms(StepTerms& s, double T, double Tr) const {
    s.term[size_t(StepTerm::dense_weights)] =
        roof(StepTerm::dense_weights, 2.0 * split_.dense_params * Tr / ta_, 2.0 * split_.dense_params / ta_);
    if (split_.moe_layers == 0) return;
    const double E = double(m_.moe.experts), k = double(m_.moe.top_k);
    const double touched = E * (1.0 - exp_f64(T * log1p_f64(-k / E)));
    s.experts_touched = touched;
    const double share = d_.ep > 1 ? double(d_.ep) : double(d_.gpus);
    const double bytes_per_param = d_.mxfp4_experts ? 0.53125 : 2.0;
    const double L = double(split_.moe_layers);
    s.term[size_t(StepTerm::moe_experts)] =
        roof(StepTerm::moe_experts, 2.0 * T * k * split_.expert_params * L / double(d_.gpus),
             L * touched / share * split_.expert_params * bytes_per_param);
}

void StepModel::comm_terms(StepTerms& s, double Tr) const {
    const double link = d_.gpu.nvlink_bytes_per_s > 0 ? d_.gpu.nvlink_bytes_per_s : 1e30;
    if (ta_ > 1) {
        const double p = ta_, bytes = Tr * double(m_.d_model) * 2.0;
        const double one = 2.0 * f_.alpha_s + 2.0 * (p - 1.0) / p * bytes / link;
        TermCost& t = s.term[size_t(StepTerm::tp_allreduce)];
        t.bytes = 2.0 * double(m_.n_layers()) * bytes;
        t.seconds = 2.0 * double(m_.n_layers()) * one;
    }
    if (d_.ep > 1 && d_.dp_attention && split_.moe_layers > 0) {
        const double p = double(d_.ep), width = double(m_.moe.latent ? m_.moe.latent : m_.d_model);
        const double bytes = Tr * double(m_.moe.top_k) * width * 2.0;
        const double one = f_.alpha_s + (p - 1.0) / p * bytes / link;
        TermCost& t = s.term[size_t(StepTerm::ep_alltoall)];
        t.bytes = 2.0 * double(split_.moe_layers) * bytes;
        t.seconds = 2.0 * double(split_.moe_layers) * one;
    }
}

StepTerms StepModel::batch_terms(double tokens, double group_tokens, bool prefill) const {
    StepTerms s;
    if (tokens <= 0) return s;
    weight_terms(s, tokens, group_tokens);
    comm_terms(s, group_tokens);
    s.term[size_t(StepTerm::overhead)].seconds =
        f_.overhead_s[size_t(d_.engine)] +
        (prefill ? f_.prefill_layer_s[size_t(d_.engine)] * double(m_.n_layers()) : 0.0);
    return s;
}

GroupShare busiest_group(double dp, double chunks, double chunk_tokens, double chunk_attention,
                         double largest_chunk, double largest_chunk_attention) {
    GroupShare g;
    if (dp <= 1) return g;
    g.decode = 1.0 / dp;
    g.chunk_tokens = chunk_tokens > 0 ? std::max(largest_chunk, chunk_tokens / dp) / chunk_tokens : 0;
    g.chunk_attention =
        chunk_attention > 0 ? std::max(largest_chunk_attention, chunk_attention / dp) / chunk_attention : 0;
    g.chunks = chunks > 0 ? std::max(1.0, chunks / dp) / chunks : 0;
    return g;
}

StepTerms StepModel::terms(const IterationWork& w) const {
    if (w.empty()) return {};
    const GroupShare g = busiest_group(dp_, double(w.prefill_chunks), w.prefill_tokens, w.prefill_attention,
                                       w.largest_chunk, w.largest_chunk_attention);
    // The busiest group's decodes (with their drafts), chunk tokens, pairs and sequences.
    const double decodes = double(w.decode) * g.decode, drafts = w.draft_tokens * g.decode;
    const double chunk_tokens = w.prefill_tokens * g.chunk_tokens;
    const double query_tokens = chunk_tokens + drafts;
    const double pairs = w.prefill_attention * g.chunk_attention + w.draft_attention * g.decode;
    StepTerms s = batch_terms(double(w.decode) + w.draft_tokens + w.prefill_tokens, decodes + query_tokens,
                              w.prefill_chunks > 0);
    const SequenceCoefficients& q = seq_;
    const double context = w.decode_context * g.decode;
    s.term[size_t(StepTerm::attn_decode)] =
        roof(StepTerm::attn_decode, q.decode_flops_per_context * context, q.kv_bytes_per_token * context);
    s.term[size_t(StepTerm::attn_prefill)] =
        roof(StepTerm::attn_prefill, q.prefill_flops_per_pair * pairs, q.kv_bytes_per_token * query_tokens);
    const double seqs = decodes + double(w.prefill_chunks) * g.chunks;
    s.term[size_t(StepTerm::state)] =
        roof(StepTerm::state, q.state_decode_flops * decodes + q.state_chunk_flops_per_token * query_tokens,
             q.state_bytes * (seqs + w.extra_state_transfers * g.decode / 2));
    return s;
}

StepTerms step_terms(const ModelConfig& m, const Deployment& d, const StepFactors& f,
                     const IterationWork& w) {
    if (w.empty()) return {};
    return StepModel(m, d, f).terms(w);
}

IterationWork decode_work(double batch, double context) {
    IterationWork w;
    w.decode = uint32_t(batch);
    w.decode_context = double(w.decode) * context;
    return w;
}

double prefill_seconds(const ModelConfig& m, const Deployment& d, const StepFactors& f, double tokens,
                       double chunk) {
    double s = 0;
    for (double done = 0; done < tokens; done += chunk) {
        IterationWork w;
        w.add_chunk(done, std::min(chunk, tokens - done));
        s += step_seconds(m, d, f, w);
    }
    return s;
}

}  // namespace k3
