// The engine parameters module 5 (checkpoints) and the fleet groups (modules 11 fleet, 12 tenants,
// 13 faults: FleetCacheParams) share: which engine's caching rules apply, SGLang's mode and chunk
// size, vLLM's block, declared once with their choices, ranges and activity; and vLLM's block as vLLM
// derives it for a model and a tensor-parallel width.
#pragma once

#include <cstdint>
#include <string>

#include "core/cache/cache_engine.h"
#include "core/cache/engine_sglang.h"
#include "core/experiments/module_doc.h"
#include "core/experiments/param_list.h"
#include "core/model/config.h"

namespace k3 {

Choices<CacheEngine> cache_engine_choices();
Choices<SglangMode> sglang_mode_choices();

// The members of P the engine parameters bind; retention_interval may be null (module 5 declares its
// own, see vllm_retention_spec).
template <class P>
struct EngineParamFields {
    CacheEngine P::*engine;
    SglangMode P::*sglang_mode;
    uint32_t P::*chunked_prefill_tokens;
    uint32_t P::*vllm_block_tokens;
    std::string P::*retention_interval = nullptr;
};

template <class P>
ParamSpec& vllm_retention_spec(ParamList<P>& l, std::string P::*member);

// engine, sglang_mode, chunked_prefill_tokens, vllm_block_tokens (and retention_interval) in that
// order; `style` places each spec (its UI group, the module's help) and returns it.
template <class P, class Style>
void engine_param_specs(ParamList<P>& l, const EngineParamFields<P>& f, Style&& style) {
    style(l.choice(f.engine, "engine", "Engine rules", cache_engine_choices()));
    style(l.choice(f.sglang_mode, "sglang_mode", "SGLang mamba scheduler strategy", sglang_mode_choices())
              .active_when("engine", "sglang"));
    style(l.integer(f.chunked_prefill_tokens, "chunked_prefill_tokens", "Chunked prefill size", "tokens", 64,
                    1048576)
              .log()
              .active_when("engine", "sglang")
              .describe("SGLang --chunked-prefill-size: the most prompt tokens one extend prefills."));
    style(
        l.integer(f.vllm_block_tokens, "vllm_block_tokens", "vLLM block (0 = derived)", "tokens", 0, 1048576)
            .active_when("engine", "vllm"));
    if (f.retention_interval) style(vllm_retention_spec(l, f.retention_interval));
}

// A style for engine_param_specs: the spec in `group`, with module doc `doc`'s help for its key where
// the doc has one (core/experiments/module_doc.h doc_param_help).
inline auto doc_help_in_group(std::string doc, std::string group) {
    return [doc = std::move(doc), group = std::move(group)](ParamSpec& s) -> ParamSpec& {
        if (std::string help = doc_param_help(doc, s.key); !help.empty()) s.describe(help);
        return s.in_group(group);
    };
}

// vLLM's prefix_cache_retention_interval as a text parameter: `0`, `dense` or a token count (parsed by
// parse_vllm_retention), active with engine=vllm. Module 5 declares its own: there the same key is
// also the segmented policy's segment.
template <class P>
ParamSpec& vllm_retention_spec(ParamList<P>& l, std::string P::*member) {
    return l.text(member, "retention_interval", "vLLM retention interval", {"dense", "0", "4096"})
        .active_when("engine", "vllm");
}

// vLLM's block as Platform._align_hybrid_block_size derives it in align mode (module 3's
// plan_hybrid_blocks): the smallest multiple of the kernel alignment whose attention page of one layer
// holds one linear layer's state page, both as one rank holds them. It depends on the TP width: the
// state is sharded by heads while an MLA latent is replicated on every rank, so TP 2 halves the state a
// block must hold (Kimi-Linear: 1,920 tokens at TP 1, 1,024 at TP 2); for GQA attention both shard alike.
struct VllmBlockDerivation {
    uint32_t block_tokens = 0;
    uint32_t kernel_multiple = 0;
    std::string error;  // "" when the derivation succeeded
};
// With speculative decoding the state page holds N more conv columns, and RecoverSSM's records.
VllmBlockDerivation derive_vllm_block(ModelPreset preset, int tp, bool mla_align, int draft_len = 0,
                                      bool recoverssm = false);

}  // namespace k3
