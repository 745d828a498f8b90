// The page pool: KV pages and per-sequence state slots of a hybrid model sharing one byte budget.
//
// Three designs sit behind one interface (module 3 `pool`, reference/serving.md §1):
//   static   two fixed pools split by a ratio (SGLang's default MambaPool + KV pool),
//   vllm     one pool of equal-size blocks, the attention block inflated to hold one layer's state
//            and the state page padded (vLLM's hybrid allocator),
//   unified  one byte buffer, KV pages growing from the bottom and state slots from the top, with
//            compaction through a virtual -> physical table (SGLang's unified pool, #29678).
//
// Vocabulary
//   owner     a caller-chosen id (a request, a prefix-cache entry); 0 means "nobody". Every page and
//             every state slot has exactly one owner. Ownership moves between owners (a finished
//             request donates its prefix to the cache) without copying.
//   KV page   `page_tokens` tokens of every attention layer. A sequence's KV is a list of pages that
//             grows with it: page i holds tokens [i * page_tokens, (i + 1) * page_tokens).
//   state     one slot holding every linear (KDA/GDN) layer's recurrent state and conv window.
//   handles   PageRef / StateRef stay valid until freed, whatever the pool does inside (the unified
//             pool's compaction moves bytes but never handles).
//
// Byte accounting is exact: kv + state + padding + free + unusable == budget at all times, and
// audit() recomputes it from the physical tables and compares. free_list_bytes() counts the free
// side from each design's own free structures, so a caller can recount the bytes without the running
// totals (module 3's byte audit). Contents are optional: a pool made with backing storage hands out
// pointers to each page's and slot's bytes (kv_data, state_data); without it the pool keeps metadata
// only (the simulations of modules 3 and 11).
//
// Misuse (freeing a handle that is not allocated, an unknown owner) returns an error value and
// changes nothing; nothing here throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace k3 {

using OwnerId = uint64_t;
inline constexpr OwnerId kNoOwner = 0;
using PageRef = uint32_t;
using StateRef = uint32_t;
inline constexpr uint32_t kNoRef = 0xffffffffu;

enum class PoolDesign : uint8_t { static_split, hybrid_pages, unified };
const char* pool_design_id(PoolDesign d);     // "static", "vllm", "unified"
const char* pool_design_title(PoolDesign d);  // "static split (SGLang default)", ...

enum class AllocStatus : uint8_t {
    ok,
    no_kv_page,      // no room for another KV page
    no_state_id,     // every state id / slot is taken
    no_state_space,  // a state id is free but no room for its bytes (unified: contiguous; vllm: blocks)
    bad_request,     // owner 0, a handle not allocated, an unaligned transfer...
};
const char* alloc_status_name(AllocStatus s);

// What a pool needs to know about the model (core/model/pool_model.h makes it from the accounting).
struct PoolModel {
    int linear_layers = 0, attention_layers = 0;
    uint64_t state_bytes_per_layer = 0;      // one linear layer: recurrent state + conv window
    uint64_t recurrent_bytes_per_layer = 0;  // where the conv window starts inside a layer's state
    uint64_t kv_bytes_per_token_per_layer = 0;

    uint64_t state_bytes() const { return state_bytes_per_layer * uint64_t(linear_layers); }
    uint64_t kv_bytes_per_token() const { return kv_bytes_per_token_per_layer * uint64_t(attention_layers); }
};

// What a design made of the budget. "data" bytes hold model data; the rest of a page or slot is
// structural padding (vLLM's padded state page and padding layers).
struct PoolLayout {
    PoolDesign design = PoolDesign::static_split;
    uint64_t budget_bytes = 0;
    uint32_t page_tokens = 0;         // tokens per KV page (vLLM: the derived block size)
    uint64_t kv_page_bytes = 0;       // pool bytes one KV page takes
    uint64_t kv_page_data_bytes = 0;  // page_tokens x kv_bytes_per_token
    uint64_t state_slot_bytes = 0;    // pool bytes one state takes
    uint64_t state_data_bytes = 0;    // state bytes of all linear layers
    uint64_t max_kv_pages = 0;        // KV pages that fit when nothing else is allocated
    uint64_t max_states = 0;          // state slots that fit (or state ids that exist) likewise
    uint64_t unusable_bytes = 0;      // budget no allocation can ever use (division remainders)
    uint64_t kv_page_padding() const { return kv_page_bytes - kv_page_data_bytes; }
    uint64_t state_padding() const { return state_slot_bytes - state_data_bytes; }
};

// Byte totals. Identity: kv_bytes + state_bytes + padding_bytes + free_bytes + unusable_bytes
// == budget_bytes. kv_bytes counts whole pages' data; kv_filled_bytes the tokens actually held.
struct PoolStats {
    uint64_t budget_bytes = 0;
    uint64_t kv_pages = 0, kv_tokens = 0, states = 0;
    uint64_t kv_bytes = 0, kv_filled_bytes = 0, state_bytes = 0, padding_bytes = 0;
    uint64_t free_bytes = 0, unusable_bytes = 0;
    // Free bytes a new state / a new KV page could occupy now without moving or evicting anything.
    uint64_t free_for_state_bytes = 0, free_for_kv_bytes = 0;

    // New states the free bytes could hold if they were one run usable by anything, and new states
    // that can actually be placed now.
    uint64_t states_if_contiguous = 0, states_placeable = 0;

    uint64_t kv_unfilled_bytes() const { return kv_bytes - kv_filled_bytes; }
    uint64_t data_bytes() const { return kv_filled_bytes + state_bytes; }
    // Fragmentation as this project defines it: the share of the states the free bytes could hold
    // that cannot be placed without moving or evicting data (the state is the largest unit, so this
    // is the free memory "Can not alloc mamba cache" cannot see). Locked by a static split, holes
    // and a short gap in the unified pool, padding and block rounding in vLLM's. 0 when the free
    // bytes could not hold a state anyway.
    double fragmentation() const {
        return states_if_contiguous ? 1.0 - double(states_placeable) / double(states_if_contiguous) : 0.0;
    }
};

enum class UnitKind : uint8_t { free, kv, kv_unfilled, state, padding, unusable };
const char* unit_kind_name(UnitKind k);

// One stretch of the pool for a pool map. Offsets are in pool order: physical address order for
// the static and unified designs; block order for vLLM, whose block b lives at the same index in
// each of group_size per-layer tensors (its bytes are those slices together).
struct MapUnit {
    uint64_t offset = 0, bytes = 0;
    UnitKind kind = UnitKind::free;
    OwnerId owner = kNoOwner;
    uint32_t ref = kNoRef;  // PageRef (kv, kv_unfilled, padding of a page) or StateRef (state, its padding)
    bool of_state = false;  // ref names a state (else a page)
};

struct PoolOptions {
    bool backing = false;  // allocate `budget` bytes so pages and slots have real storage
};
// Backing storage is refused above this (the page runs in 512 MB of WebAssembly memory).
inline constexpr uint64_t kMaxBackingBytes = 256ull << 20;

class PagePool {
  public:
    virtual ~PagePool() = default;
    PagePool(const PagePool&) = delete;
    PagePool& operator=(const PagePool&) = delete;

    const PoolLayout& layout() const { return layout_; }
    const PoolModel& model() const { return model_; }
    PoolDesign design() const { return layout_.design; }

    // ---- KV pages of a sequence ----
    // Make `owner`'s KV hold `tokens` tokens, allocating pages as needed. All or nothing: on failure
    // nothing changes. Never shrinks (use truncate_kv).
    AllocStatus grow_kv(OwnerId owner, uint64_t tokens);
    // Keep the first `tokens` tokens; pages past them are freed (speculative rollback, eviction).
    AllocStatus truncate_kv(OwnerId owner, uint64_t tokens);
    AllocStatus free_kv(OwnerId owner) { return truncate_kv(owner, 0); }
    // Hand the pages holding the first `tokens` tokens of `from` to `to` (which must hold no KV).
    // `tokens` must be a whole number of pages or all of `from`'s tokens. `from` keeps the rest,
    // renumbered from 0: its KV then starts at token `tokens` of the original sequence.
    AllocStatus transfer_kv(OwnerId from, OwnerId to, uint64_t tokens);
    // The inverse: move all of `from`'s pages to the end of `to`'s KV. `to` must hold a whole number
    // of pages (or nothing), so page i still holds tokens [i * page_tokens, (i + 1) * page_tokens).
    // A prefix cache lends its pages to a running request this way and takes them back with
    // transfer_kv; every page keeps exactly one owner throughout.
    AllocStatus append_kv(OwnerId from, OwnerId to);
    std::span<const PageRef> kv_pages(OwnerId owner) const;
    uint64_t kv_tokens(OwnerId owner) const;

    // ---- state slots ----
    AllocStatus alloc_state(OwnerId owner, StateRef* out);
    AllocStatus free_state(StateRef s);
    AllocStatus transfer_state(StateRef s, OwnerId to);
    std::span<const StateRef> states(OwnerId owner) const;

    // Free everything `owner` holds.
    void release(OwnerId owner);

    // ---- queries ----
    OwnerId page_owner(PageRef p) const { return p < page_owner_.size() ? page_owner_[p] : kNoOwner; }
    OwnerId state_owner(StateRef s) const { return s < state_owner_.size() ? state_owner_[s] : kNoOwner; }
    std::vector<OwnerId> owners() const;        // ascending
    uint64_t owner_bytes(OwnerId owner) const;  // pool bytes held (pages and slots, padding included)
    PoolStats stats() const;
    std::vector<MapUnit> map() const;  // covers [0, budget) in pool order, no gaps, no overlaps
    // Recomputes every invariant from the physical tables: each page and slot has one owner and
    // one place, owners' lists match, pages cover exactly their tokens, the map tiles the budget
    // and its per-kind sums equal stats(); and no owner has ever freed a page the owner table gave
    // to another owner. Empty when consistent, else the first violation.
    std::string audit() const;
    // Free bytes counted from the design's free structures (free lists, holes, the gap between the
    // regions), not as the budget's remainder: with owner_bytes() of every owner and the unusable
    // bytes they tile the budget.
    virtual uint64_t free_list_bytes() const = 0;

    // ---- falsifier hooks (k3cli audit-checks, module 3); a correct run never calls them ----
    // Each damages the pool's tables once, in bounds, so that audit() or a byte recount must notice:
    //   second_owner  the owner table records `victim`'s last page as `other`'s (its lists unchanged);
    //   page_count    the running page count drops by one while `victim` keeps the page (what a
    //                 page freed twice does to the count);
    //   lost_page     a page leaves the free structures and reaches no owner.
    // False (nothing changed) when `victim` holds no page, `other` is no other owner, or no page is free.
    enum class Damage : uint8_t { second_owner, page_count, lost_page };
    bool damage(Damage d, OwnerId victim, OwnerId other);

    // ---- compaction (unified pool; the others never need it) ----
    // Closes holes so free bytes become one contiguous gap. Handles do not change; with backing
    // storage the bytes move with them. Returns bytes moved.
    virtual uint64_t compact() { return 0; }
    uint64_t compactions() const { return compactions_; }
    uint64_t bytes_moved() const { return bytes_moved_; }

    // ---- storage (pools made with backing storage; nullptr otherwise or for a bad handle) ----
    // The storage starts 16-byte aligned; every slice lies at a sum of per-layer sizes from there.
    // Pointers are valid until the next allocating call or compact() (the unified pool moves bytes).
    bool has_storage() const { return !storage_.empty(); }
    // Page `p`, attention layer `layer` (0-based among attention layers): page_tokens rows of
    // kv_bytes_per_token_per_layer bytes, token-major.
    std::byte* kv_data(PageRef p, int layer);
    // Token `token` of `owner`'s KV in attention layer `layer`.
    std::byte* kv_token_data(OwnerId owner, uint64_t token, int layer);
    // State `s`, linear layer `layer`: recurrent state (recurrent_bytes_per_layer), then conv window.
    std::byte* state_data(StateRef s, int layer);
    // Copy one state's bytes into another (a prefix hit's copy-on-write). Metadata pools: no-op.
    AllocStatus copy_state(StateRef from, StateRef to);

  protected:
    PagePool(const PoolModel& m, const PoolLayout& l, size_t page_handles, size_t state_handles,
             const PoolOptions& o);

    // Physical side, one per design. take_* return a fresh handle and place it; give_* unplace it.
    virtual PageRef take_page() = 0;  // kNoRef when there is no room
    virtual void give_page(PageRef p) = 0;
    virtual AllocStatus take_state(StateRef* out) = 0;  // no_state_id / no_state_space when full
    virtual void give_state(StateRef s) = 0;
    // Units in pool order. KV units carry the page and the bytes one token takes in that unit
    // (the base splits them into filled and unfilled); other units carry their kind and ref.
    struct PhysUnit {
        uint64_t offset, bytes;
        UnitKind kind;
        uint32_t ref;
        bool of_state;
        uint64_t bytes_per_token;  // kv units only
    };
    virtual void physical_units(std::vector<PhysUnit>& out) const = 0;
    // Appends a unit, merging it into the previous one when both are free (keeps maps short).
    static void emit(std::vector<PhysUnit>& out, const PhysUnit& u);
    virtual std::string check_physical() const = 0;  // design-specific table consistency
    virtual uint64_t free_for_state() const = 0;
    virtual uint64_t free_for_kv() const = 0;
    // Byte offsets into storage_ (designs that slice layers across tensors override both).
    virtual uint64_t kv_offset(PageRef p, int layer) const = 0;
    virtual uint64_t state_offset(StateRef s, int layer) const = 0;
    // Membership of a free list as a flag per index (linear-time table checks).
    template <class Set>
    static std::vector<uint8_t> flags(const Set& set, size_t n) {
        std::vector<uint8_t> f(n, 0);
        for (auto i : set)
            if (size_t(i) < n) f[size_t(i)] = 1;
        return f;
    }
    void note_move(uint64_t bytes) { bytes_moved_ += bytes; }
    void note_compaction() { ++compactions_; }
    std::byte* storage() { return storage_.data(); }

    PoolModel model_;
    PoolLayout layout_;

  private:
    struct OwnerRecord {
        std::vector<PageRef> pages;
        uint64_t tokens = 0;
        std::vector<StateRef> states;
    };
    OwnerRecord* find(OwnerId o);
    const OwnerRecord* find(OwnerId o) const;
    void drop_if_empty(OwnerId o);
    // audit() steps 1 and 3 (step 2 is the design's check_physical): each returns "" or what is wrong.
    std::string audit_owner_lists() const;
    // The map tiles [0, budget) and names every allocated handle; adds its bytes per UnitKind to by_kind.
    std::string audit_map_tiling(std::array<uint64_t, 6>& by_kind) const;

    std::map<OwnerId, OwnerRecord> owners_;  // ordered: iteration never depends on hashing
    std::vector<OwnerId> page_owner_, state_owner_;
    // The first page an owner freed that the owner table gave to someone else: a fault that a sampled
    // audit would miss once the page is free again, so audit() reports it from then on.
    std::string freed_foreign_page_;
    uint64_t pages_ = 0, tokens_ = 0, states_ = 0;
    uint64_t compactions_ = 0, bytes_moved_ = 0;
    std::vector<std::byte> storage_;
};

// More handles than this are refused (the tables are per handle): raise page_tokens or lower the budget.
inline constexpr uint64_t kMaxPoolHandles = 1ull << 22;
// Empty when a pool of this model, budget and page size can be made; otherwise why not.
std::string check_pool_model(const PoolModel& m, uint64_t budget, uint32_t page_tokens, const PoolOptions& o);
// The layout of a design whose pages and slots hold exactly their data (static split, unified):
// sizes set, counts left to the design.
PoolLayout exact_fit_layout(PoolDesign d, const PoolModel& m, uint64_t budget, uint32_t page_tokens);

// A pool or the reason it could not be made (bad sizes, backing storage over the limit).
struct PoolResult {
    std::unique_ptr<PagePool> pool;
    std::string error;
};

// (a) Static split. The state pool gets budget * r / (1 + r) (SGLang's mamba_full_memory_ratio r,
// default 0.9: 47 %), rounded down to whole slots, unless `state_slots` fixes the count; the KV pool
// gets the rest in whole pages.
struct StaticSplitConfig {
    uint64_t budget_bytes = 0;
    uint32_t page_tokens = 64;
    double state_ratio = 0.9;
    uint64_t state_slots = 0;  // 0 = from the ratio
};
PoolResult make_static_pool(const PoolModel& m, const StaticSplitConfig& c, const PoolOptions& o = {});
// The bytes the static split gives its state pool (whole slots are cut from them), without making it.
uint64_t static_state_budget(const PoolModel& m, const StaticSplitConfig& c);

// (b) vLLM hybrid allocator: see hybrid_blocks.h for how the block size is derived.
struct HybridPagesConfig {
    uint64_t budget_bytes = 0;
    uint32_t kernel_multiple = 16;   // attention backend's block-size multiple (FlashAttention: 16)
    uint32_t min_block_tokens = 16;  // the user's --block-size; raised when too small for a state
};
PoolResult make_hybrid_pool(const PoolModel& m, const HybridPagesConfig& c, const PoolOptions& o = {});

// (c) Unified byte pool with two ends and compaction.
struct UnifiedConfig {
    uint64_t budget_bytes = 0;
    uint32_t page_tokens = 64;
    uint64_t max_state_ids = 0;  // 0 = as many as the whole budget could hold
    // Compact by itself when an allocation fails only for want of contiguous bytes.
    bool auto_compact = true;
};
PoolResult make_unified_pool(const PoolModel& m, const UnifiedConfig& c, const PoolOptions& o = {});

}  // namespace k3
