// (a) Static split: SGLang's default layout (reference/serving.md §1.1). A MambaPool of state slots
// sized by --mamba-full-memory-ratio r (the state pool gets r / (1 + r) of the budget) and a
// separate KV pool of pages for the attention layers. Neither can lend to the other.
//
// Layout of backing storage: state slots first (slot-major, layer by layer inside a slot), then KV
// pages (page-major: one page holds every attention layer's rows, as SGLang's page-major layout
// #29533), then the remainder no whole slot or page fits in.
#include <set>

#include "core/base/numfmt.h"
#include "core/memory/pool.h"

namespace k3 {

namespace {

class StaticPool final : public PagePool {
  public:
    StaticPool(const PoolModel& m, const PoolLayout& l, uint64_t n_states, const PoolOptions& o)
        : PagePool(m, l, size_t(l.max_kv_pages), size_t(n_states), o), n_states_(n_states) {
        for (uint32_t i = 0; i < l.max_kv_pages; ++i) free_pages_.insert(free_pages_.end(), i);
        for (uint32_t i = 0; i < n_states; ++i) free_states_.insert(free_states_.end(), i);
    }

  private:
    PageRef take_page() override {
        if (free_pages_.empty()) return kNoRef;
        const PageRef p = *free_pages_.begin();
        free_pages_.erase(free_pages_.begin());
        return p;
    }
    void give_page(PageRef p) override { free_pages_.insert(p); }
    AllocStatus take_state(StateRef* out) override {
        if (free_states_.empty()) return AllocStatus::no_state_id;
        *out = *free_states_.begin();
        free_states_.erase(free_states_.begin());
        return AllocStatus::ok;
    }
    void give_state(StateRef s) override { free_states_.insert(s); }

    uint64_t kv_base() const { return n_states_ * layout_.state_slot_bytes; }

    void physical_units(std::vector<PhysUnit>& out) const override {
        const uint64_t S = layout_.state_slot_bytes, E = layout_.kv_page_bytes;
        for (uint32_t s = 0; s < n_states_; ++s) {
            const bool used = state_owner(s) != kNoOwner;
            emit(out, {s * S, S, used ? UnitKind::state : UnitKind::free, used ? s : kNoRef, used, 0});
        }
        for (uint32_t p = 0; p < layout_.max_kv_pages; ++p) {
            const bool used = page_owner(p) != kNoOwner;
            emit(out, {kv_base() + p * E, E, used ? UnitKind::kv : UnitKind::free, used ? p : kNoRef, false,
                       model_.kv_bytes_per_token()});
        }
        emit(out, {layout_.budget_bytes - layout_.unusable_bytes, layout_.unusable_bytes, UnitKind::unusable,
                   kNoRef, false, 0});
    }

    std::string check_physical() const override {
        const auto free_page = flags(free_pages_, size_t(layout_.max_kv_pages));
        const auto free_state = flags(free_states_, size_t(n_states_));
        for (uint32_t p = 0; p < layout_.max_kv_pages; ++p)
            if ((page_owner(p) == kNoOwner) != bool(free_page[p]))
                return "static pool: page " + std::to_string(p) + " both owned and free, or neither";
        for (uint32_t s = 0; s < n_states_; ++s)
            if ((state_owner(s) == kNoOwner) != bool(free_state[s]))
                return "static pool: state slot " + std::to_string(s) + " both owned and free, or neither";
        return {};
    }
    uint64_t free_for_state() const override {
        return uint64_t(free_states_.size()) * layout_.state_slot_bytes;
    }
    uint64_t free_for_kv() const override { return uint64_t(free_pages_.size()) * layout_.kv_page_bytes; }

  public:
    uint64_t free_list_bytes() const override {
        return uint64_t(free_pages_.size()) * layout_.kv_page_bytes +
               uint64_t(free_states_.size()) * layout_.state_slot_bytes;
    }

  private:
    uint64_t kv_offset(PageRef p, int layer) const override {
        return kv_base() + p * layout_.kv_page_bytes +
               uint64_t(layer) * layout_.page_tokens * model_.kv_bytes_per_token_per_layer;
    }
    uint64_t state_offset(StateRef s, int layer) const override {
        return s * layout_.state_slot_bytes + uint64_t(layer) * model_.state_bytes_per_layer;
    }

    uint64_t n_states_;
    std::set<uint32_t> free_pages_, free_states_;  // lowest index first: deterministic placement
};

}  // namespace

std::string check_pool_model(const PoolModel& m, uint64_t budget, uint32_t page_tokens,
                             const PoolOptions& o) {
    if (m.attention_layers <= 0 || m.linear_layers <= 0) return "the pool needs attention and linear layers";
    if (m.kv_bytes_per_token_per_layer == 0 || m.state_bytes_per_layer == 0) return "zero-sized KV or state";
    if (page_tokens == 0) return "page_tokens must be at least 1";
    if (budget == 0) return "budget must be positive";
    if (o.backing && budget > kMaxBackingBytes)
        return "backing storage of " + format_bytes(double(budget)) + " exceeds the limit of " +
               format_bytes(double(kMaxBackingBytes));
    return {};
}

PoolLayout exact_fit_layout(PoolDesign d, const PoolModel& m, uint64_t budget, uint32_t page_tokens) {
    PoolLayout l;
    l.design = d;
    l.budget_bytes = budget;
    l.page_tokens = page_tokens;
    l.kv_page_data_bytes = l.kv_page_bytes = uint64_t(page_tokens) * m.kv_bytes_per_token();
    l.state_data_bytes = l.state_slot_bytes = m.state_bytes();
    return l;
}

uint64_t static_state_budget(const PoolModel& m, const StaticSplitConfig& c) {
    // SGLang: mamba budget = rest * r / (1 + r); slots = budget / per-request state bytes.
    return c.state_slots ? c.state_slots * m.state_bytes()
                         : uint64_t(double(c.budget_bytes) * c.state_ratio / (1.0 + c.state_ratio));
}

PoolResult make_static_pool(const PoolModel& m, const StaticSplitConfig& c, const PoolOptions& o) {
    if (std::string e = check_pool_model(m, c.budget_bytes, c.page_tokens, o); !e.empty())
        return {nullptr, e};
    if (!(c.state_ratio > 0) || c.state_ratio > 1000) return {nullptr, "state_ratio must be in (0, 1000]"};
    PoolLayout l = exact_fit_layout(PoolDesign::static_split, m, c.budget_bytes, c.page_tokens);
    const uint64_t state_budget = static_state_budget(m, c);
    if (state_budget > c.budget_bytes) return {nullptr, "state slots exceed the budget"};
    const uint64_t n_states = state_budget / l.state_slot_bytes;
    const uint64_t kv_budget = c.budget_bytes - state_budget;
    l.max_kv_pages = kv_budget / l.kv_page_bytes;
    l.max_states = n_states;
    if (n_states == 0 || l.max_kv_pages == 0)
        return {nullptr, "budget too small: " + std::to_string(n_states) + " state slots and " +
                             std::to_string(l.max_kv_pages) + " KV pages"};
    if (n_states > kMaxPoolHandles || l.max_kv_pages > kMaxPoolHandles)
        return {nullptr, std::to_string(l.max_kv_pages) + " KV pages exceed the limit of " +
                             std::to_string(kMaxPoolHandles) + ": raise page_tokens or lower the budget"};
    l.unusable_bytes = c.budget_bytes - n_states * l.state_slot_bytes - l.max_kv_pages * l.kv_page_bytes;
    return {std::unique_ptr<PagePool>(new StaticPool(m, l, n_states, o)), {}};
}

}  // namespace k3
