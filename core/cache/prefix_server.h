// The runnable model behind a dual-granularity prefix cache: the real-state store of
// reference/serving.md §2 (SGLang's MambaRadixCache, vLLM's align mode) at the size of the tiny model.
//
// Serving one request:
//   1. match the prompt in the radix tree (core/cache): the KV-visible and the state-usable length.
//      The match covers prompt - 1 tokens, so at least the last prompt token is computed and gives
//      the next token's logits (vLLM caps a hit the same way);
//   2. resume: lend the tree's KV pages of the resumed prefix to the request (KvPages, no copy) and
//      copy the checkpoint's state into the request's working slot (copy-on-write: the tree's
//      checkpoint is never written);
//   3. prefill the rest, split at the policy's checkpoint positions, saving a state at each (a split
//      at a multiple of the kernel chunk keeps the bits of the unsplit prefill);
//   4. decode, saving states at planned positions past the prompt;
//   5. insert prompt + output into the tree with the new checkpoints and the request's pages; the
//      tree adopts the pages of the part it did not hold, the rest go back to the pool.
//
// Reuse::kv_only is the bug of vLLM #43090 and LMCache #2863, kept on purpose to measure it: it resumes
// at the KV-visible match with the recurrent state zero (has_initial_states false) or left over from
// the previous request (a stale slot), and keeps no states. Reuse::none runs every request cold.
//
// Outputs are given (teacher forcing) or generated greedily: with given outputs, runs of different
// methods compare logits of the same inputs step by step.
//
// States inside a prefill exist only at chunk boundaries without changing the bits (the chunked
// kernel restarts at each call), so a request-end checkpoint that falls inside the prompt off the
// chunk grid is moved down to the grid (vLLM align mode keeps the last block-aligned state before
// the prompt end for the same reason). Interval positions are taken where the policy says: an interval
// off the chunk grid splits the prefill there and changes the request's own bits (within tolerance),
// which the outcome reports.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/cache_engine.h"
#include "core/cache/checkpoint_policy.h"
#include "core/cache/checkpoint_store.h"
#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"
#include "core/cache/kv_pages.h"
#include "core/cache/radix_cache.h"
#include "core/cache/state_codec.h"
#include "core/model/model.h"

namespace k3::serve {

enum class Reuse : uint8_t { none, kv_only, state };
enum class KvOnlyStart : uint8_t { zero, stale };

// Falsifier hooks (k3cli audit-checks): a resume damaged on purpose, which module 4's checks must catch.
enum class ResumeFalsify : uint8_t {
    none,
    flip_state_bit,    // the sign bit of the largest |value| of the state loaded from a checkpoint is flipped
    zero_state,        // a resume from a checkpoint starts from a zero state instead (KV-only, called exact)
    exact_kv_only,     // KV-only reuse starts from the state a prefill of the skipped tokens has (made right)
    engine_misplaced,  // an engine's states are saved one page below where its rule puts them
};

struct ServerConfig {
    Reuse reuse = Reuse::state;
    KvOnlyStart kv_only_start = KvOnlyStart::zero;
    CacheConfig cache;  // page_size must equal the pool's page_tokens
    CheckpointPolicy policy;
    StateCodec codec = StateCodec::fp32;
    ResumeFalsify falsify = ResumeFalsify::none;  // falsifier hook, off outside k3cli audit-checks
    // Reuse::state only: ideal follows `policy` (idealised placement); sglang and vllm follow the engine's
    // own placement and hit rules (engine_plan below). sglang.page_size must equal cache.page_size.
    CacheEngine engine = CacheEngine::ideal;
    SglangConfig sglang;
    VllmEngineConfig vllm;
};

// One request under an engine's rules (reference/engines.md, the shared rule functions of
// core/cache/engine_sglang.h and engine_vllm.h), from the tree's match of its first prompt - 1 tokens
// (kv_match, page-floored) and the deepest state at or above it (state_match):
// - sglang: the request resumes at the deepest state; its prefill runs in SGLang's chunks
//   (sglang_first_extend_end, sglang_next_extend_end). extra_buffer tracks at most one state per chunk
//   (sglang_track_pos: the chunk end floored to the grid, or the branching point inside the chunk) and
//   caches up to its last track, the KV past it is not cached; no_buffer saves a state at every chunk
//   end and caches the whole prompt.
// - vllm: the KV hit is the attention group's, on the block grid; the request resumes at the deepest
//   state at or below it (a state exists only on the block grid); its prefill steps are cut by
//   vllm_aligned_split (with the shared-prefix junction), a state is taken where a step ends on a block
//   boundary and kept as vllm_retained says; whole blocks of the prompt are cached.
// Outputs are decoded but not cached: the engines.md rules are those of the prefill (its runs carry no
// output tokens).
struct EnginePlan {
    uint64_t kv_hit = 0;                    // the engine's KV-visible hit
    uint64_t resume = 0;                    // the state-usable hit: where the request resumes
    uint64_t branching = 0;                 // SGLang's branching seqlen, vLLM's junction (0: none)
    uint64_t cache_len = 0;                 // prompt tokens cached when the request finishes
    std::vector<uint64_t> steps;            // where prefill steps (chunks) end, ascending
    std::vector<PlannedCheckpoint> states;  // where the engine saves states, ascending
};
EnginePlan engine_plan(const ServerConfig& c, uint64_t prompt_len, uint64_t kv_match, uint64_t state_match);

struct ServeRequest {
    std::vector<int32_t> prompt;   // at least one token
    std::vector<int32_t> outputs;  // given outputs (teacher forcing); empty: generate `gen` greedily
    int gen = 0;                   // used when outputs is empty
};

// Whether a request's outputs must have the bits of the same request run cold, judged from where its
// inputs came from. A KV page and a checkpoint are exact when they were computed as a cold prefill
// computes them: by prefill, before any split off the chunk grid, from an exact start. A request
// starts exactly when it resumes at 0, or from an exact fp32 checkpoint on the chunk grid over exact
// pages; its outputs are then bitwise unless it splits its own prefill off the grid. Every other
// reason but the first differs from the cold run by rounding only (which the caller measures).
enum class ResumeExactness : uint8_t {
    bitwise,                  // an exact start and an exact prefill: the cold run's bits
    state_of_other_position,  // KV-only reuse: the state is not the prefix's (wrong, not rounding)
    lossy_checkpoint,         // resumed from a checkpoint stored by a lossy codec
    off_chunk_grid,           // resumed at a position off the kernel chunk grid
    inexact_checkpoint,       // the checkpoint's state was not computed exactly (decoded tokens, say)
    inexact_pages,            // a lent KV page holds rows that were not computed exactly
    split_off_grid,           // an exact start, but the request split its own prefill off the chunk grid
};

struct ServeOutcome {
    std::string error;  // empty on success; on error nothing is cached and everything is released
    uint64_t prompt_len = 0;
    uint64_t fed_len = 0;                      // tokens the model processed: prompt + outputs - 1
    uint64_t cache_len = 0;                    // tokens inserted into the tree (fed_len floored to a page)
    uint64_t kv_hit = 0, state_hit = 0;        // over prompt - 1 tokens
    uint64_t resumed_at = 0;                   // first position this request computed
    uint64_t recomputed = 0;                   // prompt tokens prefilled: prompt_len - resumed_at
    uint64_t prefilled = 0;                    // prompt tokens handed to the model, counted where fed
    uint64_t pages_borrowed = 0;               // tree pages lent to the request
    bool state_matches = true;                 // false: resumed with a state of another position (KV-only)
    uint64_t resumed_from = 0;                 // handle of the checkpoint it resumed from (0: none)
    bool split_off_grid = false;               // its own prefill was split off the chunk grid...
    uint64_t first_off_grid_split = 0;         // ...first at this position
    uint32_t ends_aligned = 0;                 // end checkpoints moved down to the chunk grid (see below)
    uint64_t branching = 0;                    // an engine's branching seqlen or junction (0: none)
    uint32_t steps = 0;                        // an engine's prefill steps (chunks)
    std::vector<uint64_t> checkpoints;         // positions of the states it saved
    std::vector<uint64_t> checkpoint_handles;  // their handles (the tree may free redundant ones at once)
    std::vector<PageRef> pages;                // its KV pages in position order when it finished
    std::vector<int32_t> outputs;              // the tokens after the prompt (given or generated)
    std::vector<float> logits;                 // outputs.size() rows of vocab: row i predicts outputs[i]
    InsertResult insert;
    uint32_t retention_dropped = 0;
    ResumeExactness exactness = ResumeExactness::bitwise;  // set on success
    double prefill_ms = 0, decode_ms = 0;                  // wall clock (report under timing only)
};

class PrefixServer final : public CacheObserver {
  public:
    // The pool must have backing storage and the model's geometry; it must outlive the server.
    PrefixServer(model::Model& m, PagePool& pool, const ServerConfig& c);
    ~PrefixServer() override;
    PrefixServer(const PrefixServer&) = delete;
    PrefixServer& operator=(const PrefixServer&) = delete;

    // Empty when the configuration can serve (page sizes agree, interval on the page grid...).
    static std::string check_config(const model::Model& m, const PagePool& pool, const ServerConfig& c);

    ServeOutcome serve(const ServeRequest& r);

    const ServerConfig& config() const { return cfg_; }
    RadixCache& cache() { return *cache_; }
    const RadixCache& cache() const { return *cache_; }
    const KvPages& pages() const { return pages_; }
    const CheckpointStore& checkpoints() const { return states_; }
    // What the cache holds: checkpoint bytes and KV bytes (whole pages).
    uint64_t held_state_bytes() const { return cache_->stats().state_bytes; }
    uint64_t held_kv_bytes() const;
    // Drops everything the tree holds (and the stale state of KV-only reuse).
    void clear();
    // Tree, pages and pool agree: every page the tree holds is referenced, every checkpoint the tree
    // holds is live in the store, the pool's own audit passes. Empty when consistent.
    std::string audit() const;

    // CacheObserver: the tree lets go of pages and checkpoints.
    void kv_removed(const TokenSeq& seq, uint64_t start, uint64_t end,
                    std::span<const uint32_t> pages) override;
    void state_freed(const CheckpointRef& ref) override;

  private:
    struct InFlight;  // one request inside serve() (prefix_server.cpp)

    // Why a request cannot be served at all (empty prompt, nothing to output, a token outside the
    // vocabulary); empty when it can.
    std::string check_request(const ServeRequest& r) const;
    // The steps of serve() (see the top of this file). A step that returns an error leaves the
    // request for abandon() to give back what it holds.
    // 1. Matches the prompt, picks where the request resumes and from which state, plans its checkpoints.
    void match_prompt(InFlight& w);
    // 1, Reuse::state: resume at the state-usable match; the plan follows the policy and the chunk grid.
    void plan_state_resume(InFlight& w);
    // 1, Reuse::state under an engine: resume, steps, states and cached length as engine_plan says.
    void plan_engine_resume(InFlight& w);
    // 2. The working sequence with the tree's pages lent and the checkpoint's state copied in.
    std::string resume(InFlight& w);
    std::string borrow_tree_pages(InFlight& w);
    // 3. Prefills the rest of the prompt, split at the planned checkpoints.
    std::string prefill_rest(InFlight& w);
    // Saves a state at each planned position the sequence has just reached.
    std::string save_planned_states(InFlight& w);
    // 4. Decodes the outputs (given or greedy) and their logits, saving planned states on the way.
    std::string decode_outputs(InFlight& w);
    // 5. Inserts prompt + outputs with the new checkpoints; the tree adopts the pages it lacked.
    std::string insert_into_tree(InFlight& w);
    // KV-only reuse from a stale slot: the request's final state becomes the next request's start.
    void keep_stale_state(const model::Sequence& seq);
    // ServerConfig::falsify: damages the state the request resumes with.
    std::string falsify_resumed_state(InFlight& w);
    // Success: judges exactness and gives back the request's page references.
    ServeOutcome finish(InFlight& w);
    // Failure: gives back everything the request holds and reports why.
    ServeOutcome abandon(InFlight& w, std::string why);

    ResumeExactness start_exactness(const ServeOutcome& o) const;
    // Sets o.exactness and records which of the request's pages and checkpoints are exact.
    void judge_exactness(ServeOutcome& o);

    model::Model& model_;
    PagePool& pool_;
    ServerConfig cfg_;
    KvPages pages_;
    CheckpointStore states_;
    std::unique_ptr<RadixCache> cache_;  // reset first in the destructor: it calls back into the stores
    uint64_t stale_ = 0;                 // KV-only reuse: the previous request's final state
    OwnerId next_owner_ = 1;
    uint64_t tree_page_refs_ = 0;  // references the tree holds (audit)
    // Exact provenance (ResumeExactness): 1 for an exact page (by PageRef) or checkpoint (by handle).
    std::vector<uint8_t> exact_pages_, exact_checkpoints_;
};

}  // namespace k3::serve
