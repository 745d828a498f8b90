// What a page pool (core/memory/pool.h) needs to know about a model, from its exact accounting.
// It lives on the model's side so that the pool knows nothing about models.
#pragma once

#include "core/memory/pool.h"
#include "core/model/accounting.h"

namespace k3 {

PoolModel pool_model(const MemoryAccount& a);
inline PoolModel pool_model(const ModelConfig& c) { return pool_model(account_memory(c)); }

// vLLM's state page for one linear layer of one rank (reference/kimi_k3.md §2.2; vLLM
// mamba_utils.py): the conv window of (conv_width - 1) + N columns of the conv channels in the conv
// dtype (N speculative tokens), the recurrent state, and with RecoverSSM, for each of the 1 + N
// positions and each value head, the delta-rule correction (head_v fp32) and the key with the raw
// gate (2 x head_k bf16).
struct VllmStatePage {
    uint64_t conv_bytes = 0, recurrent_bytes = 0, correction_bytes = 0, key_gate_bytes = 0;
    uint64_t bytes() const { return conv_bytes + recurrent_bytes + correction_bytes + key_gate_bytes; }
};
// `draft_columns` false leaves the N draft columns out of the conv window (a falsifier's damage).
VllmStatePage vllm_state_page(const ModelConfig& rank, int draft_len, bool recoverssm,
                              bool draft_columns = true);
// The pool model vLLM's one-page-size design sees: the model's, with its state page.
PoolModel vllm_pool_model(const ModelConfig& rank, const VllmStatePage& page);

}  // namespace k3
