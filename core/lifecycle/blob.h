// The state blob: everything a paused request needs to continue elsewhere, as one versioned,
// checksummed byte string (module 10, reference/kda.md §5, reference/serving.md §4).
//
// Format, version 1. Integers little-endian, floats IEEE-754 binary32/64 little-endian.
//   offset  size  field
//        0     8  magic "K3SEQ\r\n\x1a" (the \r\n and ^Z catch text-mode mangling, as PNG's)
//        8     4  version (1)
//       12     4  header bytes (112)
//       16     8  total bytes of the blob, CRC included
//       24     8  model hash: Model::fingerprint() of the writer (config + seed = the weights)
//       32     8  position: tokens the KV rows and the KDA state cover
//       40     8  consumed: tokens the request had fed when paused (>= position; the reader re-feeds
//                 tokens [position, consumed) from the token section: strategies that recompute)
//       48     8  prompt tokens: tokens [0, prompt) were the prompt, prefilled in one call (the recompute
//                 path follows the original: prefill inside the prompt, decode steps after it)
//       56     4  contents: BlobContents bits (blob_layout.h)
//       60     4  section count
//       64    40  layout: state order, state / conv / KV dtype codes (u8 each), then u32 linear layers,
//                 attention layers, heads, value heads, K, V, conv width, KV row elements, chunk
//      104     8  reserved, zero
//      112        sections, in this order, each a 16 B header (u32 kind, u32 layer, u64 payload bytes)
//                 and its payload:
//                   for every linear layer l: kind 1 recurrent S [HV][K][V] (layout's order, state dtype)
//                                             kind 2 conv windows q, k, v, each [W-1][channels], row 0 oldest
//                   for every attention layer a: kind 3 KV, `position` rows token-major
//                   kind 4 tokens: int32 ids, at least `consumed` of them (the rest are pending: sampled,
//                          not yet fed)
//                   kind 5 sampler: f32 temperature, u32 has_spare, u64 rng state[4], f64 spare
//      end-4   4  CRC-32C (Castagnoli) of every byte before it
//
// The reader checks, in this order, and stops at the first problem with a specific error: the magic
// (on as many of its 8 bytes as there are, so a short non-blob is bad_magic), the length against
// the header and the declared total (truncated / trailing_bytes), checksum,
// version, header fields and layout limits, every section's kind, layer and size (a KV section whose
// size is not position rows is a position_mismatch), token and sampler values; then, against the
// model that is to resume it (check_blob), model hash, layout and the expected position. It allocates
// nothing beyond the blob's own size and never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/lifecycle/blob_layout.h"

namespace k3::lifecycle {

inline constexpr char kBlobMagic[8] = {'K', '3', 'S', 'E', 'Q', '\r', '\n', '\x1a'};

enum class BlobError : uint8_t {
    ok,
    truncated,            // fewer bytes than the header, or than the total the header declares
    trailing_bytes,       // more bytes than declared
    bad_magic,            // not a state blob
    checksum_mismatch,    // the CRC-32C does not match: bytes changed after writing
    unsupported_version,  // written by another version of the format
    bad_header,           // header size, reserved field, contents bits, counts that do not fit together
    bad_layout,           // a layout field outside the format's limits
    bad_section,          // a section of the wrong kind, layer or size, or bytes after the last one
    bad_tokens,           // token ids outside the vocabulary, or fewer than `consumed`
    bad_sampler,          // temperature negative or not finite, has_spare not 0 or 1
    model_mismatch,       // written by another model (hash)
    layout_mismatch,      // the layout differs from the model's
    position_mismatch,    // KV rows, a checkpoint or the caller's expectation disagree with the position
    resume_failed,        // the blob is fine but the model could not take it (pool full, context limit)
};
const char* blob_error_id(BlobError e);  // "truncated", "checksum_mismatch", ...

struct BlobStatus {
    BlobError code = BlobError::ok;
    std::string message;  // names the field and, for the structure, the byte offset
    uint64_t offset = 0;  // where the problem was found
    bool ok() const { return code == BlobError::ok; }
};

struct SamplerState {
    float temperature = 0;
    Rng::State rng{};
};

// A paused request as plain values: what the blob holds.
struct RequestState {
    uint64_t model_hash = 0;
    BlobLayout layout;
    uint64_t position = 0, consumed = 0, prompt_tokens = 0;
    uint32_t contents = 0;
    std::vector<std::byte> state;  // with S and conv: every linear layer's S then windows (Model::save_state)
    std::vector<std::byte> kv;     // with KV: every attention layer's `position` rows (SequenceSnapshot::kv)
    std::vector<int32_t> tokens;   // with tokens
    SamplerState sampler;          // with sampler
};

// Serialises r (its vectors must have the sizes its layout, position and contents imply; otherwise
// the error names the mismatch and *out is left empty).
[[nodiscard]] std::string write_blob(const RequestState& r, std::vector<std::byte>* out);

// Parses and checks the structure of a blob (everything except the model it is meant for).
[[nodiscard]] BlobStatus read_blob(std::span<const std::byte> blob, RequestState* out);

// What the resuming side expects.
struct BlobExpect {
    uint64_t model_hash = 0;
    BlobLayout layout;
    int vocab = 0;                     // token ids must be in [0, vocab) (0 = unchecked)
    std::optional<uint64_t> consumed;  // the request's position as the scheduler knows it
};
// Checks a parsed blob against the resuming model.
[[nodiscard]] BlobStatus check_blob(const RequestState& r, const BlobExpect& e);

// read_blob, then check_blob.
[[nodiscard]] BlobStatus read_blob(std::span<const std::byte> blob, const BlobExpect& e, RequestState* out);

// Recomputes the CRC of a blob in place (tests and fault injection forge well-formed blobs with a
// wrong field; a writer never needs it). Does nothing to blobs shorter than the trailer.
void reseal_blob(std::vector<std::byte>& blob);

// Header field offsets (fault injection, tests, the fuzz target).
inline constexpr size_t kOffVersion = 8, kOffTotal = 16, kOffModelHash = 24, kOffPosition = 32,
                        kOffConsumed = 40, kOffPrompt = 48, kOffContents = 56, kOffSections = 60,
                        kOffLayout = 64, kOffReserved = 104;

}  // namespace k3::lifecycle
