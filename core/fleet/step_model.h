// The calibrated step-time model (issue 16): how long one iteration (core/fleet/cost_model.h's
// IterationWork) of a deployment takes, as a sum of named physical terms, each visible (StepTerms).
// An ESTIMATE; its free factors are fitted on named published points (core/fleet/calibration.h).
//
// Deployment: G = gpus, tp, ep, dp_attention. Attention and the linear layers run at width
// ta = (dp_attention ? 1 : tp) on dp = G / ta groups; the routed experts are split over ep ranks
// (ep > 1: whole experts, E / ep per rank) or tensor-sharded over the G ranks (ep = 1). All ranks run
// in lockstep: the step is the busiest group's rank's time (busiest_group). Decodes spread evenly over
// the groups; a prompt's chunk runs whole on one group, each chunk on a group of its own while groups
// are left, so the busiest group holds the largest chunk or 1/dp of the chunk tokens, whichever is more.
//
// Shapes (per iteration): B decoding sequences with context sum Cd, chunks with n_total new tokens
// and pairs P = sum n (context + n / 2); T = B + n_total tokens; the busiest group's Tr tokens, Br
// decodes, Cd / dp context and its chunks' pairs (at dp = 1 the iteration itself).
// Model: L layers, La attention (MLA or GQA), Ll linear (KDA/GDN), Lm MoE layers (L - dense layers),
// E experts, top-k, one expert p_e = 3 w I parameters (w = expert width: latent or d_model),
// routed parameters R = Lm E p_e, dense parameters D = active - Lm k p_e (attention, linear layers,
// shared experts, dense MLPs, latent projections, LM head).
//
// Each term is max(FLOPs / (peak_class x f_class), bytes / (HBM x f_mem)), summed (not one max):
//   dense_weights   FLOPs 2 D Tr / ta              bytes 2 D / ta
//   moe_experts     FLOPs 2 T k p_e Lm / G          bytes Lm x E (1 - (1 - k/E)^T) / ep' x p_e x b_e
//                   (the experts see every group's tokens; ep' = ep, or G when tensor-sharded;
//                   b_e = 2, or 0.53125 for MXFP4: 4 bits + an E8M0 scale per 32; MXFP4 runs as W4A8
//                   at the FP8 peak where the GPU has FP4 tensor cores (TensorRT-LLM's W4A8_MXFP4_MXFP8,
//                   SGLang's FlashInfer W4A8: an FP8 x FP4 MMA runs at the FP8 rate), else weight-only
//                   at the BF16 peak (Marlin W4A16 on Hopper))
//   attn_decode     FLOPs 2 (H/ta) Cd/dp x La x (2 latent + rope) for MLA (absorbed form),
//                   4 (H/ta) hd x Cd/dp x La for GQA; bytes = a rank's KV of Cd/dp tokens (tp_layout:
//                   the MLA latent replicated on every rank, GQA K/V heads split)
//   attn_prefill    FLOPs 2 (H/ta) (d_qk + d_v) P/dp x La for MLA (non-absorbed: q/k 192, v 128),
//                   4 (H/ta) hd P/dp x La for GQA; bytes = the rank's KV of the new tokens written
//   state           decode: FLOPs 8 (HV/ta) K V Ll Br, bytes 2 x a rank's state x Br (read + write);
//                   prefill (chunked delta rule, chunk 64): FLOPs (8 K V + 4 x 64 (K + V)) (HV/ta) Ll
//                   x n_total/dp, bytes 2 x a rank's state per chunk (the FLOPs at f_attn: not GEMMs);
//                   a verify's drafts run the chunked form, and its speculative state traffic adds
//                   extra_state_transfers states (core/fleet/spec_decode.h)
//   tp_allreduce    ta > 1: 2 L all-reduces of Tr x d x 2 B, each 2 alpha + 2 (ta-1)/ta bytes / NVLink:
//                   a reduce-scatter and an all-gather of one step each, whatever ta (every GPU reaches
//                   every other through the NVLink switch, as the engines' custom all-reduces use it)
//   ep_alltoall     ep > 1 under DP attention only: 2 Lm exchanges (dispatch, combine) of Tr k w 2 B,
//                   each alpha + (ep-1)/ep bytes / NVLink. With TP attention every rank already holds
//                   every token: each runs its experts on them and the tp_allreduce combines (vLLM's
//                   use_all2all_kernels needs dp_size > 1; TensorRT-LLM's enable_alltoall needs
//                   enable_attention_dp)
//   overhead        the engine's fixed per-step cost (scheduling, launches, sampling): o_engine, plus,
//                   when the step holds a prefill chunk, L x p_engine: prefill runs outside CUDA graphs,
//                   so every layer pays the engine's eager prefill path (launches, host syncs, what its
//                   prefill kernels spend beyond the terms above)
// Free factors (StepFactors): f_gemm (dense and expert GEMMs), f_attn (attention FLOPs), f_mem (every
// byte class), alpha (one collective step's latency), o_engine and p_engine for sglang, vllm, trtllm.
// Not modelled: the up-projection of cached context in chunked MLA prefill, reading the cached
// context's KV during prefill, load imbalance across experts, overlap of terms.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/fleet/iteration_work.h"
#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3 {

enum class Engine : uint8_t { sglang, vllm, trtllm };
const char* engine_name(Engine e);

struct Deployment {
    Hardware gpu;
    int gpus = 1, tp = 1, ep = 1;
    bool dp_attention = false;
    DType kv_dtype = DType::bf16;
    bool mxfp4_experts = false;  // routed experts in MXFP4 (Kimi K3's checkpoint)
    Engine engine = Engine::vllm;
};

// The fitted factors (core/fleet/calibration.h holds the values the product uses and their provenance).
struct StepFactors {
    double f_gemm = 0.5, f_attn = 0.5, f_mem = 0.8;
    double alpha_s = 10e-6;                   // latency of one collective step
    std::array<double, 3> overhead_s{};       // per engine (Engine order), per step
    std::array<double, 3> prefill_layer_s{};  // per engine (Engine order), per layer, in a step with a chunk
};

enum class StepTerm : uint8_t {
    dense_weights,
    moe_experts,
    attn_decode,
    attn_prefill,
    state,
    tp_allreduce,
    ep_alltoall,
    overhead,
    count
};
inline constexpr int kStepTerms = int(StepTerm::count);
const char* step_term_name(StepTerm t);

struct TermCost {
    double flops = 0, bytes = 0, seconds = 0;
    bool compute_bound = false;
};

struct StepTerms {
    std::array<TermCost, kStepTerms> term{};
    double experts_touched = 0;  // expected distinct experts per MoE layer, whole model
    double seconds() const;      // the sum, in StepTerm order
    const TermCost& operator[](StepTerm t) const { return term[size_t(t)]; }
};

// The model's MoE split (derived from ModelConfig::moe and active_params as the header says).
struct MoeSplit {
    double expert_params = 0;  // p_e
    double dense_params = 0;   // D
    int moe_layers = 0;        // Lm
};
MoeSplit moe_split(const ModelConfig& m);

// Why the deployment cannot run ("" when it can): gpus a multiple of tp and of ep, heads divisible.
std::string deployment_error(const ModelConfig& m, const Deployment& d);

// Whether the preset's published checkpoint has its routed experts in MXFP4 (Kimi K3's).
bool ships_mxfp4_experts(const ModelConfig& m);

// The bytes of the published checkpoint's weights: the routed experts in MXFP4 (4 bits and an E8M0
// scale per 32) where the preset ships them, else bf16; every other parameter in bf16.
struct WeightBytes {
    double routed = 0, other = 0;
    double total() const { return routed + other; }
};
WeightBytes weight_bytes(const ModelConfig& m);

// The share of an iteration's work the busiest attention-DP group carries (all 1 at dp = 1): of the
// decodes (and their draft tokens), of the chunk tokens, of the chunks' attention pairs, of the chunks.
struct GroupShare {
    double decode = 1, chunk_tokens = 1, chunk_attention = 1, chunks = 1;
};
GroupShare busiest_group(double dp, double chunks, double chunk_tokens, double chunk_attention,
                         double largest_chunk, double largest_chunk_attention);

// The model evaluated for one deployment (its rates and a rank's per-sequence coefficients computed
// once): the terms of an iteration. A step's terms split into what the batch's token count decides
// (weights, experts, communication, overhead: batch_terms) and what each sequence adds, linear in its
// context and chunk (SequenceCoefficients: attention and state, per rank).
class StepModel {
  public:
    struct Rates {
        double gemm = 0, expert = 0, attn = 0, bw = 0;
    };
    struct SequenceCoefficients {             // on one rank of the sequence's DP group
        double decode_flops_per_context = 0;  // attn_decode FLOPs per token of a decode's context
        double kv_bytes_per_token = 0;        // KV read (decode context) or written (prefill token)
        double prefill_flops_per_pair = 0;    // attn_prefill FLOPs per unit of n (context + n / 2)
        double state_decode_flops = 0;        // state FLOPs of one decode
        double state_chunk_flops_per_token = 0;
        double state_bytes = 0;  // state read and written by one sequence (decode or chunk)
    };

    StepModel() = default;
    StepModel(const ModelConfig& m, const Deployment& d, const StepFactors& f);
    StepTerms terms(const IterationWork& w) const;
    double seconds(const IterationWork& w) const { return terms(w).seconds(); }
    // The terms the batch's `tokens` decide, `group_tokens` of them on the busiest DP group (and the
    // overhead; `prefill`: the step holds a chunk).
    StepTerms batch_terms(double tokens, double group_tokens, bool prefill) const;
    double dp_groups() const { return dp_; }
    const SequenceCoefficients& sequence() const { return seq_; }
    // A term's time for its FLOPs and bytes: max over the term's peak and the bandwidth.
    TermCost roof(StepTerm t, double flops, double bytes) const;
    const Deployment& deployment() const { return d_; }
    const StepFactors& factors() const { return f_; }

  private:
    ModelConfig m_;
    Deployment d_;
    StepFactors f_;
    MoeSplit split_;
    Rates r_;
    double ta_ = 1, dp_ = 1;
    SequenceCoefficients seq_;
    void weight_terms(StepTerms& s, double T, double Tr) const;
    void comm_terms(StepTerms& s, double Tr) const;
};

StepTerms step_terms(const ModelConfig& m, const Deployment& d, const StepFactors& f, const IterationWork& w);
inline double step_seconds(const ModelConfig& m, const Deployment& d, const StepFactors& f,
                           const IterationWork& w) {
    return step_terms(m, d, f, w).seconds();
}

// A decode step of `batch` sequences each at `context` tokens.
IterationWork decode_work(double batch, double context);
// Prefill of one prompt of `tokens` tokens in chunks of `chunk`, alone on the instance: the sum of its
// steps (each step its own overhead).
double prefill_seconds(const ModelConfig& m, const Deployment& d, const StepFactors& f, double tokens,
                       double chunk);
}  // namespace k3
