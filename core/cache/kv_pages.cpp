#include "core/cache/kv_pages.h"

#include <algorithm>
#include <cstring>

namespace k3::serve {

namespace {
// Allocates a copy-on-write page before it has a holder (ids just below the holders').
constexpr OwnerId kScratchOwner = kHolderBase - 1;
}  // namespace

KvPages::KvPages(PagePool& pool) : pool_(pool) {}

KvPages::~KvPages() {
    for (PageRef p = 0; p < refs_.size(); ++p)
        if (refs_[p] > 0) pool_.release(holder_of(p));
}

void KvPages::retain(PageRef p) {
    if (p >= refs_.size()) refs_.resize(size_t(p) + 1, 0);
    if (refs_[p]++ == 0) ++live_;
    ++references_;
}

bool KvPages::release(PageRef p) {
    if (p >= refs_.size() || refs_[p] == 0) return false;
    --references_;
    if (--refs_[p] == 0) {
        --live_;
        pool_.release(holder_of(p));
    }
    return true;
}

void KvPages::retain_all(std::span<const PageRef> pages) {
    for (PageRef p : pages) retain(p);
}

void KvPages::release_all(std::span<const PageRef> pages) {
    for (PageRef p : pages) release(p);
}

std::string KvPages::mount(OwnerId owner, std::span<const PageRef> table) {
    if (owner == kNoOwner || owner >= kScratchOwner)
        return "owner " + std::to_string(owner) + " cannot mount pages";
    if (pool_.kv_tokens(owner) != 0 || !pool_.kv_pages(owner).empty())
        return "owner " + std::to_string(owner) + " already holds KV (mounted twice?)";
    const uint64_t pt = page_tokens();
    for (size_t i = 0; i < table.size(); ++i) {
        const PageRef p = table[i];
        if (refs(p) == 0) return "page " + std::to_string(p) + " of the table has no reference";
        if (pool_.page_owner(p) != holder_of(p))
            return "page " + std::to_string(p) + " is lent to owner " + std::to_string(pool_.page_owner(p));
        if (i + 1 < table.size() && held_tokens(p) != pt)
            return "page " + std::to_string(i) + " of the table is partly filled but not the last";
    }
    for (PageRef p : table)
        if (pool_.append_kv(holder_of(p), owner) != AllocStatus::ok)
            return "append_kv refused page " + std::to_string(p);  // checked above: unreachable
    return {};
}

std::string KvPages::unmount(OwnerId owner, std::vector<PageRef>* table) {
    const std::vector<PageRef> pages(pool_.kv_pages(owner).begin(), pool_.kv_pages(owner).end());
    if (pages.size() < table->size())
        return "owner " + std::to_string(owner) + " holds " + std::to_string(pages.size()) +
               " pages, fewer than its table's " + std::to_string(table->size()) +
               " (truncated while mounted?)";
    for (size_t i = 0; i < table->size(); ++i)
        if (pages[i] != (*table)[i])
            return "page " + std::to_string(i) + " of owner " + std::to_string(owner) +
                   " is not the one its table lent";
    const uint64_t pt = page_tokens();
    for (PageRef p : pages) {
        const uint64_t left = pool_.kv_tokens(owner);
        if (pool_.transfer_kv(owner, holder_of(p), std::min(pt, left)) != AllocStatus::ok)
            return "page " + std::to_string(p) + " could not return to its holder";
    }
    for (size_t i = table->size(); i < pages.size(); ++i) {
        retain(pages[i]);
        table->push_back(pages[i]);
    }
    return {};
}

std::string KvPages::make_writable(std::vector<PageRef>* table, uint64_t position, bool* copied) {
    *copied = false;
    const uint64_t pt = page_tokens();
    const size_t idx = size_t(position / pt);
    if (idx >= table->size()) return {};  // the model starts a new page there
    const PageRef old = (*table)[idx];
    const uint64_t filled = held_tokens(old);
    if (idx + 1 != table->size() || filled != position % pt)
        return "the table does not end at position " + std::to_string(position);
    if (refs(old) <= 1) return {};  // private already: written in place
    if (pool_.grow_kv(kScratchOwner, filled) != AllocStatus::ok) return "no KV page for a copy-on-write copy";
    const PageRef fresh = pool_.kv_pages(kScratchOwner)[0];
    if (pool_.transfer_kv(kScratchOwner, holder_of(fresh), filled) != AllocStatus::ok) {
        pool_.release(kScratchOwner);
        return "copy-on-write page could not reach its holder";
    }
    const size_t bytes = size_t(filled * pool_.model().kv_bytes_per_token_per_layer);
    for (int a = 0; a < pool_.model().attention_layers; ++a)
        std::memcpy(pool_.kv_data(fresh, a), pool_.kv_data(old, a), bytes);
    retain(fresh);
    release(old);
    (*table)[idx] = fresh;
    ++copies_.pages_copied;
    copies_.bytes_copied += bytes * uint64_t(pool_.model().attention_layers);
    *copied = true;
    return {};
}

std::string KvPages::audit() const {
    for (PageRef p = 0; p < refs_.size(); ++p)
        if (refs_[p] > 0 && pool_.page_owner(p) != holder_of(p))
            return "referenced page " + std::to_string(p) + " is not with its holder";
    for (OwnerId o : pool_.owners()) {
        if (o < kHolderBase) continue;
        const PageRef p = PageRef(o - kHolderBase);
        if (refs(p) == 0) return "holder of page " + std::to_string(p) + " holds memory nobody references";
        if (pool_.kv_pages(o).size() != 1 || pool_.kv_pages(o)[0] != p)
            return "holder of page " + std::to_string(p) + " holds other pages";
    }
    return {};
}

}  // namespace k3::serve
