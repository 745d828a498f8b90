// vLLM V1's hybrid prefix cache in align mode. The rules follow vLLM's code as read in the closest
// stored versions of the tree engines.md ran (d56bbf39 itself is not stored): vllm/v1/core/
// kv_cache_manager.py KVCacheManager.get_computed_blocks, kv_cache_coordinator.py
// HybridKVCacheCoordinator.find_longest_cache_hit / cache_blocks, single_type_kv_cache_manager.py
// FullAttentionManager / MambaManager.find_longest_cache_hit, MambaManager.allocate_new_blocks (align:
// one running state block per step, null blocks before it), MambaManager.reachable_block_mask, and
// sched/scheduler.py Scheduler._mamba_block_aligned_split.
#include "core/cache/engine_vllm.h"

#include <algorithm>
#include <charconv>

#include "core/base/rng.h"

namespace k3 {

std::optional<VllmRetention> parse_vllm_retention(std::string_view text) {
    if (text == "dense") return VllmRetention{};
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n > UINT32_MAX) return std::nullopt;
    if (n == 0) return VllmRetention{VllmRetention::boundaries, 0};
    return VllmRetention{VllmRetention::interval, uint32_t(n)};
}

std::string vllm_retention_text(const VllmRetention& r) {
    switch (r.kind) {
        case VllmRetention::dense: return "dense";
        case VllmRetention::boundaries: return "0";
        case VllmRetention::interval: return std::to_string(r.tokens);
    }
    return "dense";
}

// ---- the block pool of one group ----

uint32_t VllmBlockGroup::allocate() {
    uint32_t id;
    if (!free_.empty()) {
        id = free_.back();
        free_.pop_back();
    } else {
        id = uint32_t(blocks_.size());
        blocks_.push_back({});
    }
    blocks_[id] = {0, 1, false, false};
    return id;
}

void VllmBlockGroup::release(uint32_t id) {
    Block& b = blocks_[id];
    if (b.ref > 0) --b.ref;
    if (b.ref == 0 && !b.cached) {  // an unhashed block returns to the free list; a hashed one stays cached
        b.free = true;
        free_.push_back(id);
    }
}

void VllmBlockGroup::cache(uint32_t id, uint64_t hash, uint32_t owner) {
    Block& b = blocks_[id];
    b.hash = hash;
    b.cached = true;
    ++hashed_;
    auto [it, fresh] = map_.try_emplace(hash, Entry{id, 0, owner});
    ++it->second.copies;
}

const VllmBlockGroup::Entry* VllmBlockGroup::find(uint64_t hash) const {
    const auto it = map_.find(hash);
    return it == map_.end() ? nullptr : &it->second;
}

void VllmBlockGroup::forget_one() {
    if (!map_.empty()) map_.erase(map_.begin());
}

std::string VllmBlockGroup::audit(const char* name) const {
    const std::string g = std::string(name) + " group: ";
    uint64_t refs = 0, cached = 0, free = 0, mapped = 0;
    for (const Block& b : blocks_) {
        refs += b.ref;
        cached += b.cached;
        free += b.free;
        if (b.free && (b.ref || b.cached)) return g + "a block on the free list is held or hashed";
    }
    for (const auto& [hash, e] : map_) {
        mapped += e.copies;
        const Block& b = blocks_[e.block];
        if (!b.cached || b.hash != hash) return g + "a hash-map entry points at a block without that hash";
    }
    if (refs) return g + std::to_string(refs) + " references still held after every request finished";
    if (cached != hashed_ || mapped != hashed_)
        return g + std::to_string(cached) + " hashed blocks, " + std::to_string(mapped) + " in the hash map";
    if (free != free_.size() || cached + free != blocks_.size())
        return g + "free list and hashed blocks do not add up to the pool";
    return {};
}

// ---- the manager ----

VllmKvCacheManager::VllmKvCacheManager(const VllmEngineConfig& c, VllmFault fault) : c_(c), fault_(fault) {}

uint64_t vllm_aligned_split(const VllmEngineConfig& c, uint64_t start, uint64_t n, uint64_t prompt,
                            uint64_t junction) {
    const uint64_t B = c.block_tokens, H = c.hash_tokens(), prefill_end = prompt;
    if (start >= prefill_end) return n;
    const uint64_t last_cache_position = prompt - prompt % B;
    uint64_t end = start + n;
    if (end < prefill_end) {  // a non-final chunk ends on a block boundary
        const uint64_t aligned_end = end / B * B;
        if (aligned_end > start || B <= c.token_budget) end = aligned_end;
    }
    // mamba_partial_cache_hit: the prompt's tail unit is registered by a chunk ending exactly there.
    const uint64_t tail = H < B ? prompt / H * H : 0;
    const uint64_t stops[] = {
        start % B != 0 ? (start / B + 1) * B : 0,
        last_cache_position,
        last_cache_position < tail && tail < prompt ? tail : 0,
        start < junction && junction < end ? start + (junction - start) / B * B : 0,
    };
    uint64_t stop = end;
    for (uint64_t s : stops)
        if (start < s && s < end) stop = std::min(stop, s);
    return stop > start ? stop - start : 0;
}

bool vllm_retained(const VllmEngineConfig& c, uint64_t i, uint64_t prompt, uint64_t junction) {
    const uint64_t B = c.block_tokens;
    if (c.retention.kind == VllmRetention::dense) return true;
    if (c.retention.kind == VllmRetention::interval) {
        const uint64_t per_segment = c.retention.tokens / B;
        if (per_segment <= 1 || (i + 1) % per_segment == 0) return true;
    }
    // The reachable boundaries: the replay boundary prompt - 1 and the junction, floored to blocks.
    const uint64_t replay = prompt ? (prompt - 1) / B : 0;
    if (replay > 0 && i == replay - 1) return true;
    return junction / B > 0 && i == junction / B - 1;
}

// get_computed_blocks: the attention group's chain of full blocks, then (partial hits) the deepest
// tail unit inside the next block; the Mamba group's deepest state at or below that; the junction.
void VllmKvCacheManager::lookup(const TokenSeq& q, uint64_t prompt, VllmRequestResult& r) {
    const uint64_t B = c_.block_tokens, H = c_.hash_tokens(), units = hashes_.size();
    const uint64_t max_length = prompt ? prompt - 1 : 0;  // num_tokens - 1
    uint64_t a = 0;
    while (a + B <= max_length && attn_.find(key(a + B))) a += B;
    if (H < B) {
        const uint64_t first = a / H, last = std::min({first + B / H - 1, max_length / H, units});
        for (uint64_t f = last; f-- > first;)
            if (attn_.find(hashes_[f])) {
                a = (f + 1) * H;
                break;
            }
    }
    uint64_t h = a;
    if (c_.hybrid) {
        h = 0;
        for (uint64_t f = std::min(a / H, units); f-- > 0;)
            if (mamba_.find(hashes_[f])) {
                h = (f + 1) * H;
                break;
            }
    }
    if (a > 0) {
        const TokenSeq& owner = *owners_[attn_.find(key(a))->owner];
        if (common_prefix(q, owner, 0, a) != a) ++t_.token_mismatches;
    }
    r.attention_hit = a;
    r.hit = h;
    // shared_prefix_boundary = hit + num_uncached_common_prefix_tokens when the latter is not 0.
    r.junction = c_.hybrid && a > h && fault_ != VllmFault::no_junction ? a : 0;
}

// The request holds its hit: the attention blocks up to the hybrid hit, the state block there.
void VllmKvCacheManager::hold_hit(const VllmRequestResult& r) {
    const uint64_t B = c_.block_tokens;
    for (uint64_t i = 0; i < r.hit / B; ++i) {
        const uint32_t id = attn_.find(key((i + 1) * B))->block;
        attn_.touch(id);
        held_attn_.push_back(id);
    }
    if (r.hit % B) {  // a partial hit: the shared tail block (its private copy is allocated next)
        hit_tail_ = attn_.find(key(r.hit))->block;
        attn_.touch(hit_tail_);
    }
    if (c_.hybrid && r.hit > 0) {
        hit_state_ = mamba_.find(key(r.hit))->block;
        mamba_.touch(hit_state_);
    }
}

// FullAttentionManager._cache_partial_tail_block: the prompt's last hash boundary, inside a block.
void VllmKvCacheManager::cache_tails(uint64_t prompt, uint64_t end, uint32_t owner) {
    const uint64_t B = c_.block_tokens, H = c_.hash_tokens(), boundary = prompt / H * H;
    if (H == B || tail_cached_ || boundary == 0 || boundary > end || boundary % B == 0) return;
    attn_.cache(held_attn_[boundary / B], key(boundary), owner);
    tail_cached_ = true;
}

void VllmKvCacheManager::run_chunks(uint64_t prompt, uint32_t owner, VllmRequestResult& r) {
    const uint64_t B = c_.block_tokens, H = c_.hash_tokens();
    uint64_t computed = r.hit, cached_attn = r.hit / B, cached_mamba = r.hit / B;
    while (computed < prompt) {
        uint64_t n = std::min<uint64_t>(prompt - computed, c_.token_budget);
        if (computed > r.hit) n = std::min<uint64_t>(n, c_.max_model_len - computed - 1);
        if (c_.hybrid) n = aligned_split(computed, n, prompt, r.junction);
        if (n == 0) {
            ++t_.stalled;
            break;
        }
        const uint64_t end = computed + n, full = end / B;
        while (held_attn_.size() < (end + B - 1) / B) held_attn_.push_back(attn_.allocate());
        for (uint64_t i = cached_attn; i < full; ++i) attn_.cache(held_attn_[i], key((i + 1) * B), owner);
        cached_attn = std::max(cached_attn, full);
        cache_tails(prompt, end, owner);
        if (c_.hybrid) {
            // Align mode: one running state block per step; the previous one is released.
            const uint32_t s = mamba_.allocate();
            if (running_state_ != UINT32_MAX) mamba_.release(running_state_);
            running_state_ = s;
            if (end % B == 0 && full > cached_mamba) {
                if (retained(full - 1, prompt, r.junction)) {
                    mamba_.cache(s, key(end), owner);
                    ++t_.states_cached;
                } else {
                    ++t_.states_skipped;
                }
            } else if (H < B && end % B != 0 && end == prompt / H * H) {
                mamba_.cache(s, key(end), owner);  // MambaManager._cache_partial_tail_block
                ++t_.states_cached;
            }
            cached_mamba = std::max(cached_mamba, full);
        }
        computed = end;
        ++r.chunks;
    }
}

void VllmKvCacheManager::finish() {
    if (fault_ != VllmFault::leaked_ref || t_.requests != 1)
        for (uint32_t id : held_attn_) attn_.release(id);
    held_attn_.clear();
    for (uint32_t* id : {&hit_tail_, &running_state_, &hit_state_})
        if (*id != UINT32_MAX) (id == &hit_tail_ ? attn_ : mamba_).release(*id), *id = UINT32_MAX;
    tail_cached_ = false;
}

VllmRequestResult VllmKvCacheManager::serve(const TokenSeqPtr& q, uint64_t prompt_len) {
    VllmRequestResult r;
    r.prompt = prompt_len = std::min<uint64_t>(prompt_len, q->size());
    const uint32_t owner = uint32_t(owners_.size());
    owners_.push_back(q);
    hashes_ = block_hash_chain(*q, prompt_len, c_.hash_tokens());
    lookup(*q, prompt_len, r);
    hold_hit(r);
    ++t_.requests;
    run_chunks(prompt_len, owner, r);
    finish();
    const uint64_t H = c_.hash_tokens();
    t_.prompt_tokens += r.prompt;
    t_.hit_tokens += r.hit;
    t_.attention_hit_tokens += r.attention_hit;
    t_.requests_with_hit += r.hit > 0;
    t_.requests_with_attention_hit += r.attention_hit > 0;
    t_.requests_with_junction += r.junction > 0;
    t_.chunks += r.chunks;
    t_.kv_blocks_cached = attn_.hashed();
    t_.grid_violations += r.hit % H != 0 || r.attention_hit % H != 0 || r.hit > r.attention_hit ||
                          (r.attention_hit > 0 && r.attention_hit >= r.prompt);
    if (fault_ == VllmFault::stray_block && t_.requests == 2) attn_.forget_one();
    return r;
}

std::string VllmKvCacheManager::audit() const {
    std::string a = attn_.audit("attention");
    if (a.empty() && c_.hybrid) a = mamba_.audit("mamba");
    if (a.empty() && t_.grid_violations)
        a = std::to_string(t_.grid_violations) +
            " hits off the hash grid, past prompt - 1 or above attention";
    if (a.empty() && t_.token_mismatches)
        a = std::to_string(t_.token_mismatches) + " hash hits whose tokens differ";
    if (a.empty() && t_.stalled) a = std::to_string(t_.stalled) + " requests stalled (a step of 0 tokens)";
    return a;
}

// ---- the reference ----

const std::vector<VllmReferenceRow>& vllm_reference_rows() {
    using R = VllmRetention;
    constexpr uint64_t prompt = 144793823, attn1888 = 45761344, attn1920 = 45966720;
    static const std::vector<VllmReferenceRow> rows = {
        {"conv_attn1888", false, 1888, 0, R{}, prompt, attn1888, attn1888, 31.60, 3760, 0},
        {"conv_attn1920", false, 1920, 0, R{}, prompt, attn1920, attn1920, 31.75, 3754, 0},
        {"conv_attn512", false, 512, 0, R{}, prompt, 54063104, 54063104, 37.34, 12030, 0},
        {"conv_hybrid1888_dense", true, 1888, 0, R{}, prompt, 44384992, attn1888, 31.60, 3451, 460},
        {"conv_hybrid1888_r0", true, 1888, 0, R{R::boundaries, 0}, prompt, 41991008, attn1888, 31.60, 3303,
         516},
        {"conv_hybrid1888_r4blk", true, 1888, 0, R{R::interval, 7552}, prompt, 44362336, attn1888, 31.60,
         3451, 460},
        {"conv_hybrid1920_dense", true, 1920, 0, R{}, prompt, 44872320, attn1920, 31.75, 3484, 394},
        {"conv_hybrid1920_r0", true, 1920, 0, R{R::boundaries, 0}, prompt, 42952320, attn1920, 31.75, 3361,
         434},
        {"conv_hybrid1920_r4blk", true, 1920, 0, R{R::interval, 7680}, prompt, 44864640, attn1920, 31.75,
         3484, 394},
        {"conv_hybrid1920_dense_pmu128", true, 1920, 128, R{}, prompt, 46252032, 0, 32.70, 3783, 391},
        {"conv_hybrid1920_r0_pmu128", true, 1920, 128, R{R::boundaries, 0}, prompt, 44329088, 0, 32.70, 3660,
         434},
    };
    return rows;
}

const VllmReferenceRow* vllm_reference_row(const VllmEngineConfig& c) {
    if (c.token_budget != 8192) return nullptr;
    for (const VllmReferenceRow& r : vllm_reference_rows()) {
        const uint32_t unit = c.hash_tokens() < c.block_tokens ? c.prefix_match_unit : 0;
        if (r.hybrid != c.hybrid || r.block != c.block_tokens || r.prefix_match_unit != unit) continue;
        if (!r.hybrid) return &r;
        if (r.retention.kind == c.retention.kind &&
            (r.retention.kind != VllmRetention::interval || r.retention.tokens == c.retention.tokens))
            return &r;
    }
    return nullptr;
}

}  // namespace k3
