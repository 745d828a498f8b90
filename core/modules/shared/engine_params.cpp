#include "core/modules/shared/engine_params.h"

#include "core/memory/hybrid_blocks.h"
#include "core/modules/pool/pool.h"

namespace k3 {

Choices<CacheEngine> cache_engine_choices() {
    return {{CacheEngine::ideal, "ideal", "idealised (upper bound)"},
            {CacheEngine::sglang, "sglang", "SGLang MambaRadixCache"},
            {CacheEngine::vllm, "vllm", "vLLM V1, align mode"}};
}

Choices<SglangMode> sglang_mode_choices() {
    return {{SglangMode::extra_buffer, "extra_buffer", "extra_buffer"},
            {SglangMode::no_buffer, "no_buffer", "no_buffer"}};
}

VllmBlockDerivation derive_vllm_block(ModelPreset preset, int tp, bool mla_align, int draft_len,
                                      bool recoverssm) {
    VllmBlockDerivation d;
    PoolParams pool;  // module 3's vLLM design, align mode
    pool.preset = preset;
    pool.tp = tp;
    pool.draft_len = draft_len;
    pool.recoverssm = recoverssm;
    pool.mla_align = mla_align ? MlaAlign::on : MlaAlign::off;
    d.kernel_multiple = vllm_kernel_multiple(pool);
    HybridBlockPlan plan;
    d.error = plan_hybrid_blocks(vllm_model_of(pool), d.kernel_multiple, kVllmUserBlockTokens, &plan);
    d.block_tokens = plan.block_tokens;
    return d;
}

}  // namespace k3
