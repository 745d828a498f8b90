// Module 3 `pool`: a pool map (core/memory/pool.h MapUnit) as a grid of a few thousand cells.
#include <algorithm>
#include <array>
#include <map>

#include "core/modules/pool/pool.h"

namespace k3 {

namespace {

constexpr int kGridColumns = 64;

// The grid's legend, in category order.
enum Category {
    c_free,
    c_kv,
    c_unfilled,
    c_state,
    c_cached_kv,
    c_cached_state,
    c_padding,
    c_unusable,
    c_count
};
const std::vector<std::string> kCategories = {
    "free", "KV", "KV (unfilled slots)", "state", "cached KV", "cached state", "padding", "unusable"};

int category_of(const MapUnit& u) {
    const bool cached = is_cache_owner(u.owner);
    switch (u.kind) {
        case UnitKind::free: return c_free;
        case UnitKind::kv: return cached ? c_cached_kv : c_kv;
        case UnitKind::kv_unfilled: return c_unfilled;
        case UnitKind::state: return cached ? c_cached_state : c_state;
        case UnitKind::padding: return c_padding;
        case UnitKind::unusable: return c_unusable;
    }
    return c_free;
}

std::string owner_name(OwnerId o) {
    if (o == kNoOwner) return "";
    if (is_cache_owner(o)) return "prefix " + std::to_string(o - kCacheOwnerBase) + " cache entry";
    return "request " + std::to_string(o - 1);
}

// What one cell holds: bytes per category, and bytes per owner in pool order.
struct CellBytes {
    std::array<uint64_t, c_count> by_category{};
    std::vector<std::pair<OwnerId, uint64_t>> by_owner;
};

std::vector<CellBytes> cell_bytes_of(const std::vector<MapUnit>& units, uint64_t cell_bytes, size_t cells) {
    std::vector<CellBytes> out(cells);
    for (const MapUnit& u : units) {
        const int category = category_of(u);
        for (uint64_t at = u.offset, end = u.offset + u.bytes; at < end;) {
            const size_t c = size_t(at / cell_bytes);
            const uint64_t take = std::min(end, (c + 1) * cell_bytes) - at;
            out[c].by_category[size_t(category)] += take;
            if (u.owner != kNoOwner) {
                auto& owners = out[c].by_owner;
                if (!owners.empty() && owners.back().first == u.owner)
                    owners.back().second += take;
                else
                    owners.push_back({u.owner, take});
            }
            at += take;
        }
    }
    return out;
}

// The owner holding most of the cell's bytes, and how many others share it ("" when nobody).
std::string cell_label(const CellBytes& cell) {
    std::map<OwnerId, uint64_t> owners;
    for (const auto& [owner, bytes] : cell.by_owner) owners[owner] += bytes;
    OwnerId best = kNoOwner;
    uint64_t best_bytes = 0;
    for (const auto& [owner, bytes] : owners)
        if (bytes > best_bytes) best = owner, best_bytes = bytes;
    if (best == kNoOwner) return "";
    std::string label = owner_name(best);
    if (owners.size() > 1) label += " (+" + std::to_string(owners.size() - 1) + " more)";
    return label;
}

}  // namespace

// One cell per `cell_bytes` of the pool (pool order); its category is the kind holding most of its
// bytes, its label the owner holding most.
CellGrid pool_map_grid(const std::vector<MapUnit>& units, uint64_t budget, std::string name,
                       uint64_t* cell_bytes) {
    CellGrid g;
    g.name = std::move(name);
    g.columns = kGridColumns;
    g.categories = kCategories;
    const uint64_t per_cell = std::max<uint64_t>(1, (budget + kPoolMapCells - 1) / kPoolMapCells);
    const size_t n = size_t((budget + per_cell - 1) / per_cell);
    *cell_bytes = per_cell;
    const std::vector<CellBytes> cells = cell_bytes_of(units, per_cell, n);
    g.cells.resize(n);
    g.cell_labels.resize(n);
    for (size_t c = 0; c < n; ++c) {
        const auto& by_category = cells[c].by_category;
        g.cells[c] = int(std::max_element(by_category.begin(), by_category.end()) - by_category.begin());
        g.cell_labels[c] = cell_label(cells[c]);
    }
    return g;
}

}  // namespace k3
