// vLLM V1's prefix cache for a hybrid model in align mode (mamba_cache_mode="align"), replayed in
// metadata mode one request at a time, as reference/engines.md "vLLM: replay rules" describes. What
// it models, with the vLLM functions it follows (the tree read is named in engine_vllm.cpp):
//
// - Block-grid hashing: a block's hash chains its parent's with its tokens, full blocks only
//   (kv_cache_utils.get_request_block_hasher); scheduler block = hash block.
// - The hit (KVCacheManager.get_computed_blocks): capped at prompt - 1 tokens, on the block grid.
//   The attention group's hit is its longest chain of cached blocks (FullAttentionManager); the
//   Mamba group's is the deepest cached state block at or below it (MambaManager, right to left):
//   a hybrid hit needs a state at exactly the hit boundary (HybridKVCacheCoordinator).
//   When attention matched further, the attention hit is the request's shared-prefix junction.
// - Chunks (Scheduler._mamba_block_aligned_split): a token budget of 8,192 per step, non-final
//   chunks rounded down to blocks, a stop at the last full block before the prompt end and at the
//   junction. A Mamba state exists where a chunk ends on a block boundary.
// - Retention (MambaManager.reachable_block_mask, prefix_cache_retention_interval): dense keeps every
//   such state, 0 only those at the replay boundary (prompt - 1, floored to blocks) and the junction,
//   N one per N-token segment plus those two.
// - One block pool per group, blocks with reference counts, freed when the request finishes; the
//   pool is unbounded (nothing is evicted). The three Mamba groups of Kimi-Linear behave alike, so one
//   stands for them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/cache/token_seq.h"

namespace k3 {

// prefix_cache_retention_interval: dense (vLLM's None, the default), 0 (boundaries only) or N tokens.
struct VllmRetention {
    enum Kind : uint8_t { dense, boundaries, interval } kind = dense;
    uint32_t tokens = 0;  // interval
};
// "dense", "0" or a positive token count; nullopt otherwise.
std::optional<VllmRetention> parse_vllm_retention(std::string_view text);
std::string vllm_retention_text(const VllmRetention& r);

struct VllmEngineConfig {
    uint32_t block_tokens = 1920;  // scheduler_block_size (= the Mamba block in align mode)
    // prefix_match_unit: 0 (unset) hashes whole blocks; a divisor of the block hashes per unit and turns
    // vLLM's fine-grained partial hits on (a prompt's tail unit is cached inside its last block).
    uint32_t prefix_match_unit = 0;
    uint32_t hash_tokens() const {
        const bool fine = prefix_match_unit && prefix_match_unit < block_tokens &&
                          block_tokens % prefix_match_unit == 0;  // the coordinator asserts the latter
        return fine ? prefix_match_unit : block_tokens;
    }
    bool hybrid = true;  // Mamba groups (align mode) beside the attention group
    VllmRetention retention;
    uint32_t token_budget = 8192;  // max_num_scheduled_tokens (long_prefill_token_threshold 0)
    uint64_t max_model_len = uint64_t(1) << 20;
};

// Scheduler._mamba_block_aligned_split for a chunk of n tokens from `start` (the hit included): what
// the step may schedule so that a state exists where it ends (shared by the replay and the fleet).
uint64_t vllm_aligned_split(const VllmEngineConfig& c, uint64_t start, uint64_t n, uint64_t prompt,
                            uint64_t junction);
// MambaManager.reachable_block_mask for the Mamba state block `i` (it ends at token (i + 1) * block).
bool vllm_retained(const VllmEngineConfig& c, uint64_t i, uint64_t prompt, uint64_t junction);

// Deliberate corruptions that the module's checks must catch.
enum class VllmFault : uint8_t {
    none,
    leaked_ref,   // a request's hit blocks are never released
    no_junction,  // the shared-prefix junction is never reported (Marconi off)
    stray_block,  // a block is hashed in the pool but missing from the hash map
};

struct VllmRequestResult {
    uint64_t prompt = 0;
    uint64_t hit = 0;            // num_new_local_computed_tokens (the hybrid hit)
    uint64_t attention_hit = 0;  // the attention group's own hit
    uint64_t junction = 0;       // shared_prefix_boundary (0: none)
    uint32_t chunks = 0;
};

struct VllmTotals {
    uint64_t requests = 0, prompt_tokens = 0, hit_tokens = 0, attention_hit_tokens = 0;
    uint64_t requests_with_hit = 0, requests_with_attention_hit = 0, requests_with_junction = 0;
    uint64_t chunks = 0;            // prefill steps
    uint64_t states_cached = 0;     // Mamba state blocks hashed (one group)
    uint64_t states_skipped = 0;    // block-boundary states retention left out of the cache
    uint64_t kv_blocks_cached = 0;  // attention blocks hashed
    uint64_t grid_violations = 0;   // a hit off the grid, past prompt - 1, or hybrid > attention
    uint64_t token_mismatches = 0;  // a hash hit whose tokens differ from the owner's
    uint64_t stalled = 0;           // a step that scheduled no token
    double hit_rate() const { return prompt_tokens ? double(hit_tokens) / double(prompt_tokens) : 0; }
    double attention_rate() const {
        return prompt_tokens ? double(attention_hit_tokens) / double(prompt_tokens) : 0;
    }
};

// One KV cache group's blocks: reference counts, hashes, the hash map (BlockPool).
class VllmBlockGroup {
  public:
    struct Entry {
        uint32_t block = 0;   // the first block cached under the hash (what a hit takes)
        uint32_t copies = 0;  // blocks hashed alike (a recomputed block is hashed again)
        uint32_t owner = 0;   // request that cached the first one (its tokens confirm a hit)
    };
    uint32_t allocate();
    void touch(uint32_t id) { ++blocks_[id].ref; }
    void release(uint32_t id);
    void cache(uint32_t id, uint64_t hash, uint32_t owner);
    const Entry* find(uint64_t hash) const;
    // "" when every reference is returned, every hashed block is in the map and the free list holds
    // exactly the unreferenced blocks without a hash.
    std::string audit(const char* name) const;
    uint64_t blocks() const { return blocks_.size(); }
    uint64_t hashed() const { return hashed_; }
    void forget_one();  // VllmFault::stray_block

  private:
    struct Block {
        uint64_t hash = 0;
        uint32_t ref = 0;
        bool cached = false, free = false;
    };
    std::vector<Block> blocks_;
    std::vector<uint32_t> free_;
    std::unordered_map<uint64_t, Entry> map_;
    uint64_t hashed_ = 0;
};

class VllmKvCacheManager {
  public:
    explicit VllmKvCacheManager(const VllmEngineConfig& c, VllmFault fault = VllmFault::none);
    // Admits the prompt q[0, prompt_len), runs its chunks, finishes it (frees its blocks).
    VllmRequestResult serve(const TokenSeqPtr& q, uint64_t prompt_len);
    const VllmTotals& totals() const { return t_; }
    const VllmEngineConfig& config() const { return c_; }
    const VllmBlockGroup& attention() const { return attn_; }
    const VllmBlockGroup& mamba() const { return mamba_; }
    std::string audit() const;  // "" when both groups are consistent
    uint64_t aligned_split(uint64_t start, uint64_t n, uint64_t prompt, uint64_t junction) const {
        return vllm_aligned_split(c_, start, n, prompt, junction);
    }
    bool retained(uint64_t i, uint64_t prompt, uint64_t junction) const {
        return vllm_retained(c_, i, prompt, junction);
    }

  private:
    void lookup(const TokenSeq& q, uint64_t prompt, VllmRequestResult& r);
    void hold_hit(const VllmRequestResult& r);
    void run_chunks(uint64_t prompt, uint32_t owner, VllmRequestResult& r);
    void cache_tails(uint64_t prompt, uint64_t end, uint32_t owner);
    // The hash of the prefix of `len` tokens (a multiple of the hash unit): BlockHashListWithBlockSize
    // takes a block's hash as that of its last unit.
    uint64_t key(uint64_t len) const { return hashes_[len / c_.hash_tokens() - 1]; }
    void finish();

    VllmEngineConfig c_;
    VllmFault fault_;
    VllmBlockGroup attn_, mamba_;
    std::vector<TokenSeqPtr> owners_;
    VllmTotals t_;
    // The request being served.
    std::vector<uint64_t> hashes_;
    std::vector<uint32_t> held_attn_;
    uint32_t hit_tail_ = UINT32_MAX;  // the attention block of a hit that ends inside a block
    bool tail_cached_ = false;
    uint32_t hit_state_ = UINT32_MAX, running_state_ = UINT32_MAX;
};

// engines.md "vLLM: results on the conversation trace": the unbounded rows (vLLM's own manager at
// d56bbf39 on tests/data/traces/mooncake_conversation_trace.jsonl).
struct VllmReferenceRow {
    const char* run;
    bool hybrid;
    uint32_t block, prefix_match_unit;
    VllmRetention retention;
    uint64_t prompt_tokens, hit_tokens;
    uint64_t attention_hit_tokens;  // 0: engines.md gives only the rate
    double attention_pct;
    uint64_t requests_with_hit, requests_with_junction;
};
const std::vector<VllmReferenceRow>& vllm_reference_rows();
// The row of a configuration, or nullptr (retention is not compared for attention-only rows).
const VllmReferenceRow* vllm_reference_row(const VllmEngineConfig& c);

}  // namespace k3
