// The geometry a state blob records (the layout is part of the state format: docs/architecture.md,
// Numerics) and the exact byte size of a blob for a given geometry, position and contents. Pure
// arithmetic: it works for the accounting presets (Kimi-Linear-48B-A3B in bf16) as well as for the
// runnable model (fp32), so the migration cost model (migration_cost.h) counts the very bytes the
// writer (blob.h) would produce. (What a sequence holds in all, summed over its layers, is the
// accounting's: core/model/accounting.h; this is the format's per-section arithmetic.)
//
// Blob format, version 1 (all integers little-endian; the full description is in blob.h):
//   header 112 B | sections, each a 16 B section header + payload | CRC-32C of everything before, 4 B
#pragma once

#include <cstdint>
#include <string>

#include "core/model/config.h"

namespace k3::lifecycle {

inline constexpr uint32_t kBlobVersion = 1;
inline constexpr uint64_t kBlobHeaderBytes = 112;
inline constexpr uint64_t kSectionHeaderBytes = 16;
inline constexpr uint64_t kBlobTrailerBytes = 4;  // CRC-32C
inline constexpr uint64_t kSamplerPayloadBytes = 48;

// Order of the two indices of one head's recurrent state matrix. FLA's default, vLLM's kda layer and
// this project use [K][V] (row = key channel); FLA's KDA layer and FlashKDA use [V][K] (reference/kda.md §2).
enum class StateOrder : uint8_t { kv = 0, vk = 1 };
const char* state_order_name(StateOrder o);  // "[K][V]", "[V][K]"

// What a blob's bytes mean. Two blobs can only be exchanged between models with equal layouts.
struct BlobLayout {
    StateOrder state_order = StateOrder::kv;
    DType state_dtype = DType::fp32, conv_dtype = DType::fp32, kv_dtype = DType::fp32;
    uint32_t linear_layers = 0, attention_layers = 0;
    uint32_t heads = 0, v_heads = 0, head_k = 0, head_v = 0;  // KDA: H, HV, K, V
    uint32_t conv_width = 0;                                  // W; windows keep W - 1 raw rows
    uint32_t kv_row = 0;                                      // cached elements per token per attention layer
    uint32_t chunk =
        0;  // prefill chunk size the state was computed with (0 = not recorded): part of
            // the layout because a different chunk gives different rounding (reference/kda.md §3.4)

    // The layout of a configuration's sequences ([K][V] order); chunk as given.
    static BlobLayout of(const ModelConfig& c, uint32_t chunk = 0);

    uint32_t conv_channels() const { return 2 * heads * head_k + v_heads * head_v; }
    uint64_t recurrent_bytes_per_layer() const;  // HV K V in state_dtype
    uint64_t conv_bytes_per_layer() const;       // (W - 1) x conv channels in conv_dtype
    uint64_t kv_bytes_per_token_per_layer() const;

    // Empty when every field is within the format's limits, else what is out of range.
    std::string problem() const;
    // Empty when equal, else the first field that differs, both values named ("head_k: blob 64, model 128").
    std::string difference(const BlobLayout& model) const;
    bool operator==(const BlobLayout& o) const { return difference(o).empty(); }
};

// Format limits (the reader refuses anything beyond them before allocating).
inline constexpr uint32_t kMaxBlobLayers = 1024;
inline constexpr uint32_t kMaxBlobHeads = 4096;
inline constexpr uint32_t kMaxBlobHeadDim = 4096;
inline constexpr uint32_t kMaxBlobConvWidth = 16;
inline constexpr uint32_t kMaxBlobKvRow = 1u << 16;
inline constexpr uint64_t kMaxBlobPosition = 1ull << 32;

// What a blob carries (bit set in the header's contents field).
enum BlobContents : uint32_t {
    kBlobRecurrent = 1u << 0,  // every linear layer's S
    kBlobConv = 1u << 1,       // every linear layer's conv windows (raw pre-conv rows)
    kBlobKv = 1u << 2,         // every attention layer's cache rows for tokens [0, position)
    kBlobTokens = 1u << 3,     // the request's token ids (prompt and generated, including pending ones)
    kBlobSampler = 1u << 4,    // temperature and random-generator state
    kBlobAll = 0x1f,
};
std::string contents_text(uint32_t contents);  // "S + conv + KV + tokens + sampler"

// Exact size in bytes of a blob of this layout: `position` tokens of KV (when kBlobKv), `tokens` ids
// (when kBlobTokens). Sizes beyond 2^64 cannot occur within the limits above.
uint64_t blob_bytes(const BlobLayout& l, uint64_t position, uint64_t tokens, uint32_t contents);

}  // namespace k3::lifecycle
