// (c) Unified byte pool: SGLang's --enable-unified-memory (PR #29678, MultiEndedAllocator;
// reference/serving.md §1.1). One buffer; KV page envelopes (all attention layers of one page,
// page-major as #29533) grow from the bottom, state slots from the top, and the free gap between
// them moves with the workload. Freed pages and slots below the region tops are holes that only
// their own kind can reuse; compaction moves the region tops' occupants into the holes, rewriting
// the virtual -> physical tables so handles never change, and the holes join the shared gap.
//
// A state allocation needs two resources: a free state id AND state_bytes of contiguous room
// (a state hole, or the gap). With ids free and the gap taken by KV, it fails although the pool
// shows free capacity: SGLang's "Can not alloc mamba cache" (#34441). The fix (#36713) evicts KV
// to make holes and compacts; the caller evicts, this pool compacts (auto_compact or compact()).
#include <cstring>
#include <set>

#include "core/memory/pool.h"

namespace k3 {

namespace {

class UnifiedPool final : public PagePool {
  public:
    UnifiedPool(const PoolModel& m, const PoolLayout& l, bool auto_compact, const PoolOptions& o)
        : PagePool(m, l, size_t(l.max_kv_pages), size_t(l.max_states), o),
          auto_compact_(auto_compact),
          E_(l.kv_page_bytes),
          S_(l.state_slot_bytes),
          env_page_(size_t(l.max_kv_pages), kNoRef),
          slot_state_(size_t(l.budget_bytes / l.state_slot_bytes), kNoRef),
          page_env_(size_t(l.max_kv_pages), kNoRef),
          state_slot_(size_t(l.max_states), kNoRef) {
        for (uint32_t p = 0; p < l.max_kv_pages; ++p) free_page_ids_.insert(free_page_ids_.end(), p);
        for (uint32_t s = 0; s < l.max_states; ++s) free_state_ids_.insert(free_state_ids_.end(), s);
    }

    uint64_t compact() override {
        const uint64_t moved = compact_kv() + compact_states();
        if (moved) note_compaction();
        return moved;
    }

  private:
    uint64_t gap() const { return layout_.budget_bytes - kv_top_ * E_ - st_top_ * S_; }
    uint64_t env_offset(uint64_t env) const { return env * E_; }
    uint64_t slot_offset(uint64_t slot) const { return layout_.budget_bytes - (slot + 1) * S_; }

    // Move the occupant of the region's top into its lowest hole until no holes remain.
    uint64_t compact_kv() {
        uint64_t moved = 0;
        while (!kv_holes_.empty()) {
            const uint32_t h = *kv_holes_.begin();
            const uint32_t t = uint32_t(kv_top_ - 1);  // occupied: tops never end in a hole
            const PageRef p = env_page_[t];
            if (has_storage()) std::memcpy(storage() + env_offset(h), storage() + env_offset(t), size_t(E_));
            env_page_[h] = p;
            page_env_[p] = h;
            env_page_[t] = kNoRef;
            kv_holes_.erase(kv_holes_.begin());
            --kv_top_;
            trim_kv();
            moved += E_;
        }
        note_move(moved);
        return moved;
    }
    uint64_t compact_states() {
        uint64_t moved = 0;
        while (!st_holes_.empty()) {
            const uint32_t h = *st_holes_.begin();
            const uint32_t t = uint32_t(st_top_ - 1);
            const StateRef s = slot_state_[t];
            if (has_storage())
                std::memcpy(storage() + slot_offset(h), storage() + slot_offset(t), size_t(S_));
            slot_state_[h] = s;
            state_slot_[s] = h;
            slot_state_[t] = kNoRef;
            st_holes_.erase(st_holes_.begin());
            --st_top_;
            trim_states();
            moved += S_;
        }
        note_move(moved);
        return moved;
    }
    // A region never ends in a hole: trailing holes go back to the gap at once.
    void trim_kv() {
        while (kv_top_ > 0 && env_page_[kv_top_ - 1] == kNoRef) kv_holes_.erase(uint32_t(--kv_top_));
    }
    void trim_states() {
        while (st_top_ > 0 && slot_state_[st_top_ - 1] == kNoRef) st_holes_.erase(uint32_t(--st_top_));
    }

    PageRef take_page() override {
        if (free_page_ids_.empty()) return kNoRef;
        uint32_t env;
        if (!kv_holes_.empty()) {
            env = *kv_holes_.begin();
            kv_holes_.erase(kv_holes_.begin());
        } else {
            if (gap() < E_ && auto_compact_ && gap() + st_holes_.size() * S_ >= E_) {
                compact_states();
                note_compaction();
            }
            if (gap() < E_) return kNoRef;
            env = uint32_t(kv_top_++);
        }
        const PageRef p = *free_page_ids_.begin();
        free_page_ids_.erase(free_page_ids_.begin());
        env_page_[env] = p;
        page_env_[p] = env;
        return p;
    }
    void give_page(PageRef p) override {
        const uint32_t env = page_env_[p];
        env_page_[env] = kNoRef;
        page_env_[p] = kNoRef;
        free_page_ids_.insert(p);
        kv_holes_.insert(env);
        trim_kv();
    }
    AllocStatus take_state(StateRef* out) override {
        if (free_state_ids_.empty()) return AllocStatus::no_state_id;
        uint32_t slot;
        if (!st_holes_.empty()) {
            slot = *st_holes_.begin();
            st_holes_.erase(st_holes_.begin());
        } else {
            if (gap() < S_ && auto_compact_ && gap() + kv_holes_.size() * E_ >= S_) {
                compact_kv();
                note_compaction();
            }
            if (gap() < S_) return AllocStatus::no_state_space;
            slot = uint32_t(st_top_++);
        }
        const StateRef s = *free_state_ids_.begin();
        free_state_ids_.erase(free_state_ids_.begin());
        slot_state_[slot] = s;
        state_slot_[s] = slot;
        *out = s;
        return AllocStatus::ok;
    }
    void give_state(StateRef s) override {
        const uint32_t slot = state_slot_[s];
        slot_state_[slot] = kNoRef;
        state_slot_[s] = kNoRef;
        free_state_ids_.insert(s);
        st_holes_.insert(slot);
        trim_states();
    }

    void physical_units(std::vector<PhysUnit>& out) const override {
        for (uint64_t e = 0; e < kv_top_; ++e) {
            const PageRef p = env_page_[e];
            emit(out, {env_offset(e), E_, p == kNoRef ? UnitKind::free : UnitKind::kv, p, false,
                       model_.kv_bytes_per_token()});
        }
        emit(out, {kv_top_ * E_, gap(), UnitKind::free, kNoRef, false, 0});
        for (uint64_t j = st_top_; j-- > 0;) {
            const StateRef s = slot_state_[j];
            emit(out,
                 {slot_offset(j), S_, s == kNoRef ? UnitKind::free : UnitKind::state, s, s != kNoRef, 0});
        }
    }

    std::string check_physical() const override {
        if (kv_top_ * E_ + st_top_ * S_ > layout_.budget_bytes) return "unified pool: regions overlap";
        if (kv_top_ > 0 && env_page_[kv_top_ - 1] == kNoRef) return "unified pool: KV region ends in a hole";
        if (st_top_ > 0 && slot_state_[st_top_ - 1] == kNoRef)
            return "unified pool: state region ends in a hole";
        const auto kv_hole = flags(kv_holes_, env_page_.size()),
                   st_hole = flags(st_holes_, slot_state_.size());
        const auto free_page = flags(free_page_ids_, page_env_.size());
        const auto free_state = flags(free_state_ids_, state_slot_.size());
        for (uint64_t e = 0; e < env_page_.size(); ++e) {
            const PageRef p = env_page_[e];
            const bool hole = kv_hole[e];
            if (e >= kv_top_ ? (p != kNoRef || hole) : ((p == kNoRef) != hole))
                return "unified pool: envelope " + std::to_string(e) + " inconsistent";
            if (p != kNoRef && (page_env_[p] != e || page_owner(p) == kNoOwner))
                return "unified pool: envelope " + std::to_string(e) + " and page " + std::to_string(p) +
                       " disagree";
        }
        for (uint32_t p = 0; p < page_env_.size(); ++p) {
            const bool owned = page_owner(p) != kNoOwner;
            if (owned == bool(free_page[p])) return "unified pool: page id " + std::to_string(p) + " state";
            if (owned != (page_env_[p] != kNoRef))
                return "unified pool: page " + std::to_string(p) + " unplaced";
        }
        for (uint64_t j = 0; j < slot_state_.size(); ++j) {
            const StateRef s = slot_state_[j];
            const bool hole = st_hole[j];
            if (j >= st_top_ ? (s != kNoRef || hole) : ((s == kNoRef) != hole))
                return "unified pool: state slot " + std::to_string(j) + " inconsistent";
            if (s != kNoRef && (state_slot_[s] != j || state_owner(s) == kNoOwner))
                return "unified pool: slot " + std::to_string(j) + " and state " + std::to_string(s) +
                       " disagree";
        }
        for (uint32_t s = 0; s < state_slot_.size(); ++s) {
            const bool owned = state_owner(s) != kNoOwner;
            if (owned == bool(free_state[s])) return "unified pool: state id " + std::to_string(s) + " state";
            if (owned != (state_slot_[s] != kNoRef))
                return "unified pool: state " + std::to_string(s) + " unplaced";
        }
        return {};
    }
    uint64_t free_for_state() const override {
        if (free_state_ids_.empty()) return 0;
        const uint64_t slots = st_holes_.size() + gap() / S_;
        return std::min<uint64_t>(slots, free_state_ids_.size()) * S_;
    }
    uint64_t free_for_kv() const override { return (kv_holes_.size() + gap() / E_) * E_; }

  public:
    uint64_t free_list_bytes() const override {
        return gap() + uint64_t(kv_holes_.size()) * E_ + uint64_t(st_holes_.size()) * S_;
    }

  private:
    uint64_t kv_offset(PageRef p, int layer) const override {
        return env_offset(page_env_[p]) +
               uint64_t(layer) * layout_.page_tokens * model_.kv_bytes_per_token_per_layer;
    }
    uint64_t state_offset(StateRef s, int layer) const override {
        return slot_offset(state_slot_[s]) + uint64_t(layer) * model_.state_bytes_per_layer;
    }

    bool auto_compact_;
    uint64_t E_, S_;
    uint64_t kv_top_ = 0, st_top_ = 0;             // envelopes / slots in each region, holes included
    std::vector<uint32_t> env_page_, slot_state_;  // physical -> virtual (kNoRef = hole or beyond top)
    std::vector<uint32_t> page_env_, state_slot_;  // virtual -> physical
    std::set<uint32_t> kv_holes_, st_holes_;       // holes below each region's top
    std::set<uint32_t> free_page_ids_, free_state_ids_;
};

}  // namespace

PoolResult make_unified_pool(const PoolModel& m, const UnifiedConfig& c, const PoolOptions& o) {
    if (std::string e = check_pool_model(m, c.budget_bytes, c.page_tokens, o); !e.empty())
        return {nullptr, e};
    PoolLayout l = exact_fit_layout(PoolDesign::unified, m, c.budget_bytes, c.page_tokens);
    l.max_kv_pages = c.budget_bytes / l.kv_page_bytes;
    const uint64_t fit = c.budget_bytes / l.state_slot_bytes;
    l.max_states = c.max_state_ids ? c.max_state_ids : fit;
    l.unusable_bytes = 0;  // the gap absorbs any remainder; it is free until it is too small
    if (l.max_kv_pages == 0 || fit == 0)
        return {nullptr, "budget too small for one KV page and one state slot"};
    if (l.max_kv_pages > kMaxPoolHandles || l.max_states > kMaxPoolHandles)
        return {nullptr, std::to_string(l.max_kv_pages) + " KV pages exceed the limit of " +
                             std::to_string(kMaxPoolHandles) + ": raise page_tokens or lower the budget"};
    return {std::unique_ptr<PagePool>(new UnifiedPool(m, l, c.auto_compact, o)), {}};
}

}  // namespace k3
