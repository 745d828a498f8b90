// Whose prefix caching and scheduling a replay or a fleet instance follows: the idealised placement
// policies (core/cache/checkpoint_policy.h, the labelled upper bound), or an engine's own rules
// (core/cache/engine_sglang.h, engine_vllm.h; reference/engines.md).
#pragma once

#include <cstdint>

namespace k3 {

enum class CacheEngine : uint8_t { ideal, sglang, vllm };

inline const char* cache_engine_id(CacheEngine e) {
    return e == CacheEngine::sglang ? "sglang" : e == CacheEngine::vllm ? "vllm" : "ideal";
}

}  // namespace k3
