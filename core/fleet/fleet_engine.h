// The engines' prefix-caching rules as a fleet instance applies them (FleetConfig::engine sglang or
// vllm; reference/engines.md): what a request matches at admission, which state each prefill chunk the
// batch former actually ran leaves, what is inserted between chunks and at completion. The rules
// themselves are the free functions module 5's replays use (core/cache/engine_sglang.h,
// engine_vllm.h); this file only places them on the fleet's request lifecycle. The tree is the
// instance's RadixCache in both cases, its page the engine's grid (SGLang's page, vLLM's block).
//
// SGLang (MambaRadixCache, extra_buffer or no_buffer):
// - admission: the key is the context to prefill minus one token; the request resumes at the deepest
//   state; the branching point is sglang_branching of the match.
// - each prefill chunk [start, end) tracks one state in extra_buffer (sglang_track_pos); between two
//   chunks cache_unfinished_req inserts tokens[:last track] with that state (nothing if the chunk
//   tracked none; no_buffer: all computed tokens with the running state) and re-locks the request on
//   what it inserted, so the tree owns its KV below.
// - decode (extra_buffer): a state is tracked each time the committed length reaches a multiple of
//   mamba_track_interval (256).
// - completion (cache_finished_req): extra_buffer inserts (prompt + output)[:last track] with the
//   tracked state, the KV past it is freed; no_buffer inserts everything committed with the final state.
// vLLM (V1 KV cache manager, align mode):
// - admission: the hit on the block grid, capped at target - 1: the attention group's hit is the KV
//   match, the hybrid hit the deepest state at or below it (RadixCache's match, states only at block
//   ends); the junction is the attention hit when it exceeds the hybrid hit.
// - as chunks complete every full block's KV is cached, and the state where a chunk ends on a block
//   boundary, if vllm_retained keeps it (retention dense, 0 or N).
// - decode: cache_blocks runs on every step with the output tokens' block hashes, so the decoded full
//   blocks' KV is cached. In align mode MambaManager.allocate_new_blocks gives the request a new
//   running-state block when a decode step enters a new block; the previous one, holding the state at
//   the block boundary, is a full block that cache_blocks hashes (single_type_kv_cache_manager.py as
//   stored at vllm 129ab7c6), under the same reachability mask (kept with dense retention, dropped with
//   0). The fleet inserts the decoded blocks at completion (vLLM hashes them step by step: only a
//   request running beside it could tell, and only with output tokens a trace does not carry).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/cache_engine.h"
#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"
#include "core/cache/radix_cache.h"

namespace k3 {

inline constexpr uint32_t kSglangTrackInterval = 256;  // SGLang --mamba-track-interval default

struct FleetEngineRules {
    CacheEngine engine = CacheEngine::ideal;
    SglangConfig sglang;
    VllmEngineConfig vllm;
    uint32_t track_interval = kSglangTrackInterval;
    bool on() const { return engine != CacheEngine::ideal; }
    // The tree's page: SGLang's page size, vLLM's block.
    uint32_t grid() const { return engine == CacheEngine::vllm ? vllm.block_tokens : sglang.page_size; }
};

struct FleetConfig;
// The rules of c.engine, c.sglang and c.vllm.
FleetEngineRules fleet_engine_rules(const FleetConfig& c);

// The tree's page follows the engine's grid: under vllm the cache page is the block, under sglang
// SGLang's page is the cache page (page_size). FleetSim runs the configuration this returns.
FleetConfig with_engine_grid(FleetConfig c);
// "" when the fleet can run these rules, else why not.
std::string fleet_engine_error(const FleetEngineRules& e);

// The length the engine matches for a context of `len` tokens to prefill: one token is always left to
// give the logits (SGLang's key fill_ids[:input_len - 1], vLLM's max_length = num_tokens - 1).
inline uint64_t engine_match_len(const FleetEngineRules& e, uint64_t len) {
    return e.on() && len > 0 ? len - 1 : len;
}

// One attempt's engine view (FleetSim::Live holds these).
struct EngineAttempt {
    uint64_t branching = 0;   // SGLang mamba_branching_seqlen (0 = None)
    uint64_t last_track = 0;  // SGLang mamba_last_track_seqlen (0 = None)
    uint64_t junction = 0;    // vLLM shared_prefix_boundary (0 = none)
};

struct EngineCounters {
    uint64_t tracked = 0;              // SGLang extra_buffer: states tracked by prefill extends
    uint64_t branch_tracks = 0;        // of which at the branching point
    uint64_t decode_tracks = 0;        // SGLang extra_buffer: states tracked in decode
    uint64_t junctions = 0;            // vLLM: admissions with a shared-prefix junction
    uint64_t states_not_retained = 0;  // vLLM: block-boundary states the retention left out
};

// Admission: locks what the request resumes from (the lease) and sets the attempt's view. kv_hit: the
// engine's KV-visible hit (SGLang: the whole KV match; vLLM: the attention group's block-grid hit).
Lease engine_admit(const FleetEngineRules& e, RadixCache& c, const TokenSeq& q, uint64_t len,
                   EngineAttempt& a, EngineCounters& n, uint64_t* kv_hit);

// What the engine inserts into the tree at one point: q[0, len) (page floored), with a state at len
// when `state`; `relock`: SGLang re-locks the request on what it inserted.
struct EngineInsert {
    uint64_t len = 0;
    bool state = false;
    bool relock = false;
    CheckpointKind kind = CheckpointKind::end;
};

// A prefill chunk [start, end) of a context of `target` tokens has run.
EngineInsert engine_after_chunk(const FleetEngineRules& e, EngineAttempt& a, uint64_t start, uint64_t end,
                                uint64_t target, EngineCounters& n);
// The request completes with `computed` tokens committed (prompt + decoded), of which the server may
// cache `cache_len`. vLLM's decode blocks are inserted here (no one reads them before it: the
// request holds them), with the states of the blocks decode completed in *decode_states.
EngineInsert engine_at_finish(const FleetEngineRules& e, EngineAttempt& a, uint64_t computed,
                              uint64_t cache_len, uint64_t target, EngineCounters& n,
                              std::vector<uint64_t>* decode_states);

}  // namespace k3
