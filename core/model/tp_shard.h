// What one serving rank holds of a model: the KV cache's element type as a server is told it, and
// the model's share under tensor parallelism. Modules 2 `memory` and 3 `pool` take both from here.
#pragma once

#include <string>

#include "core/model/config.h"

namespace k3 {

// The attention cache's element type: the preset's own (vLLM's "auto") or a chosen one.
enum class KvDtype : uint8_t { model, bf16, fp8, fp16, fp32 };
DType resolve_kv_dtype(KvDtype k, DType model);

// One rank's share under tensor parallelism (reference/kimi_k3.md §2.1, §2.3): the linear layers'
// heads are split, so their S and conv windows divide by TP; an MLA latent is one KV "head" that every
// rank keeps whole; GQA K/V heads are split (at least one per rank). tp <= 1 returns the model.
ModelConfig shard_for_tp(ModelConfig c, int tp);
// Why `tp` cannot shard the model's linear heads ("" when it divides them).
std::string tp_shard_error(const ModelConfig& whole, int tp);

}  // namespace k3
