// Module 10 `migrate`: the damage done to the move-everything blob, and the reader errors it must cause.
// Flips and truncations break the bytes; the forged faults rewrite one header field and re-checksum the
// blob (reseal_blob), so only the check of that field can catch them.
#include <algorithm>

#include "core/base/bytes.h"
#include "core/modules/migrate/migrate.h"

namespace k3 {

using namespace k3::lifecycle;

namespace {

// Rewrites the 8-byte little-endian header field at `offset` as f(old value).
template <class F>
void rewrite_u64(std::vector<std::byte>& blob, size_t offset, F f) {
    store_le(blob.data() + offset, f(load_le(blob.data() + offset, 8)), 8);
}

}  // namespace

FaultPlan inject_fault(const MigrateParams& p, std::vector<std::byte>& blob) {
    const size_t n = blob.size();
    const size_t off = size_t(std::min<int64_t>(p.fault_offset, int64_t(n) - 1));
    switch (p.fault) {
        case BlobFault::none: return {"no fault", {BlobError::ok}};
        case BlobFault::bit_flip: {
            blob[off] ^= std::byte(1u << p.fault_bit);
            const std::string what =
                "bit " + std::to_string(p.fault_bit) + " of byte " + std::to_string(off) + " flipped";
            if (off < 8) return {what, {BlobError::bad_magic}};
            // The declared total size: now more or fewer bytes than the blob holds.
            if (off >= kOffTotal && off < kOffTotal + 8)
                return {what, {BlobError::truncated, BlobError::trailing_bytes}};
            return {what, {BlobError::checksum_mismatch}};
        }
        case BlobFault::truncate:
            blob.resize(off);
            return {"truncated to " + std::to_string(off) + " of " + std::to_string(n) + " bytes",
                    {BlobError::truncated}};
        case BlobFault::wrong_model:
            rewrite_u64(blob, kOffModelHash, [](uint64_t h) { return h ^ 0x9e3779b97f4a7c15ull; });
            reseal_blob(blob);
            return {"model hash replaced, checksum recomputed", {BlobError::model_mismatch}};
        case BlobFault::wrong_layout:
            blob[kOffLayout] = std::byte{uint8_t(StateOrder::vk)};
            reseal_blob(blob);
            return {"state order [V][K] declared, checksum recomputed", {BlobError::layout_mismatch}};
        case BlobFault::wrong_position:
            rewrite_u64(blob, kOffPosition, [](uint64_t v) { return v + 1; });
            rewrite_u64(blob, kOffConsumed, [](uint64_t v) { return v + 1; });
            reseal_blob(blob);
            return {"position and consumed one token further, checksum recomputed",
                    {BlobError::position_mismatch}};
    }
    return {};
}

}  // namespace k3
