// The owner bookkeeping, byte accounting and audit shared by the three pool designs.
#include "core/memory/pool.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/base/numfmt.h"

namespace k3 {

namespace {

// Audit step 3: the map's bytes per kind (indexed by UnitKind) against the running totals `s`, and the
// totals against the budget. Empty when they agree.
std::string map_sums_mismatch(const std::array<uint64_t, 6>& by_kind, const PoolStats& s) {
    auto mismatch = [](const char* what, uint64_t a, uint64_t b) {
        return std::string(what) + ": map " + format_grouped(double(a)) + " B, totals " +
               format_grouped(double(b)) + " B";
    };
    if (by_kind[size_t(UnitKind::kv)] != s.kv_filled_bytes)
        return mismatch("filled KV", by_kind[1], s.kv_filled_bytes);
    if (by_kind[size_t(UnitKind::kv_unfilled)] != s.kv_unfilled_bytes())
        return mismatch("unfilled KV", by_kind[2], s.kv_unfilled_bytes());
    if (by_kind[size_t(UnitKind::state)] != s.state_bytes)
        return mismatch("state", by_kind[3], s.state_bytes);
    if (by_kind[size_t(UnitKind::padding)] != s.padding_bytes)
        return mismatch("padding", by_kind[4], s.padding_bytes);
    if (by_kind[size_t(UnitKind::free)] != s.free_bytes) return mismatch("free", by_kind[0], s.free_bytes);
    if (by_kind[size_t(UnitKind::unusable)] != s.unusable_bytes)
        return mismatch("unusable", by_kind[5], s.unusable_bytes);
    if (s.kv_bytes + s.state_bytes + s.padding_bytes + s.free_bytes + s.unusable_bytes != s.budget_bytes)
        return "bytes do not add up to the budget";
    if (s.free_for_state_bytes > s.free_bytes || s.free_for_kv_bytes > s.free_bytes)
        return "usable free > free";
    return {};
}

}  // namespace

const char* pool_design_id(PoolDesign d) {
    switch (d) {
        case PoolDesign::static_split: return "static";
        case PoolDesign::hybrid_pages: return "vllm";
        case PoolDesign::unified: return "unified";
    }
    return "?";
}

const char* pool_design_title(PoolDesign d) {
    switch (d) {
        case PoolDesign::static_split: return "static split (SGLang default)";
        case PoolDesign::hybrid_pages: return "one page size (vLLM hybrid allocator)";
        case PoolDesign::unified: return "unified two-ended pool (SGLang --enable-unified-memory)";
    }
    return "?";
}

const char* alloc_status_name(AllocStatus s) {
    switch (s) {
        case AllocStatus::ok: return "ok";
        case AllocStatus::no_kv_page: return "no KV page";
        case AllocStatus::no_state_id: return "no state id";
        case AllocStatus::no_state_space: return "no state space";
        case AllocStatus::bad_request: return "bad request";
    }
    return "?";
}

const char* unit_kind_name(UnitKind k) {
    switch (k) {
        case UnitKind::free: return "free";
        case UnitKind::kv: return "KV";
        case UnitKind::kv_unfilled: return "KV (unfilled)";
        case UnitKind::state: return "state";
        case UnitKind::padding: return "padding";
        case UnitKind::unusable: return "unusable";
    }
    return "?";
}

PagePool::PagePool(const PoolModel& m, const PoolLayout& l, size_t page_handles, size_t state_handles,
                   const PoolOptions& o)
    : model_(m), layout_(l), page_owner_(page_handles, kNoOwner), state_owner_(state_handles, kNoOwner) {
    // The factories refuse backing storage above kMaxBackingBytes before getting here.
    if (o.backing) storage_.assign(size_t(l.budget_bytes), std::byte{0});
}

PagePool::OwnerRecord* PagePool::find(OwnerId o) {
    auto it = owners_.find(o);
    return it == owners_.end() ? nullptr : &it->second;
}

const PagePool::OwnerRecord* PagePool::find(OwnerId o) const {
    auto it = owners_.find(o);
    return it == owners_.end() ? nullptr : &it->second;
}

void PagePool::drop_if_empty(OwnerId o) {
    auto it = owners_.find(o);
    if (it != owners_.end() && it->second.pages.empty() && it->second.states.empty() &&
        it->second.tokens == 0)
        owners_.erase(it);
}

// ---- KV ------------------------------------------------------------------------------------------

AllocStatus PagePool::grow_kv(OwnerId owner, uint64_t tokens) {
    if (owner == kNoOwner) return AllocStatus::bad_request;
    const uint64_t pt = layout_.page_tokens;
    const uint64_t need = (tokens + pt - 1) / pt;
    OwnerRecord* rec = find(owner);
    const uint64_t have_tokens = rec ? rec->tokens : 0;
    if (tokens <= have_tokens) return AllocStatus::ok;
    const uint64_t have = rec ? rec->pages.size() : 0;
    std::vector<PageRef> fresh;
    for (uint64_t i = have; i < need; ++i) {
        const PageRef p = take_page();
        if (p == kNoRef) {
            for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) give_page(*it);
            return AllocStatus::no_kv_page;
        }
        fresh.push_back(p);
    }
    OwnerRecord& r = owners_[owner];
    for (PageRef p : fresh) {
        page_owner_[p] = owner;
        r.pages.push_back(p);
    }
    pages_ += fresh.size();
    tokens_ += tokens - r.tokens;
    r.tokens = tokens;
    return AllocStatus::ok;
}

AllocStatus PagePool::truncate_kv(OwnerId owner, uint64_t tokens) {
    OwnerRecord* r = find(owner);
    if (!r)
        return owner == kNoOwner ? AllocStatus::bad_request
                                 : (tokens == 0 ? AllocStatus::ok : AllocStatus::bad_request);
    if (tokens > r->tokens) return AllocStatus::bad_request;
    const uint64_t pt = layout_.page_tokens;
    const uint64_t keep = (tokens + pt - 1) / pt;
    while (r->pages.size() > keep) {
        const PageRef p = r->pages.back();
        r->pages.pop_back();
        if (page_owner_[p] != owner && freed_foreign_page_.empty())
            freed_foreign_page_ = "owner " + std::to_string(owner) + " freed page " + std::to_string(p) +
                                  ", which the owner table gave to owner " + std::to_string(page_owner_[p]);
        page_owner_[p] = kNoOwner;
        give_page(p);
        --pages_;
    }
    tokens_ -= r->tokens - tokens;
    r->tokens = tokens;
    drop_if_empty(owner);
    return AllocStatus::ok;
}

AllocStatus PagePool::transfer_kv(OwnerId from, OwnerId to, uint64_t tokens) {
    if (from == kNoOwner || to == kNoOwner || from == to) return AllocStatus::bad_request;
    if (const OwnerRecord* t = find(to); t && (t->tokens || !t->pages.empty()))
        return AllocStatus::bad_request;
    if (tokens == 0) return AllocStatus::ok;
    OwnerRecord* f = find(from);
    if (!f || tokens > f->tokens) return AllocStatus::bad_request;
    const uint64_t pt = layout_.page_tokens;
    if (tokens % pt != 0 && tokens != f->tokens) return AllocStatus::bad_request;  // would split a page
    const uint64_t n = (tokens + pt - 1) / pt;
    std::vector<PageRef> moved(f->pages.begin(), f->pages.begin() + std::ptrdiff_t(n));
    f->pages.erase(f->pages.begin(), f->pages.begin() + std::ptrdiff_t(n));
    f->tokens -= tokens;
    OwnerRecord& t = owners_[to];  // may rehash nothing: std::map keeps `f` valid
    for (PageRef p : moved) page_owner_[p] = to;
    t.pages = std::move(moved);
    t.tokens = tokens;
    drop_if_empty(from);
    return AllocStatus::ok;
}

AllocStatus PagePool::append_kv(OwnerId from, OwnerId to) {
    if (from == kNoOwner || to == kNoOwner || from == to) return AllocStatus::bad_request;
    OwnerRecord* f = find(from);
    if (!f || f->pages.empty()) return AllocStatus::ok;
    const uint64_t pt = layout_.page_tokens;
    if (const OwnerRecord* t = find(to); t && t->tokens % pt != 0) return AllocStatus::bad_request;
    std::vector<PageRef> moved = std::move(f->pages);
    const uint64_t tokens = f->tokens;
    f->pages.clear();
    f->tokens = 0;
    drop_if_empty(from);
    OwnerRecord& t = owners_[to];
    for (PageRef p : moved) page_owner_[p] = to;
    t.pages.insert(t.pages.end(), moved.begin(), moved.end());
    t.tokens += tokens;
    return AllocStatus::ok;
}

std::span<const PageRef> PagePool::kv_pages(OwnerId owner) const {
    const OwnerRecord* r = find(owner);
    return r ? std::span<const PageRef>(r->pages) : std::span<const PageRef>();
}

uint64_t PagePool::kv_tokens(OwnerId owner) const {
    const OwnerRecord* r = find(owner);
    return r ? r->tokens : 0;
}

// ---- states --------------------------------------------------------------------------------------

AllocStatus PagePool::alloc_state(OwnerId owner, StateRef* out) {
    if (owner == kNoOwner || !out) return AllocStatus::bad_request;
    StateRef s = kNoRef;
    const AllocStatus st = take_state(&s);
    if (st != AllocStatus::ok) return st;
    state_owner_[s] = owner;
    owners_[owner].states.push_back(s);
    ++states_;
    *out = s;
    return AllocStatus::ok;
}

AllocStatus PagePool::free_state(StateRef s) {
    const OwnerId o = state_owner(s);
    if (o == kNoOwner) return AllocStatus::bad_request;
    auto& v = owners_[o].states;
    v.erase(std::find(v.begin(), v.end(), s));
    state_owner_[s] = kNoOwner;
    give_state(s);
    --states_;
    drop_if_empty(o);
    return AllocStatus::ok;
}

AllocStatus PagePool::transfer_state(StateRef s, OwnerId to) {
    const OwnerId o = state_owner(s);
    if (o == kNoOwner || to == kNoOwner) return AllocStatus::bad_request;
    if (o == to) return AllocStatus::ok;
    auto& v = owners_[o].states;
    v.erase(std::find(v.begin(), v.end(), s));
    owners_[to].states.push_back(s);
    state_owner_[s] = to;
    drop_if_empty(o);
    return AllocStatus::ok;
}

std::span<const StateRef> PagePool::states(OwnerId owner) const {
    const OwnerRecord* r = find(owner);
    return r ? std::span<const StateRef>(r->states) : std::span<const StateRef>();
}

void PagePool::release(OwnerId owner) {
    const OwnerRecord* r = find(owner);
    if (!r) return;
    const std::vector<StateRef> ss = r->states;  // copy: free_state edits the record
    for (StateRef s : ss) free_state(s);
    truncate_kv(owner, 0);
}

// ---- queries -------------------------------------------------------------------------------------

std::vector<OwnerId> PagePool::owners() const {
    std::vector<OwnerId> v;
    v.reserve(owners_.size());
    for (const auto& [o, r] : owners_) v.push_back(o);
    return v;
}

uint64_t PagePool::owner_bytes(OwnerId owner) const {
    const OwnerRecord* r = find(owner);
    if (!r) return 0;
    return uint64_t(r->pages.size()) * layout_.kv_page_bytes +
           uint64_t(r->states.size()) * layout_.state_slot_bytes;
}

PoolStats PagePool::stats() const {
    PoolStats s;
    const PoolLayout& l = layout_;
    s.budget_bytes = l.budget_bytes;
    s.kv_pages = pages_;
    s.kv_tokens = tokens_;
    s.states = states_;
    s.kv_bytes = pages_ * l.kv_page_data_bytes;
    s.kv_filled_bytes = tokens_ * model_.kv_bytes_per_token();
    s.state_bytes = states_ * l.state_data_bytes;
    s.padding_bytes = pages_ * l.kv_page_padding() + states_ * l.state_padding();
    s.unusable_bytes = l.unusable_bytes;
    s.free_bytes =
        l.budget_bytes - l.unusable_bytes - pages_ * l.kv_page_bytes - states_ * l.state_slot_bytes;
    s.free_for_state_bytes = free_for_state();
    s.free_for_kv_bytes = free_for_kv();
    s.states_if_contiguous = model_.state_bytes() ? s.free_bytes / model_.state_bytes() : 0;
    s.states_placeable = l.state_slot_bytes ? s.free_for_state_bytes / l.state_slot_bytes : 0;
    return s;
}

void PagePool::emit(std::vector<PhysUnit>& out, const PhysUnit& u) {
    if (u.bytes == 0) return;
    if (u.kind == UnitKind::free && !out.empty() && out.back().kind == UnitKind::free &&
        out.back().offset + out.back().bytes == u.offset) {
        out.back().bytes += u.bytes;
        return;
    }
    out.push_back(u);
}

std::vector<MapUnit> PagePool::map() const {
    std::vector<PhysUnit> phys;
    physical_units(phys);
    std::vector<MapUnit> out;
    out.reserve(phys.size() + phys.size() / 2);
    const uint64_t pt = layout_.page_tokens;
    // Tokens each page holds: page i of its owner's list covers [i*pt, (i+1)*pt).
    std::vector<uint64_t> page_fill(page_owner_.size(), 0);
    for (const auto& [o, r] : owners_)
        for (size_t i = 0; i < r.pages.size(); ++i) page_fill[r.pages[i]] = std::min(pt, r.tokens - i * pt);
    for (const PhysUnit& u : phys) {
        MapUnit m{u.offset, u.bytes, u.kind, kNoOwner, u.ref, u.of_state};
        if (u.ref != kNoRef) m.owner = u.of_state ? state_owner(u.ref) : page_owner(u.ref);
        if (u.kind != UnitKind::kv) {
            out.push_back(m);
            continue;
        }
        const uint64_t filled_tokens = u.ref < page_fill.size() ? page_fill[u.ref] : 0;
        const uint64_t filled = std::min(u.bytes, filled_tokens * u.bytes_per_token);
        if (filled) out.push_back({u.offset, filled, UnitKind::kv, m.owner, u.ref, false});
        if (u.bytes > filled)
            out.push_back(
                {u.offset + filled, u.bytes - filled, UnitKind::kv_unfilled, m.owner, u.ref, false});
    }
    return out;
}

std::string PagePool::audit() const {
    if (!freed_foreign_page_.empty()) return freed_foreign_page_;
    // 1. Owner lists against the per-handle owner tables: every handle listed once, by its owner.
    if (std::string e = audit_owner_lists(); !e.empty()) return e;
    // 2. The design's own tables (free lists, virtual -> physical maps).
    if (std::string e = check_physical(); !e.empty()) return e;
    // 3. The map tiles [0, budget) and its per-kind sums equal the running totals; every allocated
    // handle appears in it.
    std::array<uint64_t, 6> by_kind = {0, 0, 0, 0, 0, 0};
    if (std::string e = audit_map_tiling(by_kind); !e.empty()) return e;
    return map_sums_mismatch(by_kind, stats());
}

std::string PagePool::audit_owner_lists() const {
    const uint64_t pt = layout_.page_tokens;
    std::vector<uint8_t> seen_page(page_owner_.size(), 0), seen_state(state_owner_.size(), 0);
    uint64_t pages = 0, tokens = 0, states = 0;
    for (const auto& [o, r] : owners_) {
        if (o == kNoOwner) return "owner 0 holds memory";
        if (r.pages.empty() && r.states.empty() && r.tokens == 0)
            return "empty owner record " + std::to_string(o);
        if (r.pages.size() != (r.tokens + pt - 1) / pt)
            return "owner " + std::to_string(o) + " has " + std::to_string(r.pages.size()) + " pages for " +
                   std::to_string(r.tokens) + " tokens";
        for (PageRef p : r.pages) {
            if (p >= page_owner_.size()) return "page handle out of range";
            if (seen_page[p]++) return "page " + std::to_string(p) + " listed twice";
            if (page_owner_[p] != o) return "page " + std::to_string(p) + " listed by a non-owner";
        }
        for (StateRef s : r.states) {
            if (s >= state_owner_.size()) return "state handle out of range";
            if (seen_state[s]++) return "state " + std::to_string(s) + " listed twice";
            if (state_owner_[s] != o) return "state " + std::to_string(s) + " listed by a non-owner";
        }
        pages += r.pages.size();
        tokens += r.tokens;
        states += r.states.size();
    }
    for (size_t p = 0; p < page_owner_.size(); ++p)
        if (page_owner_[p] != kNoOwner && !seen_page[p])
            return "page " + std::to_string(p) + " owned but unlisted";
    for (size_t s = 0; s < state_owner_.size(); ++s)
        if (state_owner_[s] != kNoOwner && !seen_state[s])
            return "state " + std::to_string(s) + " owned but unlisted";
    if (pages != pages_ || tokens != tokens_ || states != states_) return "running totals drifted";
    return {};
}

std::string PagePool::audit_map_tiling(std::array<uint64_t, 6>& by_kind) const {
    const std::vector<MapUnit> m = map();
    uint64_t at = 0;
    // Each page's data appears once per slice, so mark handles rather than count units.
    std::vector<uint8_t> mapped_page(page_owner_.size(), 0), mapped_state(state_owner_.size(), 0);
    for (const MapUnit& u : m) {
        if (u.offset != at) return "map gap or overlap at byte " + std::to_string(at);
        if (u.bytes == 0) return "empty map unit at byte " + std::to_string(at);
        at += u.bytes;
        by_kind[size_t(u.kind)] += u.bytes;
        if (u.ref == kNoRef) {
            if (u.kind != UnitKind::free && u.kind != UnitKind::unusable && u.kind != UnitKind::padding)
                return "allocated unit without a handle at byte " + std::to_string(u.offset);
            continue;
        }
        if (u.owner == kNoOwner) return "unit of a free handle at byte " + std::to_string(u.offset);
        (u.of_state ? mapped_state[u.ref] : mapped_page[u.ref]) = 1;
    }
    if (at != layout_.budget_bytes)
        return "map covers " + std::to_string(at) + " of " + std::to_string(layout_.budget_bytes) + " B";
    for (size_t p = 0; p < page_owner_.size(); ++p)
        if ((page_owner_[p] != kNoOwner) != bool(mapped_page[p]))
            return "page " + std::to_string(p) + " missing from the map";
    for (size_t s = 0; s < state_owner_.size(); ++s)
        if ((state_owner_[s] != kNoOwner) != bool(mapped_state[s]))
            return "state " + std::to_string(s) + " missing from the map";
    return {};
}

bool PagePool::damage(Damage d, OwnerId victim, OwnerId other) {
    const OwnerRecord* r = find(victim);
    if (d == Damage::lost_page) return take_page() != kNoRef;  // placed, but listed nowhere
    if (!r || r->pages.empty()) return false;
    if (d == Damage::page_count) {
        --pages_;
        return true;
    }
    if (other == kNoOwner || other == victim) return false;
    page_owner_[r->pages.back()] = other;
    return true;
}

// ---- storage -------------------------------------------------------------------------------------

std::byte* PagePool::kv_data(PageRef p, int layer) {
    if (storage_.empty() || page_owner(p) == kNoOwner || layer < 0 || layer >= model_.attention_layers)
        return nullptr;
    return storage_.data() + kv_offset(p, layer);
}

std::byte* PagePool::kv_token_data(OwnerId owner, uint64_t token, int layer) {
    const OwnerRecord* r = find(owner);
    if (!r || token >= r->tokens) return nullptr;
    std::byte* page = kv_data(r->pages[size_t(token / layout_.page_tokens)], layer);
    return page ? page + (token % layout_.page_tokens) * model_.kv_bytes_per_token_per_layer : nullptr;
}

std::byte* PagePool::state_data(StateRef s, int layer) {
    if (storage_.empty() || state_owner(s) == kNoOwner || layer < 0 || layer >= model_.linear_layers)
        return nullptr;
    return storage_.data() + state_offset(s, layer);
}

AllocStatus PagePool::copy_state(StateRef from, StateRef to) {
    if (state_owner(from) == kNoOwner || state_owner(to) == kNoOwner) return AllocStatus::bad_request;
    if (storage_.empty() || from == to) return AllocStatus::ok;
    for (int l = 0; l < model_.linear_layers; ++l)
        std::memcpy(storage_.data() + state_offset(to, l), storage_.data() + state_offset(from, l),
                    size_t(model_.state_bytes_per_layer));
    return AllocStatus::ok;
}

}  // namespace k3
