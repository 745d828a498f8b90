// (b) One page size for all: vLLM's hybrid allocator (reference/serving.md §1.2). One pool of
// equal blocks; a KV page takes one block per attention group, a state one block per linear group
// (hybrid_blocks.h derives the block). The price is padding inside every state block and a huge
// attention block: prefix caching works in whole blocks and each sequence's last block is partly
// empty.
//
// Layout of backing storage (vLLM's KVCacheTensor per layer slot): group_size tensors of n_blocks
// pages each; block b of every group is page b of each tensor. Layer i of a kind with G groups sits
// in group i % G, tensor i / G (vLLM assigns layers to groups round robin; the last group's missing
// layers are padding). In pool-order maps a block is listed as its data, then its padding.
#include <set>

#include "core/memory/hybrid_blocks.h"
#include "core/memory/pool.h"

namespace k3 {

namespace {

class HybridPool final : public PagePool {
  public:
    HybridPool(const PoolModel& m, const PoolLayout& l, const HybridBlockPlan& plan, uint64_t n_blocks,
               const PoolOptions& o)
        : PagePool(m, l, size_t(l.max_kv_pages), size_t(l.max_states), o),
          plan_(plan),
          n_blocks_(n_blocks),
          A_(uint32_t(plan.attention_groups)),
          G_(uint32_t(plan.linear_groups)),
          page_blocks_(size_t(l.max_kv_pages) * A_, kNoRef),
          state_blocks_(size_t(l.max_states) * G_, kNoRef) {
        for (uint32_t b = 0; b < n_blocks; ++b) free_blocks_.insert(free_blocks_.end(), b);
        for (uint32_t p = 0; p < l.max_kv_pages; ++p) free_pages_.insert(free_pages_.end(), p);
        for (uint32_t s = 0; s < l.max_states; ++s) free_states_.insert(free_states_.end(), s);
    }

  private:
    uint32_t take_block() {
        const uint32_t b = *free_blocks_.begin();
        free_blocks_.erase(free_blocks_.begin());
        return b;
    }
    PageRef take_page() override {
        if (free_blocks_.size() < A_ || free_pages_.empty()) return kNoRef;
        const PageRef p = *free_pages_.begin();
        free_pages_.erase(free_pages_.begin());
        for (uint32_t a = 0; a < A_; ++a) page_blocks_[size_t(p) * A_ + a] = take_block();
        return p;
    }
    void give_page(PageRef p) override {
        for (uint32_t a = 0; a < A_; ++a) {
            free_blocks_.insert(page_blocks_[size_t(p) * A_ + a]);
            page_blocks_[size_t(p) * A_ + a] = kNoRef;
        }
        free_pages_.insert(p);
    }
    AllocStatus take_state(StateRef* out) override {
        if (free_blocks_.size() < G_) return AllocStatus::no_state_space;
        if (free_states_.empty()) return AllocStatus::no_state_id;  // cannot happen: ids = blocks / G
        const StateRef s = *free_states_.begin();
        free_states_.erase(free_states_.begin());
        for (uint32_t g = 0; g < G_; ++g) state_blocks_[size_t(s) * G_ + g] = take_block();
        *out = s;
        return AllocStatus::ok;
    }
    void give_state(StateRef s) override {
        for (uint32_t g = 0; g < G_; ++g) {
            free_blocks_.insert(state_blocks_[size_t(s) * G_ + g]);
            state_blocks_[size_t(s) * G_ + g] = kNoRef;
        }
        free_states_.insert(s);
    }

    // Layers of a kind with `groups` groups that land in group g (round robin).
    static uint64_t layers_in_group(int layers, uint32_t groups, uint32_t g) {
        return g < uint32_t(layers) ? (uint64_t(layers) - g + groups - 1) / groups : 0;
    }

    struct BlockUse {
        uint32_t ref = kNoRef;
        bool state = false;
        uint32_t sub = 0;  // group index within the page or state
    };
    std::vector<BlockUse> block_uses() const {
        std::vector<BlockUse> use(static_cast<size_t>(n_blocks_));
        for (uint32_t p = 0; p < layout_.max_kv_pages; ++p)
            if (page_owner(p) != kNoOwner)
                for (uint32_t a = 0; a < A_; ++a) use[page_blocks_[size_t(p) * A_ + a]] = {p, false, a};
        for (uint32_t s = 0; s < layout_.max_states; ++s)
            if (state_owner(s) != kNoOwner)
                for (uint32_t g = 0; g < G_; ++g) use[state_blocks_[size_t(s) * G_ + g]] = {s, true, g};
        return use;
    }

    void physical_units(std::vector<PhysUnit>& out) const override {
        const uint64_t B = plan_.block_bytes, P = plan_.page_bytes_per_layer;
        const std::vector<BlockUse> use = block_uses();
        for (uint32_t b = 0; b < n_blocks_; ++b) {
            const uint64_t at = b * B;
            const BlockUse& u = use[b];
            if (u.ref == kNoRef) {
                emit(out, {at, B, UnitKind::free, kNoRef, false, 0});
            } else if (!u.state) {
                const uint64_t n = layers_in_group(model_.attention_layers, A_, u.sub);
                emit(out, {at, n * P, UnitKind::kv, u.ref, false, n * model_.kv_bytes_per_token_per_layer});
                emit(out, {at + n * P, B - n * P, UnitKind::padding, u.ref, false, 0});
            } else {
                const uint64_t n = layers_in_group(model_.linear_layers, G_, u.sub);
                const uint64_t data = n * model_.state_bytes_per_layer;
                emit(out, {at, data, UnitKind::state, u.ref, true, 0});
                emit(out, {at + data, B - data, UnitKind::padding, u.ref, true, 0});
            }
        }
        emit(out, {n_blocks_ * B, layout_.unusable_bytes, UnitKind::unusable, kNoRef, false, 0});
    }

    std::string check_physical() const override {
        std::vector<uint8_t> refs(static_cast<size_t>(n_blocks_), 0);
        const auto free_page = flags(free_pages_, size_t(layout_.max_kv_pages));
        const auto free_state = flags(free_states_, size_t(layout_.max_states));
        const auto free_block = flags(free_blocks_, size_t(n_blocks_));
        auto claim = [&](uint32_t b) { return b < n_blocks_ && refs[b]++ == 0; };
        for (uint32_t p = 0; p < layout_.max_kv_pages; ++p) {
            const bool owned = page_owner(p) != kNoOwner;
            if (owned == bool(free_page[p])) return "vllm pool: page handle " + std::to_string(p) + " state";
            for (uint32_t a = 0; a < A_; ++a) {
                const uint32_t b = page_blocks_[size_t(p) * A_ + a];
                if (owned ? !claim(b) : b != kNoRef)
                    return "vllm pool: block of page " + std::to_string(p) + " shared or dangling";
            }
        }
        for (uint32_t s = 0; s < layout_.max_states; ++s) {
            const bool owned = state_owner(s) != kNoOwner;
            if (owned == bool(free_state[s]))
                return "vllm pool: state handle " + std::to_string(s) + " state";
            for (uint32_t g = 0; g < G_; ++g) {
                const uint32_t b = state_blocks_[size_t(s) * G_ + g];
                if (owned ? !claim(b) : b != kNoRef)
                    return "vllm pool: block of state " + std::to_string(s) + " shared or dangling";
            }
        }
        for (uint32_t b = 0; b < n_blocks_; ++b)
            if (bool(refs[b]) == bool(free_block[b]))
                return "vllm pool: block " + std::to_string(b) + " both used and free, or neither";
        return {};
    }
    uint64_t free_for_state() const override {
        return uint64_t(free_blocks_.size()) / G_ * G_ * plan_.block_bytes;
    }
    uint64_t free_for_kv() const override {
        return uint64_t(free_blocks_.size()) / A_ * A_ * plan_.block_bytes;
    }

  public:
    uint64_t free_list_bytes() const override { return uint64_t(free_blocks_.size()) * plan_.block_bytes; }

  private:
    uint64_t kv_offset(PageRef p, int layer) const override {
        const uint32_t L = uint32_t(layer);
        const uint64_t tensor = L / A_;
        return tensor * n_blocks_ * plan_.page_bytes_per_layer +
               uint64_t(page_blocks_[size_t(p) * A_ + L % A_]) * plan_.page_bytes_per_layer;
    }
    uint64_t state_offset(StateRef s, int layer) const override {
        const uint32_t L = uint32_t(layer);
        const uint64_t tensor = L / G_;
        return tensor * n_blocks_ * plan_.page_bytes_per_layer +
               uint64_t(state_blocks_[size_t(s) * G_ + L % G_]) * plan_.page_bytes_per_layer;
    }

    HybridBlockPlan plan_;
    uint64_t n_blocks_;
    uint32_t A_, G_;
    std::vector<uint32_t> page_blocks_, state_blocks_;  // [handle * groups + group] -> block
    std::set<uint32_t> free_blocks_, free_pages_, free_states_;
};

}  // namespace

PoolResult make_hybrid_pool(const PoolModel& m, const HybridPagesConfig& c, const PoolOptions& o) {
    if (std::string e = check_pool_model(m, c.budget_bytes, 1, o); !e.empty()) return {nullptr, e};
    HybridBlockPlan plan;
    if (std::string e = plan_hybrid_blocks(m, c.kernel_multiple, c.min_block_tokens, &plan); !e.empty())
        return {nullptr, e};
    const uint64_t n_blocks = c.budget_bytes / plan.block_bytes;
    PoolLayout l;
    l.design = PoolDesign::hybrid_pages;
    l.budget_bytes = c.budget_bytes;
    l.page_tokens = plan.block_tokens;
    l.kv_page_bytes = uint64_t(plan.attention_groups) * plan.block_bytes;
    l.kv_page_data_bytes = uint64_t(plan.block_tokens) * m.kv_bytes_per_token();
    l.state_slot_bytes = uint64_t(plan.linear_groups) * plan.block_bytes;
    l.state_data_bytes = m.state_bytes();
    l.max_kv_pages = n_blocks / uint64_t(plan.attention_groups);
    l.max_states = n_blocks / uint64_t(plan.linear_groups);
    l.unusable_bytes = c.budget_bytes - n_blocks * plan.block_bytes;
    if (l.max_kv_pages == 0 || l.max_states == 0)
        return {nullptr, "budget too small: " + std::to_string(n_blocks) + " blocks of " +
                             std::to_string(plan.block_bytes) + " B"};
    if (n_blocks > kMaxPoolHandles)
        return {nullptr,
                std::to_string(n_blocks) + " blocks exceed the limit of " + std::to_string(kMaxPoolHandles)};
    return {std::unique_ptr<PagePool>(new HybridPool(m, l, plan, n_blocks, o)), {}};
}

}  // namespace k3
