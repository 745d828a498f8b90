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

std::string deployment_error(const ModelConfig& m, const Deployment& d) {
    if (d.gpus < 1 || d.tp < 1 || d.ep < 1) return "gpus, tp and ep must be at least 1";
    if (d.gpus % d.tp != 0) return "gpus must be a multiple of tp";
    if (d.gpus % d.ep != 0) return "gpus must be a multiple of ep";
    if (!d.dp_attention && d.tp > 1 && m.lin_v_heads % d.tp != 0) return "tp must divide the linear heads";
    if (!d.dp_attention && d.tp > 1 && m.attn_heads % d.tp != 0) return "tp must divide the attention heads";
    return "";
}

namespace {

struct Rates {
    double gemm = 0, expert = 0, attn = 0, bw = 0;
};

Rates rates_of(const Deployment& d, const StepFactors& f) {
    Rates r;
    r.gemm = d.gpu.peak_flops * f.f_gemm;
    const double fp4 = d.gpu.fp4_flops > 0 ? d.gpu.fp4_flops : d.gpu.peak_flops;
    r.expert = (d.mxfp4_experts ? fp4 : d.gpu.peak_flops) * f.f_gemm;
    r.attn = d.gpu.peak_flops * f.f_attn;
    r.bw = d.gpu.mem_bytes_per_s * f.f_mem;
    return r;
}

TermCost roof(double flops, double bytes, double peak, double bw) {
    TermCost t;
    t.flops = flops;
    t.bytes = bytes;
    const double tc = peak > 0 ? flops / peak : 0;
    const double tm = bw > 0 ? bytes / bw : 0;
    t.compute_bound = tc >= tm;
    t.seconds = std::max(tc, tm);
    return t;
}

int ceil_log2(int p) {
    int n = 0;
    while ((1 << n) < p) ++n;
    return n;
}

// What one rank of the deployment sees: widths, shares and its KV / state bytes.
struct RankView {
    double ta = 1, dp = 1, kv_per_token = 0, state = 0;
};

RankView rank_view(const ModelConfig& m, const Deployment& d) {
    RankView v;
    v.ta = d.dp_attention ? 1.0 : double(d.tp);
    v.dp = double(d.gpus) / v.ta;
    ModelConfig c = m;
    c.kv_dtype = d.kv_dtype;
    const MemoryAccount a = account_memory(shard_for_tp(c, int(v.ta)));
    v.kv_per_token = double(a.kv_bytes_per_token);
    v.state = double(a.state_bytes);
    return v;
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

void weight_terms(StepTerms& s, const ModelConfig& m, const Deployment& d, const Rates& r, double T,
                  const RankView& v) {
    const MoeSplit ms = moe_split(m);
    const double Tr = T / v.dp;
    s.term[size_t(StepTerm::dense_weights)] =
        roof(2.0 * ms.dense_params * Tr / v.ta, 2.0 * ms.dense_params / v.ta, r.gemm, r.bw);
    if (ms.moe_layers == 0) return;
    const double E = double(m.moe.experts), k = double(m.moe.top_k);
    const double touched = E * (1.0 - exp_f64(T * log1p_f64(-k / E)));
    s.experts_touched = touched;
    const double share = d.ep > 1 ? double(d.ep) : double(d.gpus);
    const double bytes_per_param = d.mxfp4_experts ? 0.53125 : 2.0;
    const double L = double(ms.moe_layers);
    s.term[size_t(StepTerm::moe_experts)] =
        roof(2.0 * T * k * ms.expert_params * L / double(d.gpus),
             L * touched / share * ms.expert_params * bytes_per_param, r.expert, r.bw);
}

void attention_terms(StepTerms& s, const ModelConfig& m, const Rates& r, const IterationWork& w,
                     const RankView& v) {
    const double heads = double(m.attn_heads) / v.ta, La = double(m.n_attention());
    s.term[size_t(StepTerm::attn_decode)] = roof(decode_pair_flops(m) * heads * La * w.decode_context / v.dp,
                                                 v.kv_per_token * w.decode_context / v.dp, r.attn, r.bw);
    s.term[size_t(StepTerm::attn_prefill)] =
        roof(prefill_pair_flops(m) * heads * La * w.prefill_attention / v.dp,
             v.kv_per_token * w.prefill_tokens / v.dp, r.attn, r.bw);
}

void state_term(StepTerms& s, const ModelConfig& m, const Rates& r, const IterationWork& w,
                const RankView& v) {
    const double hv = double(m.lin_v_heads) / v.ta, K = double(m.head_k), V = double(m.head_v);
    const double Ll = double(m.n_linear());
    const double decode_flops = 8.0 * hv * K * V * Ll * double(w.decode) / v.dp;
    const double chunk_flops = (8.0 * K * V + 4.0 * 64.0 * (K + V)) * hv * Ll * w.prefill_tokens / v.dp;
    const double seqs = (double(w.decode) + double(w.prefill_chunks)) / v.dp;
    s.term[size_t(StepTerm::state)] = roof(decode_flops + chunk_flops, 2.0 * v.state * seqs, r.attn, r.bw);
}

void comm_terms(StepTerms& s, const ModelConfig& m, const Deployment& d, const StepFactors& f, double T,
                const RankView& v) {
    const double link = d.gpu.nvlink_bytes_per_s > 0 ? d.gpu.nvlink_bytes_per_s : 1e30;
    const double Tr = T / v.dp;
    if (v.ta > 1) {
        const double p = v.ta, bytes = Tr * double(m.d_model) * 2.0;
        const double one = 2.0 * double(ceil_log2(int(p))) * f.alpha_s + 2.0 * (p - 1.0) / p * bytes / link;
        TermCost& t = s.term[size_t(StepTerm::tp_allreduce)];
        t.bytes = 2.0 * double(m.n_layers()) * bytes;
        t.seconds = 2.0 * double(m.n_layers()) * one;
    }
    const MoeSplit ms = moe_split(m);
    if (d.ep > 1 && ms.moe_layers > 0) {
        const double p = double(d.ep), width = double(m.moe.latent ? m.moe.latent : m.d_model);
        const double bytes = Tr * double(m.moe.top_k) * width * 2.0;
        const double one = double(ceil_log2(d.ep)) * f.alpha_s + (p - 1.0) / p * bytes / link;
        TermCost& t = s.term[size_t(StepTerm::ep_alltoall)];
        t.bytes = 2.0 * double(ms.moe_layers) * bytes;
        t.seconds = 2.0 * double(ms.moe_layers) * one;
    }
}

}  // namespace

StepTerms step_terms(const ModelConfig& m, const Deployment& d, const StepFactors& f,
                     const IterationWork& w) {
    StepTerms s;
    if (w.empty()) return s;
    const Rates r = rates_of(d, f);
    const RankView v = rank_view(m, d);
    const double T = double(w.decode) + w.prefill_tokens;
    weight_terms(s, m, d, r, T, v);
    attention_terms(s, m, r, w, v);
    state_term(s, m, r, w, v);
    comm_terms(s, m, d, f, T, v);
    s.term[size_t(StepTerm::overhead)].seconds =
        f.overhead_s[size_t(d.engine)] + (w.prefill_chunks > 0 ? f.prefill_step_s : 0.0);
    return s;
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

double burst_ttft_seconds(const ModelConfig& m, const Deployment& d, const StepFactors& f, int requests,
                          double tokens, double chunk) {
    // Steps take `chunk` tokens off the queue (request by request, each request's chunk at its own
    // context); a request finishes at the end of the step that takes its last token.
    double clock = 0, sum = 0, left = tokens;  // left: what the first waiting request still needs
    int next = 0;
    while (next < requests) {
        IterationWork w;
        double room = chunk, partial = tokens;
        int finished = 0;
        for (int r = next; r < requests && room > 0; ++r) {
            const double remaining = r == next ? left : tokens;
            const double n = std::min(room, remaining);
            w.add_chunk(tokens - remaining, n);
            room -= n;
            if (n < remaining)
                partial = remaining - n;
            else
                ++finished;
        }
        clock += step_seconds(m, d, f, w);
        sum += clock * double(finished);
        next += finished;
        left = partial;
    }
    return requests > 0 ? sum / double(requests) : 0;
}

}  // namespace k3
