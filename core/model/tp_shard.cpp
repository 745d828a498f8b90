#include "core/model/tp_shard.h"

#include <algorithm>

namespace k3 {

DType resolve_kv_dtype(KvDtype k, DType model) {
    switch (k) {
        case KvDtype::model: return model;
        case KvDtype::bf16: return DType::bf16;
        case KvDtype::fp8: return DType::fp8;
        case KvDtype::fp16: return DType::fp16;
        case KvDtype::fp32: return DType::fp32;
    }
    return model;
}

ModelConfig shard_for_tp(ModelConfig c, int tp) {
    if (tp <= 1) return c;
    c.lin_heads /= tp;
    c.lin_v_heads /= tp;
    if (c.attn_kind == AttnKind::gqa) c.kv_heads = std::max(1, c.kv_heads / tp);
    return c;
}

std::string tp_shard_error(const ModelConfig& whole, int tp) {
    if (tp >= 1 && whole.lin_v_heads % tp == 0 && whole.lin_heads % tp == 0) return "";
    return "tensor parallelism " + std::to_string(tp) + " must divide the linear heads (" +
           std::to_string(whole.lin_heads) + " q/k, " + std::to_string(whole.lin_v_heads) + " v)";
}

}  // namespace k3
