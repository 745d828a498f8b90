// SGLang's MambaRadixCache as the engine runs one request after another with unbounded pools and no
// output tokens: the metadata replay of reference/engines.md "SGLang: rules the replay follows"
// (SGLang v0.5.12). Each step names the SGLang function whose rule it follows:
//
// - Matching (schedule_batch.py Req.init_next_round_input, MambaRadixCache._match_prefix_helper and
//   _match_post_processor): the key is the prompt's first input_len - 1 tokens, matched page by page;
//   the request skips only up to the deepest node holding a mamba state. When the KV match goes past
//   that node, mamba_branching_seqlen = floor(KV match / 64) * 64 (mamba_cache_chunk_size = max(FLA
//   chunk 64, page size), server_args.py).
// - Chunking (schedule_policy.py PrefillAdder.add_one_req, add_chunked_req): the first extend is the
//   whole rest if its page-rounded length fits chunked_prefill_tokens, else chunked_prefill_tokens
//   floored to the page and re-aligned so that prefix + extend is page aligned; later chunks are
//   min(remaining, chunked_prefill_tokens), without re-matching.
// - extra_buffer tracking (schedule_batch.py _mamba_radix_cache_v2_req_prepare_for_extend): an extend
//   of at least 64 tokens tracks one state, at prefix + floor(extend / 64) * 64, or at the branching
//   point instead when that lies strictly inside the extend on the 64 grid from the prefix.
// - Between chunks (MambaRadixCache.cache_unfinished_req): extra_buffer inserts fill_ids[:last track]
//   with the tracked state (nothing when this chunk tracked none); no_buffer inserts all fill_ids with
//   a copy of the running state. The request then resumes after all its computed tokens.
// - At the end (MambaRadixCache.cache_finished_req): extra_buffer inserts prompt[:last track] and
//   frees the KV past it; no_buffer inserts the whole prompt with the final state.
// - Insert (MambaRadixCache._insert_helper): the state sits at the end of the inserted key; if that
//   node already holds one the new one is freed (mamba_exist), and the request's KV of the part
//   already in the tree is freed.
//
// The tree is RadixCache (core/cache/radix_cache.h): the same match (KV-visible length, deepest state
// at or above it), page-aligned nodes, states at node ends, splits without states. Its match does not
// split nodes as SGLang's does, which changes no length, state or KV count. The replay keeps SGLang's
// own resource counts (mamba slots, KV slots, request slots, locks) to check the invariants the
// engines' run checks after every configuration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cache/radix_cache.h"

namespace k3 {

enum class SglangMode : uint8_t { extra_buffer, no_buffer };
const char* sglang_mode_id(SglangMode m);
std::optional<SglangMode> parse_sglang_mode(std::string_view s);

inline constexpr uint32_t kFlaChunk = 64;  // FLA's CHUNK_SIZE

struct SglangConfig {
    SglangMode mode = SglangMode::extra_buffer;
    uint32_t chunked_prefill_tokens = 8192;  // --chunked-prefill-size
    uint32_t page_size = 1;
    // false: the engines.md driver's --no-branching ablation (mamba_branching_seqlen dropped after the
    // match). Not an SGLang setting: SGLang always tracks the branching point.
    bool track_branching = true;
    uint64_t state_bytes = 0;      // bytes per mamba state (the tree's byte counts only)
    uint32_t sanity_every = 2000;  // requests between two tree audits (engines.md: sanity_check())

    // mamba_cache_chunk_size (server_args.py): max(FLA chunk, page size).
    uint32_t mamba_chunk() const { return page_size > kFlaChunk ? page_size : kFlaChunk; }
};

// "" when SGLang runs this configuration, else why it refuses (MambaRadixCache.__init__ asserts page
// size 1 without the extra buffer).
std::string sglang_config_error(const SglangConfig& c);

// The rules the replay and the fleet share (SGLang's scheduler, named in the comment above).
// PrefillAdder.add_one_req: where a new request's first extend from `prefix` ends, for a prompt of
// `len` tokens (the whole rest if its page-rounded length fits, else a page-aligned chunk).
uint64_t sglang_first_extend_end(const SglangConfig& c, uint64_t prefix, uint64_t len);
// add_chunked_req: where a later extend of a chunked request ends.
inline uint64_t sglang_next_extend_end(const SglangConfig& c, uint64_t prefix, uint64_t len) {
    return prefix + std::min<uint64_t>(len - prefix, c.chunked_prefill_tokens);
}
// _match_post_processor: the branching point (0 = None) of a match whose KV runs past its state.
inline uint64_t sglang_branching(const SglangConfig& c, uint64_t kv_match, uint64_t state_match) {
    return c.track_branching && kv_match > state_match ? kv_match / c.mamba_chunk() * c.mamba_chunk() : 0;
}
// _mamba_radix_cache_v2_req_prepare_for_extend (extra_buffer): the position an extend of `extend`
// tokens from `prefix` tracks (0: none, the extend is shorter than the grid); *at_branch tells whether
// it is the branching point.
uint64_t sglang_track_pos(const SglangConfig& c, uint64_t prefix, uint64_t extend, uint64_t branching,
                          bool* at_branch);

// What one request did.
struct SglangRequest {
    uint64_t prompt_len = 0;
    uint64_t kv_hit = 0;     // KV-visible: the whole KV match at the first match
    uint64_t state_hit = 0;  // state-usable: len(req.prefix_indices), the tokens the request skips
    uint64_t branching = 0;  // mamba_branching_seqlen (0 = None)
    uint32_t extends = 0;
    uint32_t tracked = 0;         // extends that tracked a state (extra_buffer)
    bool branch_tracked = false;  // one of them tracked the branching point
    uint64_t cached_len = 0;      // what cache_finished_req inserted
};

struct SglangTotals {
    uint64_t requests = 0, prompt_tokens = 0, kv_hit_tokens = 0, state_hit_tokens = 0;
    uint64_t extends = 0, tracked = 0, branch_tracks = 0;
    uint64_t requests_with_kv_hit = 0, requests_with_state_hit = 0, gap_requests = 0;
    uint64_t inserts = 0, states_inserted = 0, states_existing = 0;
    // SGLang's pools: what was allocated and freed (unbounded, so nothing is ever evicted).
    uint64_t kv_allocated = 0, kv_freed = 0;
    uint64_t mamba_allocated = 0, mamba_freed = 0;
    uint64_t req_allocated = 0, req_freed = 0;
    uint64_t locks = 0, unlocks = 0;
    uint64_t sanity_checks = 0;
    std::string sanity_failure;  // the first failed tree audit ("" = none)

    double token_hit_kv() const { return prompt_tokens ? double(kv_hit_tokens) / double(prompt_tokens) : 0; }
    double token_hit_state() const {
        return prompt_tokens ? double(state_hit_tokens) / double(prompt_tokens) : 0;
    }
};

// Deliberate slips the invariant checks must catch (module 5's falsifiers).
enum class SglangSlip : uint8_t { none, mamba_slot_leak, kv_tail_kept, lock_left };

class SglangReplay {
  public:
    explicit SglangReplay(const SglangConfig& c);

    // One request: the prompt q[0, prompt_len), admitted, prefilled in chunks and finished.
    SglangRequest serve(const TokenSeqPtr& q, uint64_t prompt_len);

    const SglangConfig& config() const { return c_; }
    const SglangTotals& totals() const { return t_; }
    RadixCache& cache() { return cache_; }
    const RadixCache& cache() const { return cache_; }

    // engines.md "Checks after every configuration", each "" when it holds, else what is wrong.
    std::string mamba_slots_check() const;  // live mamba slots == mamba states in the tree
    std::string kv_check() const;           // KV allocated - freed == KV tokens in the tree
    std::string locks_check() const;        // no lock references left, all request slots free
    // The tree's audit (SGLang's sanity_check: the LRU lists against the tree), recorded in totals.
    void sanity_check();

    void slip(SglangSlip s) { slip_ = s; }

  private:
    struct Running;  // one request between its admission and its finish
    void prefill_chunk(Running& r);
    void track(Running& r, uint64_t extend);
    void cache_unfinished(Running& r);
    void cache_finished(Running& r);
    bool insert(Running& r, uint64_t len);  // true: a state already sat there (mamba_exist)

    SglangConfig c_;
    RadixCache cache_;
    SglangTotals t_;
    SglangSlip slip_ = SglangSlip::none;
};

// A row of engines.md "SGLang: results on the conversation trace": SGLang v0.5.12 run by the engines.md
// driver on the bundled Mooncake conversation trace, sequential, unbounded pools, no output tokens.
struct SglangReferenceRow {
    SglangMode mode;
    uint32_t chunked_prefill_tokens, page_size;
    bool track_branching;  // false: the driver's --no-branching ablation
    double kv_percent, state_percent;
    uint64_t kv_tokens, state_tokens, states_in_tree, extends;
};
const std::vector<SglangReferenceRow>& sglang_reference_rows();
// The row of this configuration, if engines.md lists it.
const SglangReferenceRow* sglang_reference_row(const SglangConfig& c);
inline constexpr uint64_t kSglangReferencePromptTokens = 144793823;  // of the 12,031 requests

}  // namespace k3
