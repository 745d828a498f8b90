// Fuzz target: the state blob reader (core/lifecycle/blob.h). Any input must be parsed or rejected
// with a specific error and a message, never crash, read out of bounds or allocate beyond the input.
// Random bytes rarely pass the CRC, so every input is also tried with its length field and checksum
// made consistent (the structure behind the checksum gets fuzzed too). An accepted blob must write
// back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/lifecycle/blob.h"

namespace {

using namespace k3::lifecycle;

void check_one(const std::vector<std::byte>& b) {
    RequestState r;
    const BlobStatus s = read_blob(b, &r);
    if (!s.ok()) {
        if (s.message.empty() || !r.state.empty() || !r.kv.empty() || !r.tokens.empty()) std::abort();
        if (s.offset > b.size()) std::abort();
        return;
    }
    // Accepted: the decoded state stays within the input and writes back to the same bytes.
    if (r.state.size() + r.kv.size() + 4 * r.tokens.size() > b.size()) std::abort();
    std::vector<std::byte> again;
    if (!write_blob(r, &again).empty() || again != b) std::abort();
    // Checking against a model never crashes either.
    BlobExpect e;
    e.model_hash = r.model_hash;
    e.layout = r.layout;
    e.vocab = 1000;
    e.consumed = r.consumed;
    (void)check_blob(r, e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::byte> b(reinterpret_cast<const std::byte*>(data),
                             reinterpret_cast<const std::byte*>(data) + size);
    check_one(b);
    if (b.size() >= kBlobHeaderBytes + kBlobTrailerBytes) {
        for (size_t i = 0; i < 8; ++i) b[i] = std::byte(kBlobMagic[i]);
        const uint64_t n = b.size();
        for (int i = 0; i < 8; ++i) b[kOffTotal + size_t(i)] = std::byte(n >> (8 * i));
        reseal_blob(b);
        check_one(b);
    }
    return 0;
}
