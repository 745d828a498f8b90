// Module 10 `migrate`: a written blob measured from its own bytes, a second count to hold the accounting
// and the cost model against. It follows the format table of core/lifecycle/blob.h: the header's own
// size field and section count, every section header (u32 kind, u32 layer, u64 payload bytes) in turn,
// then the CRC-32C trailer. It uses no layout and no size formula, and checks nothing: it measures.
#include "core/base/bytes.h"
#include "core/lifecycle/blob.h"
#include "core/modules/migrate/migrate.h"

namespace k3 {

using namespace k3::lifecycle;

namespace {

constexpr size_t kOffHeaderBytes = kOffVersion + 4;  // u32, after the version

// Adds a section's payload to the total of its kind (blob.h: 1 S, 2 conv windows, 3 KV, 4 token ids,
// 5 sampler); false for a kind the format does not have.
bool add_payload(BlobRecount& r, uint32_t kind, uint64_t payload) {
    switch (kind) {
        case 1:
        case 2: r.state += payload; return true;
        case 3: r.kv += payload; return true;
        case 4: r.tokens += payload; return true;
        case 5: r.sampler += payload; return true;
    }
    return false;
}

}  // namespace

BlobRecount recount_blob(const std::vector<std::byte>& blob) {
    BlobRecount r;
    const uint64_t n = blob.size();
    if (n < kOffSections + 4) {
        r.problem = std::to_string(n) + " B is shorter than a header";
        return r;
    }
    const uint64_t count = load_le(blob.data() + kOffSections, 4);
    uint64_t at = load_le(blob.data() + kOffHeaderBytes, 4);
    for (uint64_t i = 0; i < count; ++i) {
        const std::string which = "section " + std::to_string(i) + " at byte " + std::to_string(at);
        if (at > n || n - at < kSectionHeaderBytes) {
            r.problem = which + ": its header runs past the end";
            return r;
        }
        const uint32_t kind = uint32_t(load_le(blob.data() + at, 4));
        const uint64_t payload = load_le(blob.data() + at + 8, 8);
        if (payload > n - at - kSectionHeaderBytes) {
            r.problem = which + ": its " + std::to_string(payload) + " B run past the end";
            return r;
        }
        if (!add_payload(r, kind, payload)) {
            r.problem = which + ": unknown kind " + std::to_string(kind);
            return r;
        }
        r.sections.push_back({kind, at + kSectionHeaderBytes, payload});
        at += kSectionHeaderBytes + payload;
    }
    if (at + kBlobTrailerBytes != n)
        r.problem = "the sections end at byte " + std::to_string(at) + ", " + std::to_string(n - at) +
                    " B before the end instead of the 4 B CRC";
    return r;
}

}  // namespace k3
