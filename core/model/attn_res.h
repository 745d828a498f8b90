// Attention residuals over depth (Kimi K3's "attn_res_block_size", reference/kimi_k3.md §1.3), as vLLM
// computes them (vllm/models/kimi_k3/nvidia/ops/attn_res.py `_attn_res_kernel`, model.py
// `KimiDecoderLayer._pre_attn_norm` / `_post_attn_norm`, `KimiLinearModel.forward`). Per token, with
// block size B over the layers 0..L-1:
//
//   prefix = embedding; blocks = []                      (the committed block sums b_0, b_1, ...)
//   layer l: prefix += previous MLP output (none at l = 0)
//            if l % B == 0: blocks[l / B] = prefix       (seal a block: the sum so far)
//            x   = mix(blocks[0 .. ceil(l / B)), prefix; attn_res weights)      -> RMSNorm -> attention
//            prefix = attention output if l % B == 0, else prefix + attention output
//            x   = mix(blocks[0 .. ceil(l / B) + (l % B == 0)), prefix; mlp_res) -> RMSNorm -> MLP
//   end:     prefix += last MLP output; h = mix(blocks[0 .. ceil(L / B)), prefix; output_res) -> final norm
//
//   mix(sources v_0..v_n; norm w, pseudo-query q): logit_i = (v_i . (w * q)) / sqrt(mean(v_i^2) + eps),
//   p = softmax(logit), out = sum_i p_i v_i; with no committed block out = prefix.
//
// Everything is per token: the blocks are an activation bank of the forward pass ([T][blocks][d]), not
// sequence state, so prefill in pieces, decoding and restoring stay bitwise the whole run.
#pragma once

#include "core/model/weights.h"

namespace k3::model {

// Number of blocks sealed before layer l runs its attention (vLLM's prev_valid_blocks = ceil(l / B)).
inline int attn_res_blocks_before(int layer, int B) { return (layer + B - 1) / B; }

// out [T][d] = mix over the sources blocks[t][0..n) (row stride ld floats between tokens, d between
// blocks) and prefix[t] (stride d). fp32, sums left to right, sources in order, own exp: the same bits in
// every build. n = 0 copies prefix.
void attn_res_mix(const float* blocks, int n, size_t ld, const float* prefix, int T, int d,
                  const AttnResWeights& w, float eps, float* out);

}  // namespace k3::model
