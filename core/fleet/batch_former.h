// How a fleet instance forms each iteration's batch, by the engine it follows (FleetConfig::engine).
// The formers are FleetSim members (core/fleet/batch_former.cpp); this header holds the rules they
// and the fleet report's checks share.
//
// - ideal (fleet_instance.cpp form_ideal): decodes first, then at most max_prefills prefilling
//   requests, each capped at max_batch_tokens / max_prefills first (the labelled upper bound).
// - sglang (SGLang v0.5 scheduler.py get_next_batch_to_run, _get_new_batch_prefill_raw,
//   update_running_batch; schedule_policy.py PrefillAdder; enable_mixed_chunk off, its default):
//   prefill first, never mixed. An iteration is a prefill batch when a chunked request is in progress
//   or a waiting request can be admitted, else a decode batch of every running request (decode stalls
//   while prompts prefill). A prefill batch continues the chunked request first (add_chunked_req:
//   sglang_next_extend_end), then adds waiting requests in queue order (add_one_req) while the input
//   budget (max_prefill_tokens) and the chunk budget (chunked_prefill_tokens, what is left of it) are
//   positive; a request that does not fit the chunk budget left is cut there
//   (sglang_first_extend_end) and ends the batch, so at most one request of a batch is chunked.
//   Running requests are capped at the state slots / ratio (model_runner_kv_cache_mixin
//   _calculate_mamba_ratio: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO 3, plus 2 for the extra
//   buffer's ping-pong tracks with the overlap scheduler on; 1 without the radix cache). A decode batch
//   whose next KV does not fit retracts (ScheduleBatch.retract_decode) the requests with the fewest
//   output tokens first, the longest prompt among equals, until it fits: their KV and state are freed
//   and they go to the back of the waiting queue, to prefill again from what the cache holds.
//   Admission reserves KV as PrefillAdder does: a waiting request joins while its extend plus its
//   remaining output (clipped at 4,096) fits the free KV less the decoding requests' remaining output
//   x new_token_ratio; each request admitted reserves its extend and (unless chunked) its output.
//   new_token_ratio starts at 0.7, falls by (0.7 - 0.098) / 600 per decode iteration to 0.098, is set
//   by a retraction to retract_decode's estimate and goes back to 0.7 when the instance idles. The
//   trace's output length stands for max_new_tokens (the simulation knows it; SGLang knows the
//   client's bound). Left out: the overlap scheduler, lpm ordering, hierarchical caching.
// - vllm (vLLM V1 vllm/v1/core/sched/scheduler.py Scheduler.schedule): running requests first
//   (decodes and continuing prefills, in order) within the token budget max_num_batched_tokens
//   (max_batch_tokens), each chunk min(what is left, long_prefill_token_threshold, budget) and, for
//   hybrid models with prefix caching (mamba_cache_mode align), cut by vllm_aligned_split; a request
//   whose KV does not fit preempts the last of `running` (recompute: its memory is freed, it goes to
//   the front of the waiting queue) until it fits or is itself preempted. Waiting requests follow,
//   unless a request was preempted this step, while the budget and max_num_seqs (the state slots)
//   allow. max_partial_prefills (SchedulerConfig.max_num_partial_prefills, default 1) limits the
//   requests a step leaves with their prompt unfinished: V1's schedule() as read does not consult it
//   (V0's scheduler did; vLLM 0.27 removed the option), so 0 (no limit) is V1's behaviour. A waiting
//   request whose chunk comes out empty is admitted with nothing scheduled this step (vLLM keeps it
//   waiting): it runs next step after the running requests, where vLLM would schedule it too.
#pragma once

#include <cstdint>

#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"

namespace k3 {

// SGLang's new_token_ratio (environ.py SGLANG_INIT_NEW_TOKEN_RATIO, _MIN_NEW_TOKEN_RATIO_FACTOR,
// _NEW_TOKEN_RATIO_DECAY_STEPS, _RETRACT_DECODE_STEPS, _CLIP_MAX_NEW_TOKENS_ESTIMATION).
inline constexpr double kSglangInitNewTokenRatio = 0.7;
inline constexpr double kSglangMinNewTokenRatio = 0.7 * 0.14;
inline constexpr double kSglangNewTokenRatioDecay =
    (kSglangInitNewTokenRatio - kSglangMinNewTokenRatio) / 600;
inline constexpr uint32_t kSglangRetractDecodeSteps = 20;
inline constexpr uint32_t kSglangClipMaxNewTokens = 4096;
// retract_decode's new estimate: (tokens decoded + 20 per request) / (their max_new_tokens + 1), at most 1.
inline double sglang_retract_ratio(uint64_t decoded, uint64_t max_new, uint64_t requests) {
    const double r = double(decoded + uint64_t(kSglangRetractDecodeSteps) * requests) / double(max_new + 1);
    return r < 1 ? r : 1;
}

// _calculate_mamba_ratio: state slots per running request SGLang reserves.
inline uint32_t sglang_running_ratio(const SglangConfig& c, bool radix_cache) {
    if (!radix_cache) return 1;
    return 3 + (c.mode == SglangMode::extra_buffer ? 2 : 0);
}
// max_running_requests = min(max_running, mamba slots // ratio); at least one (SGLang refuses to start
// when the slots cannot hold one request).
inline uint32_t sglang_max_running(uint32_t slots, uint32_t ratio) {
    return slots / ratio > 0 ? slots / ratio : 1;
}

// SchedulerConfig.__post_init__: 4 % of max_model_len when several partial prefills may run, else
// the configured 0 (no threshold).
inline uint64_t vllm_long_prefill_threshold(const VllmEngineConfig& c, uint32_t max_partial_prefills) {
    return max_partial_prefills > 1 ? c.max_model_len * 4 / 100 : 0;
}

// Whether a non-final prefill chunk [start, start + n) of a request of `prompt` tokens ends where
// vLLM's align mode lets a step end: vllm_aligned_split gives the chunk back unchanged (the block
// grid, the last full block, a junction's block, or a chunk under one block when the block exceeds
// the budget), or it ends at the prompt's last hash unit (partial hits).
inline bool vllm_chunk_end_allowed(const VllmEngineConfig& c, uint64_t start, uint64_t n, uint64_t prompt,
                                   uint64_t junction) {
    const uint64_t H = c.hash_tokens();
    return vllm_aligned_split(c, start, n, prompt, junction) == n || start + n == prompt / H * H;
}

}  // namespace k3
