// FleetSim: the memory of an instance. engine=ideal keeps today's working pool (running requests
// only) beside a prefix cache with capacities of its own: the labelled upper bound. With an engine's
// rules (sglang, vllm) the instance has one pool, sized from the device (shared_pool_plan), that
// holds the running requests and the cache: the tree's KV and states are charged to it under an
// owner of their own, a request hands its pages to the tree when the tree takes them (SGLang's
// cache_unfinished_req, vLLM's cached blocks), and an allocation that fails evicts from the tree
// first, as both engines do (SGLang evict_from_tree_cache / _alloc_mamba_slot, vLLM's free-block
// queue): so the hit rate falls as running requests crowd the cache out.
#include <algorithm>

#include "core/fleet/fleet_sim_internal.h"
#include "core/memory/hybrid_blocks.h"
#include "core/spec/storage.h"

namespace k3 {

namespace {
// Pool owners: requests are r + 1; a tree (one per tenant namespace) owns its holdings as this.
constexpr OwnerId kCacheOwner = OwnerId(1) << 40;
}  // namespace

bool FleetSim::shared_pool() const { return c_.engine != CacheEngine::ideal && !c_.unbounded_memory; }

// State slots one running request holds of its own: SGLang's request slot and, with the extra
// buffer, its two ping-pong track slots (HybridReqToTokenPool.alloc); vLLM's running state block, and
// with speculative snapshots its num_speculative_blocks = N more (RecoverSSM: none, its one page holds
// the records). The state a request last cached and holds locked is charged to the tree: in vLLM that
// is the second of align mode's 2 + num_speculative_blocks blocks, cached in place; in SGLang the track
// slot it donated, which it replaced by a new one.
uint32_t FleetSim::running_states() const {
    if (c_.engine == CacheEngine::sglang) return c_.sglang.mode == SglangMode::extra_buffer ? 3 : 1;
    if (c_.engine == CacheEngine::vllm && c_.spec_state == SpecState::snapshot) return 1 + c_.draft_len;
    return 1;  // engine ideal: one slot holds all the request's pages (running_state_slots)
}

// One linear layer's state slot in the engine's pool under speculative decoding. vLLM: the spec page
// (spec::vllm_pages: the conv window N columns wider; RecoverSSM's records beside it). SGLang: each
// slot also carries its share of the verify scratch, intermediate_ssm_state_cache, (max_running + 1) x
// D states with max_running = slots / ratio and D = 1 + N verified tokens: SGLang's solve gives a
// slot (1 + D / ratio) states (model_runner_kv_cache_mixin's intermediate factor).
uint64_t engine_state_slot_bytes(const FleetConfig& c, uint64_t state_bytes_per_layer) {
    if (c.spec_state == SpecState::off) return state_bytes_per_layer;
    const int n = int(c.draft_len);
    if (c.engine == CacheEngine::vllm) {
        const spec::VllmPages p = spec::vllm_pages(spec::vllm_kda_page_tensors(c.model, n), n);
        return c.spec_state == SpecState::snapshot ? p.snapshot_page : p.recoverssm_page;
    }
    const double ratio = sglang_running_ratio(c.sglang, c.caching);
    return uint64_t(double(state_bytes_per_layer) * (1 + double(1 + n) / ratio));
}

PoolResult FleetSim::make_instance_pool(uint32_t k) {
    // kv_capacity_sharded: the pool holds KV as if spread over the ranks (DP attention's merged view)
    // while the instance runs tensor parallel attention.
    const bool dp_view = c_.attention_dp || (k == 0 && c_.falsify == FleetSimFalsify::kv_capacity_sharded);
    PoolModel m = tp_layout(c_.model, c_.gpus, dp_view).pool_model();
    if (c_.engine != CacheEngine::ideal)
        m.state_bytes_per_layer = engine_state_slot_bytes(c_, m.state_bytes_per_layer);
    if (c_.engine == CacheEngine::vllm) {
        HybridPagesConfig hc;
        hc.budget_bytes = uint64_t(std::max(0.0, shared_pool_plan(c_).budget));
        // The block is derived already (the cache's grid): a multiple of 1 and it as the least block
        // give exactly it, unless one layer's state does not fit in it.
        hc.kernel_multiple = 1;
        hc.min_block_tokens = c_.vllm.block_tokens;
        PoolResult pr = make_hybrid_pool(m, hc);
        if (pr.pool && pr.pool->layout().page_tokens != c_.vllm.block_tokens)
            return {nullptr, "one layer's state needs a vLLM block of " +
                                 std::to_string(pr.pool->layout().page_tokens) + " tokens; the block is " +
                                 std::to_string(c_.vllm.block_tokens)};
        return pr;
    }
    StaticSplitConfig sc;
    sc.page_tokens = c_.page_tokens;
    if (c_.engine == CacheEngine::sglang) {
        sc.budget_bytes = uint64_t(std::max(0.0, shared_pool_plan(c_).budget));
        sc.state_slots = c_.mamba_slots;  // 0: mamba_full_memory_ratio 0.9 (server_args.py)
        return make_static_pool(m, sc);
    }
    sc.budget_bytes = c_.working_bytes;
    sc.state_slots = slots_.slots;
    // A slot holds what one running request holds: its state pages (SpecState).
    m.state_bytes_per_layer = falsify_now(FleetSimFalsify::state_slot_one_page) ? slots_.page_bytes_per_layer
                                                                                : slots_.bytes_per_layer();
    return make_static_pool(m, sc);
}

// The tree's holdings as the pool counts them: its KV in whole pages, every live checkpoint (held
// by the tree or borrowed by a running request) in a slot. A tree that outgrew what the running
// requests leave gives back its least recently used entries until it fits.
void FleetSim::charge_cache(uint32_t k) {
    if (!shared_pool()) return;
    Inst& I = inst_[k];
    const uint64_t pt = I.pool->layout().page_tokens;
    const bool blocks = I.pool->design() == PoolDesign::hybrid_pages;  // KV and states share blocks
    for (size_t ns = 0; ns < I.caches.size(); ++ns) {
        RadixCache& c = *I.caches[ns];
        const OwnerId owner = kCacheOwner + ns;
        for (;;) {
            uint64_t pages = (c.stats().kv_tokens + pt - 1) / pt;
            if (ns == 0 && pages > 0 && c_.falsify == FleetSimFalsify::cache_undercharged) --pages;
            const uint64_t held = I.pool->kv_tokens(owner);
            if (held > pages * pt ? I.pool->truncate_kv(owner, pages * pt) == AllocStatus::ok
                                  : I.pool->grow_kv(owner, pages * pt) == AllocStatus::ok)
                break;
            if (c.evict_kv(pages * pt - held) == 0 && !(blocks && c.evict_states(1) > 0)) {
                ++t_.pool_overcommits;
                break;
            }
        }
        for (;;) {
            const uint64_t want = c.stats().live_checkpoints;
            StateRef ref = kNoRef;
            bool ok = true;
            while (ok && I.pool->states(owner).size() > want)
                ok = I.pool->free_state(I.pool->states(owner).back()) == AllocStatus::ok;
            while (ok && I.pool->states(owner).size() < want)
                ok = I.pool->alloc_state(owner, &ref) == AllocStatus::ok;
            if (ok) break;
            if (c.evict_states(want - I.pool->states(owner).size()) == 0 && !(blocks && c.evict_kv(pt) > 0)) {
                ++t_.pool_overcommits;
                break;
            }
        }
    }
}

// An allocation failed: the trees of instance k give back their least recently used entries, KV
// for a page or a state for a slot (either, in vLLM's pool, where both are blocks). True if
// anything was freed.
bool FleetSim::evict_for(uint32_t k, bool state) {
    Inst& I = inst_[k];
    const bool blocks = I.pool->design() == PoolDesign::hybrid_pages;
    const uint64_t pt = I.pool->layout().page_tokens;
    for (auto& c : I.caches) {
        uint64_t freed = 0;
        if (state || blocks) {
            freed = c->evict_states(1);
            t_.pool_evicted_states += freed;
        }
        if (freed == 0 && (!state || blocks)) {
            freed = c->evict_kv(pt);
            t_.pool_evicted_kv += freed;
        }
        if (freed > 0) {
            charge_cache(k);
            return true;
        }
    }
    return false;
}

AllocStatus FleetSim::alloc_running_state(uint32_t k, uint32_t r) {
    Inst& I = inst_[k];
    for (uint32_t i = 0; i < running_states(); ++i) {
        StateRef s = kNoRef;
        AllocStatus a;
        while ((a = I.pool->alloc_state(OwnerId(r) + 1, &s)) != AllocStatus::ok)
            if (!shared_pool() || !evict_for(k, true)) break;
        if (a != AllocStatus::ok) {
            I.pool->release(OwnerId(r) + 1);
            return a;
        }
        if (i == 0) live_[r].state_ref = s;
    }
    return AllocStatus::ok;
}

// Pages for the request's context up to `context`: its own part, past what its lease holds in the
// tree (shared pool) or past where it resumed.
bool FleetSim::grow(uint32_t k, uint32_t r, uint64_t context) {
    Live& L = live_[r];
    Inst& I = inst_[k];
    const uint64_t own = context - L.own_start();
    if (own <= L.kv_alloc) return true;
    const uint64_t pt = I.pool->layout().page_tokens;
    const uint64_t want = (own + pt - 1) / pt * pt;
    while (I.pool->grow_kv(OwnerId(r) + 1, want) != AllocStatus::ok)
        if (!shared_pool() || !evict_for(k, false)) return false;
    L.kv_alloc = want;
    return true;
}

// The tree took the request's tokens below `upto` and the request's lease holds them: its own
// pages now start there.
void FleetSim::hand_to_tree(uint32_t k, uint32_t r, uint64_t upto) {
    Live& L = live_[r];
    if (!shared_pool() || upto <= L.own_start()) return;
    Inst& I = inst_[k];
    L.tree_owned = std::min(upto, L.pos);
    const uint64_t pt = I.pool->layout().page_tokens, own = L.pos - L.own_start();
    const uint64_t want = (own + pt - 1) / pt * pt;
    if (want < L.kv_alloc && I.pool->truncate_kv(OwnerId(r) + 1, want) == AllocStatus::ok) L.kv_alloc = want;
    charge_cache(k);
}

// Checks the trees' charges: each tree's pages and slots in its instance's pool equal its holdings.
std::string FleetSim::audit_cache_charge() const {
    if (!shared_pool()) return {};
    for (uint32_t k = 0; k < inst_.size(); ++k) {
        const Inst& I = inst_[k];
        if (!I.pool) continue;
        const uint64_t pt = I.pool->layout().page_tokens;
        for (size_t ns = 0; ns < I.caches.size(); ++ns) {
            const CacheStats& s = I.caches[ns]->stats();
            const uint64_t pages = I.pool->kv_pages(kCacheOwner + ns).size();
            const uint64_t states = I.pool->states(kCacheOwner + ns).size();
            if (pages != (s.kv_tokens + pt - 1) / pt || states != s.live_checkpoints)
                return "instance " + std::to_string(k) + ": its pool charges the prefix cache " +
                       std::to_string(pages) + " pages and " + std::to_string(states) +
                       " slots; the cache holds " + std::to_string(s.kv_tokens) + " KV tokens and " +
                       std::to_string(s.live_checkpoints) + " states";
        }
    }
    return {};
}

// Pool owners other than the trees (what a finished run must have given back).
uint64_t FleetSim::request_owners(const PagePool& p) {
    uint64_t n = 0;
    for (OwnerId o : p.owners()) n += o < kCacheOwner;
    return n;
}

}  // namespace k3
