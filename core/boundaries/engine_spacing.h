// Map 2 of module 14 under an engine's own rules: where the engine's scheduler leaves states is not a
// free interval but follows one of its settings. SGLang (core/cache/engine_sglang.h) tracks one state per
// extend, so its spacing is chunked_prefill_tokens; vLLM (core/cache/engine_vllm.h, align mode) keeps
// states where a chunk ends on a block boundary, so its spacing follows the block. The sweep replays a
// workload with the engine's own replay (one request at a time, unbounded pools, prompts only, as
// module 5's engine=sglang / engine=vllm) at each value of that setting, and counts per request what the
// map prices: the tokens recomputed and the states the cache holds. Each run also records whether the
// engine's invariants held and whether its requests followed the setting it is plotted at.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/cache/cache_engine.h"
#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"
#include "core/fleet/workload.h"

namespace k3::boundaries {

struct EngineSpacingConfig {
    CacheEngine engine = CacheEngine::sglang;  // sglang or vllm
    SglangConfig sglang;                       // chunked_prefill_tokens set to each value
    VllmEngineConfig vllm;                     // block_tokens set to each value
    std::vector<uint32_t> spacings;            // the values of the axis, in order
    // Falsifiers (module 14's): the run of this index slips (SGLang leaks a mamba slot, vLLM keeps the
    // first request's references), or is replayed at half the value it is plotted at.
    size_t slip_run = SIZE_MAX, halved_run = SIZE_MAX;
};

struct EngineSpacingRun {
    uint32_t spacing = 0;  // the value it is plotted at
    uint64_t requests = 0, prompt_tokens = 0;
    uint64_t recomputed_tokens = 0;  // prompt - state-usable hit, over all requests
    uint64_t states_held = 0;        // states the cache holds at the end (nothing is evicted)
    uint64_t state_hit_tokens = 0;
    // Requests that did not follow `spacing`: SGLang, extends != ceil((prompt - hit) / spacing); vLLM, a
    // hit off the block grid of `spacing` or past prompt - 1.
    uint64_t off_setting = 0;
    std::string invariants;  // "" when the engine's invariants hold, else the first that does not
    double token_hit_state() const {
        return prompt_tokens ? double(state_hit_tokens) / double(prompt_tokens) : 0;
    }
};

class EngineSpacingSweep {
  public:
    explicit EngineSpacingSweep(EngineSpacingConfig c);
    ~EngineSpacingSweep();
    // Replays until the deadline passes (at least one request); returns the fraction of all runs done.
    double step(const Workload& w, const Deadline& d);
    bool done() const { return run_ >= c_.spacings.size(); }
    const EngineSpacingConfig& config() const { return c_; }
    const std::vector<EngineSpacingRun>& runs() const { return runs_; }

  private:
    void start();
    void serve(const Request& q);
    void finish();

    EngineSpacingConfig c_;
    std::vector<EngineSpacingRun> runs_;
    size_t run_ = 0, next_ = 0;
    std::unique_ptr<SglangReplay> sglang_;
    std::unique_ptr<VllmKvCacheManager> vllm_;
};

}  // namespace k3::boundaries
