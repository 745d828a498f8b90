#include "core/fleet/fleet_engine.h"

#include <algorithm>

#include "core/fleet/fleet_config.h"

namespace k3 {

FleetEngineRules fleet_engine_rules(const FleetConfig& c) {
    FleetEngineRules e;
    e.engine = c.engine;
    e.sglang = c.sglang;
    e.vllm = c.vllm;
    return e;
}

FleetConfig with_engine_grid(FleetConfig c) {
    if (c.engine == CacheEngine::vllm) c.cache.page_size = c.vllm.block_tokens;
    if (c.engine == CacheEngine::sglang) c.sglang.page_size = c.cache.page_size;
    return c;
}

std::string fleet_engine_error(const FleetEngineRules& e) {
    if (!e.on()) return {};
    if (e.engine == CacheEngine::sglang) {
        if (std::string err = sglang_config_error(e.sglang); !err.empty()) return err;
        if (e.track_interval == 0 || e.track_interval % e.sglang.page_size != 0)
            return "engine=sglang: mamba_track_interval " + std::to_string(e.track_interval) +
                   " is not a multiple of the page size";
        return {};
    }
    if (e.vllm.block_tokens < 16) return "engine=vllm: vLLM's smallest block is 16 tokens";
    if (e.vllm.prefix_match_unit != 0)
        return "engine=vllm: prefix_match_unit is not offered in the fleet (whole-block hashes only)";
    return {};
}

Lease engine_admit(const FleetEngineRules& e, RadixCache& c, const TokenSeq& q, uint64_t len,
                   EngineAttempt& a, EngineCounters& n, uint64_t* kv_hit) {
    a = EngineAttempt{};
    const uint64_t key = engine_match_len(e, len);
    if (e.engine == CacheEngine::sglang) {
        // Req.init_next_round_input + MambaRadixCache.match_prefix: the whole KV match is visible, the
        // request resumes at the deepest state.
        Lease l = c.acquire(q, key);
        *kv_hit = l.match.kv_len;
        a.branching = sglang_branching(e.sglang, l.match.kv_len, l.match.state_len);
        return l;
    }
    // KVCacheManager.get_computed_blocks: the attention group's chain of full blocks, the Mamba group's
    // deepest state at or below it; the request holds the blocks up to the hybrid hit.
    const Match m = c.match(q, key);
    *kv_hit = m.kv_len;
    if (m.kv_len > m.state_len) {
        a.junction = m.kv_len;
        ++n.junctions;
    }
    return c.acquire(q, m.state_len);
}

namespace {

EngineInsert sglang_after_chunk(const SglangConfig& c, EngineAttempt& a, uint64_t start, uint64_t end,
                                uint64_t target, EngineCounters& n) {
    const bool extra = c.mode == SglangMode::extra_buffer;
    if (extra) {  // _mamba_radix_cache_v2_req_prepare_for_extend: at most one state per extend
        bool at_branch = false;
        const uint64_t at = sglang_track_pos(c, start, end - start, a.branching, &at_branch);
        if (at) {
            a.last_track = at;
            ++n.tracked;
            n.branch_tracks += at_branch;
        }
    }
    EngineInsert ins;
    if (end >= target) return ins;  // the last extend: cache_finished_req inserts at completion
    // cache_unfinished_req(chunked=True)
    ins.len = extra ? a.last_track : end;
    if (ins.len == 0) return ins;  // _skip_cache_unfinished_req: nothing tracked in this chunk
    ins.state = ins.relock = true;
    ins.kind = ins.len == a.branching ? CheckpointKind::junction : CheckpointKind::end;
    a.last_track = 0;
    return ins;
}

}  // namespace

EngineInsert engine_after_chunk(const FleetEngineRules& e, EngineAttempt& a, uint64_t start, uint64_t end,
                                uint64_t target, EngineCounters& n) {
    if (end <= start) return {};
    if (e.engine == CacheEngine::sglang) return sglang_after_chunk(e.sglang, a, start, end, target, n);
    // coordinator.cache_blocks: every full block's KV; MambaManager: the state where the step ends on a
    // block boundary, if reachable_block_mask keeps it.
    const uint64_t B = e.vllm.block_tokens;
    EngineInsert ins;
    ins.len = end / B * B;
    if (end % B == 0) {
        if (vllm_retained(e.vllm, end / B - 1, target, a.junction)) {
            ins.state = true;
            ins.kind = end == a.junction ? CheckpointKind::junction : CheckpointKind::end;
        } else {
            ++n.states_not_retained;
        }
    }
    return ins;
}

EngineInsert engine_at_finish(const FleetEngineRules& e, EngineAttempt& a, uint64_t computed,
                              uint64_t cache_len, uint64_t target, EngineCounters& n,
                              std::vector<uint64_t>* decode_states) {
    const uint64_t committed = std::min(computed, cache_len);
    EngineInsert ins;
    decode_states->clear();
    if (e.engine == CacheEngine::sglang) {
        const SglangConfig& c = e.sglang;
        if (c.mode == SglangMode::no_buffer) {
            ins.len = committed / c.page_size * c.page_size;
            ins.state = ins.len > 0;
            return ins;
        }
        // Decode tracks a state every mamba_track_interval committed tokens; cache_finished_req inserts
        // up to the last track, prefill's or decode's.
        const uint64_t I = e.track_interval;
        for (uint64_t p = target / I * I + I; p <= committed; p += I) {
            a.last_track = p;
            ++n.decode_tracks;
        }
        ins.len = a.last_track;
        ins.state = ins.len > 0;
        ins.kind = ins.len == a.branching ? CheckpointKind::junction : CheckpointKind::end;
        return ins;
    }
    const uint64_t B = e.vllm.block_tokens;
    ins.len = committed / B * B;
    for (uint64_t p = target / B * B + B; p <= ins.len; p += B) {
        if (vllm_retained(e.vllm, p / B - 1, target, a.junction))
            decode_states->push_back(p);
        else
            ++n.states_not_retained;
    }
    return ins;
}

}  // namespace k3
