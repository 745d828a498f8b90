// One MLA attention layer of the runnable model: DeepSeek-style multi-head latent attention without
// RoPE (Kimi Linear's NoPE MLA, reference/kda.md §0), computed in the absorbed form over the latent
// cache, so a query costs O(T (latent + rope)) per head whatever the head dims:
//
//   project  q = x W_q (per head [q_nope | q_pe]);  [c | k_pe] = x W_kv_a;  c = RMSNorm(c)
//   append   the cache row [c | k_pe] of each new token goes to the sequence's KV pages
//   absorb   per head qc = [W_uk^T q_nope | q_pe]   (q_nope . (W_uk c) == (W_uk^T q_nope) . c)
//   attend   per head s_t = scale (qc . [c_t | k_pe_t]) for every cached t <= the row's position,
//            p = softmax(s) (own exp, sums in token order), ctx = sum_t p_t c_t
//   output   o_h = W_uv ctx_h (== sum_t p_t v_t), with Kimi K3's output gate o_h *= sigmoid(x g_proj)_h,
//            out = o W_o
// Each row is computed on its own (causal, same arithmetic in prefill and decode), so an attention
// layer gives the same bits whatever the batching.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/dims.h"
#include "core/model/weights.h"

namespace k3::model {

inline constexpr int kMaxMlaHeads = 64;  // per-row scratch of the attend stage

// One attention layer's latent cache of one sequence: fp32 rows of cache_row() floats in pages of
// page_tokens rows (pointers into a pool's KV pages, or any buffers).
struct KvView {
    std::vector<float*> pages;
    int page_tokens = 1;
    int row = 0;
    float* at(uint64_t t) const {
        return pages[size_t(t / uint64_t(page_tokens))] + (t % uint64_t(page_tokens)) * row;
    }
};

struct MlaActs {
    int T = 0;
    FloatBuf q;       // [T][H][nope + rope]
    FloatBuf kv;      // [T][latent + rope]: the cache rows of the new tokens (c normalised)
    FloatBuf qc;      // [T][H][latent + rope]: absorbed queries
    FloatBuf ctx;     // [T][H][latent]
    FloatBuf ov;      // [T][H][v]
    FloatBuf gate;    // [T][H][v]: x g_proj, before the sigmoid (with the output gate)
    FloatBuf scores;  // [H][context] scratch of one row
    void resize(const MlaDims& d, int T);
};

// Also the output-gate input when the layer has one (it needs x, which the later stages do not see).
void mla_project(const MlaWeights& w, const MlaDims& d, const float* x, int T, MlaActs& a, Impl impl);
// Rows [pos, pos + T) of the cache get the new tokens' rows.
void mla_append(const MlaDims& d, const KvView& kv, uint64_t pos, const MlaActs& a);
void mla_absorb(const MlaWeights& w, const MlaDims& d, MlaActs& a, Impl impl);
// Row r attends to cache rows [0, pos + r].
void mla_attend(const MlaDims& d, const KvView& kv, uint64_t pos, MlaActs& a, Impl impl);
void mla_output(const MlaWeights& w, const MlaDims& d, MlaActs& a, float* out, Impl impl);

// All stages: x [T][d] -> out [T][d], the cache must already hold room for rows [pos, pos + T).
void mla_forward(const MlaWeights& w, const MlaDims& d, const KvView& kv, uint64_t pos, const float* x, int T,
                 MlaActs& a, float* out, Impl impl);

}  // namespace k3::model
