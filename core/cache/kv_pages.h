// KV pages shared by a prefix cache and running requests: reference counts, lending and
// copy-on-write on top of a PagePool with backing storage (core/memory/pool.h).
//
// The pool gives every page exactly one owner, and the model reads a sequence's KV through its
// owner's page list (Model::kv_view). Sharing is therefore done by lending, never by double ownership:
//   - at rest, page p is held by its own holder owner (holder_of(p)); a reference count says how many
//     logical users it has (the radix tree, requests, forks);
//   - a request keeps a page table (its pages in position order) and, around each model call, mounts
//     it: the pages move to the end of its sequence's owner (PagePool::append_kv) and back to their
//     holders afterwards (PagePool::transfer_kv). Pages the call grew become new entries with one
//     reference;
//   - only the page holding position `position` can be written next (the model writes rows
//     [position, position + T) and reads the rest), so before a call that page is made private if it
//     is shared: a fresh page, the filled rows copied (copy-on-write). Whole shared pages are never
//     written.
// One request at a time is mounted (the model is single-threaded); a page can be lent to one owner at
// a time, which mount() checks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/memory/pool.h"

namespace k3::serve {

// Owners at or above this id are page holders; requests and stores use ids below it.
inline constexpr OwnerId kHolderBase = OwnerId(1) << 40;
inline OwnerId holder_of(PageRef p) { return kHolderBase + p; }

struct PageCopyStats {
    uint64_t pages_copied = 0;  // copy-on-write copies of a shared page
    uint64_t bytes_copied = 0;  // KV bytes those copies moved (filled rows, every attention layer)
};

class KvPages {
  public:
    explicit KvPages(PagePool& pool);
    // Frees every page still referenced (their users are gone with the owner of this object).
    ~KvPages();
    KvPages(const KvPages&) = delete;
    KvPages& operator=(const KvPages&) = delete;

    PagePool& pool() const { return pool_; }
    uint64_t page_tokens() const { return pool_.layout().page_tokens; }

    // ---- reference counts ----
    void retain(PageRef p);
    // Drops one reference; the page is freed when none is left. False if p has no reference.
    bool release(PageRef p);
    void retain_all(std::span<const PageRef> pages);
    void release_all(std::span<const PageRef> pages);
    uint32_t refs(PageRef p) const { return p < refs_.size() ? refs_[p] : 0; }
    uint64_t live_pages() const { return live_; }  // pages with at least one reference
    uint64_t references() const { return references_; }

    // ---- lending ----
    // Appends the pages of `table` (position order; only the last may be partly filled) to `owner`,
    // which must hold no KV. Afterwards the owner's KV is exactly the table's tokens.
    [[nodiscard]] std::string mount(OwnerId owner, std::span<const PageRef> table);
    // Returns every page `owner` holds to its holder. Pages beyond table->size() (grown by the model
    // since mount) get one reference and are appended to *table.
    [[nodiscard]] std::string unmount(OwnerId owner, std::vector<PageRef>* table);

    // ---- copy-on-write ----
    // Before writing at `position` (the next token of a sequence whose KV is `table`): if the page
    // holding it exists and is shared (refs > 1), replaces it in *table by a private copy of its
    // filled rows. Returns whether a copy was made (counted in copies()).
    [[nodiscard]] std::string make_writable(std::vector<PageRef>* table, uint64_t position, bool* copied);
    const PageCopyStats& copies() const { return copies_; }

    // Tokens page p holds at rest (0 while it is lent).
    uint64_t held_tokens(PageRef p) const { return pool_.kv_tokens(holder_of(p)); }
    // Empty when every referenced page sits with its holder and every held page is referenced.
    std::string audit() const;

  private:
    PagePool& pool_;
    std::vector<uint32_t> refs_;
    uint64_t live_ = 0, references_ = 0;
    PageCopyStats copies_;
};

}  // namespace k3::serve
