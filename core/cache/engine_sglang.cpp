#include "core/cache/engine_sglang.h"

#include <algorithm>

namespace k3 {

const char* sglang_mode_id(SglangMode m) {
    return m == SglangMode::extra_buffer ? "extra_buffer" : "no_buffer";
}

std::optional<SglangMode> parse_sglang_mode(std::string_view s) {
    if (s == "extra_buffer") return SglangMode::extra_buffer;
    if (s == "no_buffer") return SglangMode::no_buffer;
    return std::nullopt;
}

std::string sglang_config_error(const SglangConfig& c) {
    if (c.mode == SglangMode::no_buffer && c.page_size != 1)
        return "SGLang runs no_buffer at page size 1 only (MambaRadixCache.__init__ asserts page_size == 1 "
               "without the extra buffer, and _handle_mamba_radix_cache forces it): page size " +
               std::to_string(c.page_size) + " cannot run";
    if (c.page_size == 0 || c.chunked_prefill_tokens < c.page_size)
        return "chunked_prefill_tokens " + std::to_string(c.chunked_prefill_tokens) +
               " holds no whole page of " + std::to_string(c.page_size) + " tokens";
    return {};
}

uint64_t sglang_first_extend_end(const SglangConfig& c, uint64_t prefix, uint64_t len) {
    const uint64_t P = c.page_size, C = c.chunked_prefill_tokens;
    if ((len - prefix + P - 1) / P * P <= C) return len;
    return (prefix + C / P * P) / P * P;
}

uint64_t sglang_track_pos(const SglangConfig& c, uint64_t prefix, uint64_t extend, uint64_t branching,
                          bool* at_branch) {
    const uint64_t G = c.mamba_chunk(), b = branching;
    *at_branch = false;
    if (extend < G) return 0;
    if (b != 0 && b > prefix && b < prefix + extend && (b - prefix) % G == 0) {
        *at_branch = true;
        return b;
    }
    return prefix + extend / G * G;
}

struct SglangReplay::Running {
    TokenSeqPtr q;
    uint64_t len = 0;            // the prompt (origin_input_ids)
    uint64_t prefix = 0;         // len(req.prefix_indices): tokens whose KV the request has
    uint64_t fill_end = 0;       // len(req.fill_ids): the end of the current extend
    uint64_t protected_len = 0;  // req.cache_protected_len: the tree owns the request's KV below it
    uint64_t branching = 0;      // req.mamba_branching_seqlen (0 = None)
    uint64_t last_track = 0;     // req.mamba_last_track_seqlen (0 = None)
    Lease lease;                 // the lock on req.last_node
    SglangRequest out;
};

SglangReplay::SglangReplay(const SglangConfig& c) : c_(c), cache_(CacheConfig{c.page_size, 0, 0}) {}

SglangRequest SglangReplay::serve(const TokenSeqPtr& q, uint64_t prompt_len) {
    Running r;
    r.q = q;
    r.len = std::min<uint64_t>(prompt_len, q->size());
    r.out.prompt_len = r.len;
    ++t_.requests;
    t_.prompt_tokens += r.len;
    if (r.len == 0) return r.out;
    const bool extra = c_.mode == SglangMode::extra_buffer;
    ++t_.req_allocated;
    // Req.init_next_round_input: match fill_ids[:input_len - 1] (one token is left to give a logit).
    r.lease = cache_.acquire(*q, r.len - 1);
    ++t_.locks;
    const uint64_t kv = r.lease.match.kv_len, state = r.lease.match.state_len;
    r.out.kv_hit = kv;
    r.out.state_hit = state;
    r.branching = sglang_branching(c_, kv, state);
    r.out.branching = r.branching;
    r.prefix = r.protected_len = state;
    // HybridReqToTokenPool.alloc: the request's mamba slot (the COW target), plus two ping-pong track
    // slots with the extra buffer (overlap scheduling stays on).
    t_.mamba_allocated += extra ? 3 : 1;
    r.fill_end = sglang_first_extend_end(c_, r.prefix, r.len);
    for (;;) {
        prefill_chunk(r);
        if (r.fill_end >= r.len) break;
        cache_unfinished(r);
        // _get_new_batch_prefill_raw: init_next_round_input without re-matching, add_chunked_req.
        r.prefix = r.fill_end;
        r.fill_end = sglang_next_extend_end(c_, r.prefix, r.len);
    }
    cache_finished(r);
    t_.kv_hit_tokens += kv;
    t_.state_hit_tokens += state;
    t_.requests_with_kv_hit += kv > 0;
    t_.requests_with_state_hit += state > 0;
    t_.gap_requests += kv > state;
    if (c_.sanity_every && t_.requests % c_.sanity_every == 0) sanity_check();
    return r.out;
}

// ScheduleBatch.prepare_for_extend: the extend's KV slots, and in extra_buffer its tracked state.
void SglangReplay::prefill_chunk(Running& r) {
    const uint64_t extend = r.fill_end - r.prefix;
    ++r.out.extends;
    ++t_.extends;
    t_.kv_allocated += extend;
    if (c_.mode == SglangMode::extra_buffer) track(r, extend);
}

// _mamba_radix_cache_v2_req_prepare_for_extend: at most one state per extend.
void SglangReplay::track(Running& r, uint64_t extend) {
    bool at_branch = false;
    const uint64_t at = sglang_track_pos(c_, r.prefix, extend, r.branching, &at_branch);
    if (at == 0) return;
    if (at_branch) {
        r.out.branch_tracked = true;
        ++t_.branch_tracks;
    }
    r.last_track = at;
    ++r.out.tracked;
    ++t_.tracked;
}

// MambaRadixCache._insert_helper for prompt[:len] with one state at its end.
bool SglangReplay::insert(Running& r, uint64_t len) {
    const CheckpointKind kind = len == r.branching ? CheckpointKind::junction : CheckpointKind::end;
    const InsertResult ir =
        cache_.insert(r.q, len, {NewCheckpoint{len, CheckpointRef{0, c_.state_bytes}, kind}});
    ++t_.inserts;
    // The request's KV of the part the tree already held past cache_protected_len is freed.
    if (ir.existing_len > r.protected_len) t_.kv_freed += ir.existing_len - r.protected_len;
    const bool exist = ir.states_added == 0;
    t_.states_inserted += ir.states_added;
    t_.states_existing += exist;
    return exist;
}

// MambaRadixCache.cache_unfinished_req(chunked=True), between two chunks.
void SglangReplay::cache_unfinished(Running& r) {
    const uint64_t len = c_.mode == SglangMode::extra_buffer ? r.last_track : r.fill_end;
    if (len == 0) return;  // _skip_cache_unfinished_req: nothing tracked in this chunk
    // extra_buffer donates the track slot just written and takes a new one in its place; no_buffer
    // takes a slot and copies the running state into it. Either is freed if a state sat there already.
    ++t_.mamba_allocated;
    if (insert(r, len)) ++t_.mamba_freed;
    // Re-match and re-lock: the tree now owns the request's KV up to the state just inserted.
    cache_.release(r.lease);
    ++t_.unlocks;
    r.lease = cache_.acquire(*r.q, len, false);
    ++t_.locks;
    r.protected_len = r.lease.match.state_len;
    if (r.protected_len != len && t_.sanity_failure.empty())
        t_.sanity_failure =
            "the state inserted at " + std::to_string(len) + " is not found again by the match";
    r.last_track = 0;
}

// MambaRadixCache.cache_finished_req, then common.release_kv_cache.
void SglangReplay::cache_finished(Running& r) {
    const bool extra = c_.mode == SglangMode::extra_buffer;
    const uint64_t len = extra ? r.last_track : r.len;
    if (len != r.len) {  // extra_buffer: the KV past the last tracked state is freed
        const uint64_t tail = r.len - std::max(len, r.protected_len);
        if (slip_ == SglangSlip::kv_tail_kept && tail > 0)
            slip_ = SglangSlip::none;
        else
            t_.kv_freed += tail;
    }
    const bool exist = len == 0 || insert(r, len);  // an empty key inserts nothing (mamba_exist)
    r.out.cached_len = len;
    // free_mamba_cache: extra_buffer frees the request's slot and its track slots but the one the tree
    // kept; no_buffer's slot went to the tree unless a state sat there already.
    uint64_t freed = extra ? (exist ? 3 : 2) : (exist ? 1 : 0);
    if (slip_ == SglangSlip::mamba_slot_leak && freed > 0) {
        --freed;
        slip_ = SglangSlip::none;
    }
    t_.mamba_freed += freed;
    ++t_.req_freed;
    if (slip_ == SglangSlip::lock_left) {
        slip_ = SglangSlip::none;
        return;  // dec_lock_ref(req.last_node) forgotten
    }
    cache_.release(r.lease);
    ++t_.unlocks;
}

std::string SglangReplay::mamba_slots_check() const {
    const uint64_t live = t_.mamba_allocated - t_.mamba_freed, states = cache_.stats().states;
    if (live == states) return {};
    return std::to_string(live) + " mamba slots live, " + std::to_string(states) +
           " mamba states in the tree";
}

std::string SglangReplay::kv_check() const {
    const uint64_t held = t_.kv_allocated - t_.kv_freed, tree = cache_.stats().kv_tokens;
    if (held == tree) return {};
    return std::to_string(t_.kv_allocated) + " KV tokens allocated - " + std::to_string(t_.kv_freed) +
           " freed = " + std::to_string(held) + ", " + std::to_string(tree) + " in the tree";
}

std::string SglangReplay::locks_check() const {
    std::string bad;
    if (t_.locks != t_.unlocks || cache_.stats().leases != 0)
        bad = std::to_string(t_.locks - t_.unlocks) + " lock references left (" +
              std::to_string(cache_.stats().leases) + " leases in the tree)";
    if (t_.req_allocated != t_.req_freed)
        bad += (bad.empty() ? "" : "; ") + std::to_string(t_.req_allocated - t_.req_freed) +
               " request slots not freed";
    return bad;
}

void SglangReplay::sanity_check() {
    ++t_.sanity_checks;
    const std::string audit = cache_.audit();
    if (!audit.empty() && t_.sanity_failure.empty())
        t_.sanity_failure = "after request " + std::to_string(t_.requests) + ": " + audit;
}

const std::vector<SglangReferenceRow>& sglang_reference_rows() {
    using M = SglangMode;
    static const std::vector<SglangReferenceRow> rows = {
        {M::extra_buffer, 8192, 1, true, 36.875, 31.678, 53392832, 45868480, 19715, 19876},
        {M::extra_buffer, 8192, 1, false, 37.359, 26.119, 54093952, 37817984, 20142, 20332},
        {M::extra_buffer, 16384, 1, true, 36.592, 28.883, 52982400, 41820288, 14686, 14820},
        {M::extra_buffer, 16384, 1, false, 37.359, 20.721, 54093952, 30002816, 14865, 15008},
        {M::extra_buffer, 8192, 64, true, 36.875, 31.678, 53392832, 45868480, 19715, 19876},
        {M::extra_buffer, 16384, 64, true, 36.592, 28.883, 52982400, 41820288, 14686, 14820},
        {M::no_buffer, 8192, 1, true, 37.362, 23.993, 54098293, 34739712, 20285, 20403},
        {M::no_buffer, 16384, 1, true, 37.362, 16.711, 54098293, 24196608, 14924, 15042},
    };
    return rows;
}

const SglangReferenceRow* sglang_reference_row(const SglangConfig& c) {
    for (const SglangReferenceRow& row : sglang_reference_rows())
        if (row.mode == c.mode && row.chunked_prefill_tokens == c.chunked_prefill_tokens &&
            row.page_size == c.page_size &&
            (c.mode == SglangMode::no_buffer || row.track_branching == c.track_branching))
            return &row;
    return nullptr;
}

}  // namespace k3
