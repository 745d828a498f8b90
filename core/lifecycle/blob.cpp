#include "core/lifecycle/blob.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/base/bytes.h"
#include "core/base/crc32c.h"

namespace k3::lifecycle {

// State and KV payloads are copied as the host holds them; every build target is little-endian.
static_assert(std::endian::native == std::endian::little, "the blob format is little-endian");

const char* blob_error_id(BlobError e) {
    switch (e) {
        case BlobError::ok: return "ok";
        case BlobError::truncated: return "truncated";
        case BlobError::trailing_bytes: return "trailing_bytes";
        case BlobError::bad_magic: return "bad_magic";
        case BlobError::checksum_mismatch: return "checksum_mismatch";
        case BlobError::unsupported_version: return "unsupported_version";
        case BlobError::bad_header: return "bad_header";
        case BlobError::bad_layout: return "bad_layout";
        case BlobError::bad_section: return "bad_section";
        case BlobError::bad_tokens: return "bad_tokens";
        case BlobError::bad_sampler: return "bad_sampler";
        case BlobError::model_mismatch: return "model_mismatch";
        case BlobError::layout_mismatch: return "layout_mismatch";
        case BlobError::position_mismatch: return "position_mismatch";
        case BlobError::resume_failed: return "resume_failed";
    }
    return "?";
}

namespace {

enum SectionKind : uint32_t { kRecurrent = 1, kConv = 2, kKv = 3, kTokens = 4, kSampler = 5 };

const char* kind_name(uint32_t k) {
    switch (k) {
        case kRecurrent: return "recurrent state";
        case kConv: return "conv windows";
        case kKv: return "KV";
        case kTokens: return "tokens";
        case kSampler: return "sampler";
    }
    return "unknown";
}

// ---- little-endian field access (core/base/bytes.h) ----
void put32(std::vector<std::byte>& b, uint32_t v) { append_le(b, v, 4); }
void put64(std::vector<std::byte>& b, uint64_t v) { append_le(b, v, 8); }
void put_bytes(std::vector<std::byte>& b, const void* p, size_t n) {
    const auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
}
uint32_t get32(const std::byte* p) { return uint32_t(load_le(p, 4)); }
uint64_t get64(const std::byte* p) { return load_le(p, 8); }

BlobStatus fail(BlobError e, uint64_t offset, std::string msg) { return {e, std::move(msg), offset}; }

std::string num(uint64_t v) { return std::to_string(v); }

// One expected section: kind, layer index and payload size.
struct Expected {
    uint32_t kind, layer;
    uint64_t bytes;
};

// The sections a blob with this header must hold, in order (tokens: any multiple of 4, checked apart).
std::vector<Expected> expected_sections(const BlobLayout& l, uint64_t position, uint32_t contents) {
    std::vector<Expected> s;
    for (uint32_t i = 0; i < l.linear_layers; ++i) {
        if (contents & kBlobRecurrent) s.push_back({kRecurrent, i, l.recurrent_bytes_per_layer()});
        if (contents & kBlobConv) s.push_back({kConv, i, l.conv_bytes_per_layer()});
    }
    if (contents & kBlobKv)
        for (uint32_t a = 0; a < l.attention_layers; ++a)
            s.push_back({kKv, a, position * l.kv_bytes_per_token_per_layer()});
    if (contents & kBlobTokens) s.push_back({kTokens, 0, 0});
    if (contents & kBlobSampler) s.push_back({kSampler, 0, kSamplerPayloadBytes});
    return s;
}

// Structural problems of a header's values (shared by the writer and the reader).
BlobStatus check_header_values(const RequestState& r) {
    if (r.contents & ~uint32_t(kBlobAll))
        return fail(
            BlobError::bad_header, kOffContents, "contents has unknown bits 0x" + [&] {
                char b[16];
                std::snprintf(b, sizeof b, "%x", unsigned(r.contents & ~uint32_t(kBlobAll)));
                return std::string(b);
            }());
    if (bool(r.contents & kBlobRecurrent) != bool(r.contents & kBlobConv))
        return fail(BlobError::bad_header, kOffContents,
                    "contents has " + contents_text(r.contents) +
                        ": the recurrent state and the conv windows "
                        "only resume together");
    if (std::string e = r.layout.problem(); !e.empty())
        return fail(BlobError::bad_layout, kOffLayout, "layout: " + e);
    if (r.position > kMaxBlobPosition)
        return fail(BlobError::bad_header, kOffPosition,
                    "position " + num(r.position) + " exceeds the format limit " + num(kMaxBlobPosition));
    if (r.consumed > kMaxBlobPosition || r.consumed < r.position)
        return fail(BlobError::bad_header, kOffConsumed,
                    "consumed " + num(r.consumed) + " must be in [position " + num(r.position) + ", " +
                        num(kMaxBlobPosition) + "]");
    if (!(r.contents & kBlobTokens) && r.consumed != r.position)
        return fail(BlobError::bad_header, kOffConsumed,
                    "consumed " + num(r.consumed) + " differs from position " + num(r.position) +
                        " but the blob has no tokens to recompute from");
    if (r.prompt_tokens > kMaxBlobPosition)
        return fail(BlobError::bad_header, kOffPrompt,
                    "prompt tokens " + num(r.prompt_tokens) + " exceed the format limit");
    if (!(r.contents & kBlobKv) && r.position != 0 && !(r.contents & kBlobRecurrent))
        return fail(BlobError::bad_header, kOffPosition,
                    "position " + num(r.position) + " but the blob carries neither KV nor state");
    return {};
}

BlobStatus check_sampler(const SamplerState& s, uint32_t has_spare, uint64_t offset) {
    if (!std::isfinite(s.temperature) || s.temperature < 0)
        return fail(BlobError::bad_sampler, offset,
                    "sampler temperature " + std::to_string(s.temperature) + " must be finite and >= 0");
    if (has_spare > 1)
        return fail(BlobError::bad_sampler, offset + 4,
                    "sampler has_spare is " + num(has_spare) + ", not 0 or 1");
    return {};
}

// ---- read_blob's stages, in the order it runs them ----

// The envelope: the magic (of as many bytes as there are), the length against a header and against
// the declared total, the checksum, the version. Nothing of the header but the total is read before
// the checksum has passed.
BlobStatus check_envelope(const std::byte* p, uint64_t n) {
    const size_t m = size_t(std::min<uint64_t>(n, 8));
    if (m && std::memcmp(p, kBlobMagic, m) != 0)
        return fail(BlobError::bad_magic, 0, "not a state blob: the first bytes are not the magic \"K3SEQ\"");
    if (n < kBlobHeaderBytes + kBlobTrailerBytes)
        return fail(BlobError::truncated, n,
                    "blob is " + num(n) + " B, shorter than a header and checksum (" +
                        num(kBlobHeaderBytes + kBlobTrailerBytes) + " B)");
    const uint64_t total = get64(p + kOffTotal);
    if (n < total)
        return fail(BlobError::truncated, n,
                    "blob is " + num(n) + " B, its header declares " + num(total) + " B");
    if (n > total)
        return fail(BlobError::trailing_bytes, total,
                    "blob is " + num(n) + " B, its header declares " + num(total) + " B: " + num(n - total) +
                        " bytes follow its end");
    const uint32_t stored = get32(p + n - 4), crc = crc32c(p, size_t(n - 4));
    if (stored != crc) {
        char b[64];
        std::snprintf(b, sizeof b, "stored 0x%08x, computed 0x%08x", unsigned(stored), unsigned(crc));
        return fail(BlobError::checksum_mismatch, n - 4,
                    std::string("CRC-32C mismatch (") + b + "): the blob was changed");
    }
    const uint32_t version = get32(p + kOffVersion);
    if (version != kBlobVersion)
        return fail(BlobError::unsupported_version, kOffVersion,
                    "format version " + num(version) + ", this reader knows version " + num(kBlobVersion));
    return {};
}

// The layout block at kOffLayout, as stored (its limits are checked with the other header values).
void read_layout(const std::byte* lp, BlobLayout& l) {
    l.state_order = StateOrder(uint8_t(lp[0]));
    l.state_dtype = DType(uint8_t(lp[1]));
    l.conv_dtype = DType(uint8_t(lp[2]));
    l.kv_dtype = DType(uint8_t(lp[3]));
    uint32_t* fields[] = {&l.linear_layers, &l.attention_layers, &l.heads,  &l.v_heads, &l.head_k,
                          &l.head_v,        &l.conv_width,       &l.kv_row, &l.chunk};
    for (size_t i = 0; i < 9; ++i) *fields[i] = get32(lp + 4 + 4 * i);
}

// The header's own fields (its size, the reserved field), then its values into r and their checks
// (check_header_values: the same rules the writer follows).
BlobStatus read_header(const std::byte* p, RequestState& r) {
    if (get32(p + 12) != kBlobHeaderBytes)
        return fail(BlobError::bad_header, 12,
                    "header size " + num(get32(p + 12)) + ", version 1 has " + num(kBlobHeaderBytes));
    if (get64(p + kOffReserved) != 0)
        return fail(BlobError::bad_header, kOffReserved, "reserved header field is not zero");
    r.model_hash = get64(p + kOffModelHash);
    r.position = get64(p + kOffPosition);
    r.consumed = get64(p + kOffConsumed);
    r.prompt_tokens = get64(p + kOffPrompt);
    r.contents = get32(p + kOffContents);
    read_layout(p + kOffLayout, r.layout);
    return check_header_values(r);
}

// The 16 B header of the section at `off`, against the one expected there. On success *bytes is its
// payload size, checked to fit before `end` and to be what the header implies.
BlobStatus check_section_header(const std::byte* p, uint64_t off, uint64_t end, const Expected& e,
                                const RequestState& r, uint64_t* bytes) {
    if (end - off < kSectionHeaderBytes)
        return fail(BlobError::bad_section, off,
                    std::string("the ") + kind_name(e.kind) + " section header at byte " + num(off) +
                        " runs past the end");
    const uint32_t kind = get32(p + off), layer = get32(p + off + 4);
    *bytes = get64(p + off + 8);
    const std::string where = std::string(kind_name(e.kind)) +
                              (e.kind <= kKv ? " of layer " + num(e.layer) : "") + " (section at byte " +
                              num(off) + ")";
    if (kind != e.kind || layer != e.layer)
        return fail(BlobError::bad_section, off,
                    "expected the " + where + ", found kind " + num(kind) + " (" + kind_name(kind) +
                        ") layer " + num(layer));
    const uint64_t payload = off + kSectionHeaderBytes, size_at = off + 8;  // errors below point at the size
    if (*bytes > end - payload)
        return fail(BlobError::bad_section, size_at,
                    where + ": " + num(*bytes) + " payload bytes run past the end of the blob");
    if (e.kind == kKv && *bytes != e.bytes) {  // whole rows, but not `position` of them
        const uint64_t row = r.layout.kv_bytes_per_token_per_layer();
        if (row && *bytes % row == 0)
            return fail(BlobError::position_mismatch, size_at,
                        "header position is " + num(r.position) + " tokens but the " + where + " holds " +
                            num(*bytes / row) + " rows");
    }
    if (e.kind == kTokens ? *bytes % 4 != 0 : *bytes != e.bytes)
        return fail(BlobError::bad_section, size_at,
                    where + ": " + num(*bytes) + " payload bytes, expected " +
                        (e.kind == kTokens ? std::string("a multiple of 4") : num(e.bytes)));
    return {};
}

// The payload of a checked section, `bytes` long at `off` (its size field at off - 8), into r, with
// the checks of its values: enough tokens, a valid sampler.
BlobStatus take_payload(const std::byte* p, uint64_t off, uint64_t bytes, const Expected& e,
                        RequestState& r) {
    const std::byte* q = p + off;
    switch (e.kind) {
        case kRecurrent:
        case kConv: r.state.insert(r.state.end(), q, q + bytes); break;
        case kKv: r.kv.insert(r.kv.end(), q, q + bytes); break;
        case kTokens:
            if (bytes / 4 < r.consumed)
                return fail(BlobError::bad_tokens, off - 8,
                            num(bytes / 4) + " tokens, fewer than the " + num(r.consumed) + " consumed");
            r.tokens.resize(size_t(bytes / 4));
            for (size_t i = 0; i < r.tokens.size(); ++i) r.tokens[i] = int32_t(get32(q + 4 * i));
            break;
        case kSampler: {
            const uint32_t tb = get32(q), has_spare = get32(q + 4);
            std::memcpy(&r.sampler.temperature, &tb, 4);
            for (int i = 0; i < 4; ++i) r.sampler.rng.s[i] = get64(q + 8 + 8 * i);
            const uint64_t sb = get64(q + 40);
            std::memcpy(&r.sampler.rng.spare, &sb, 8);
            r.sampler.rng.has_spare = has_spare == 1;
            if (BlobStatus s = check_sampler(r.sampler, has_spare, off); !s.ok()) return s;
            break;
        }
    }
    return {};
}

// The sections after the header, each where the previous one ended, exactly as many as `secs`, up
// to the trailer and not a byte short of it.
BlobStatus read_sections(const std::byte* p, uint64_t n, const std::vector<Expected>& secs, RequestState& r) {
    uint64_t off = kBlobHeaderBytes;
    const uint64_t end = n - kBlobTrailerBytes;
    const BlobLayout& l = r.layout;
    if (r.contents & kBlobRecurrent) {  // only what the blob can hold: the layout's claim is not trusted yet
        const uint64_t want = (l.recurrent_bytes_per_layer() + l.conv_bytes_per_layer()) * l.linear_layers;
        if (want <= n) r.state.reserve(size_t(want));
    }
    for (const Expected& e : secs) {
        uint64_t bytes = 0;
        if (BlobStatus s = check_section_header(p, off, end, e, r, &bytes); !s.ok()) return s;
        off += kSectionHeaderBytes;
        if (BlobStatus s = take_payload(p, off, bytes, e, r); !s.ok()) return s;
        off += bytes;
    }
    if (off != end)
        return fail(BlobError::bad_section, off, num(end - off) + " unexpected bytes after the last section");
    return {};
}

}  // namespace

std::string write_blob(const RequestState& r, std::vector<std::byte>* out) {
    out->clear();
    if (BlobStatus s = check_header_values(r); !s.ok()) return s.message;
    const BlobLayout& l = r.layout;
    const uint64_t per_layer_state = l.recurrent_bytes_per_layer() + l.conv_bytes_per_layer();
    if ((r.contents & kBlobRecurrent) && r.state.size() != per_layer_state * l.linear_layers)
        return "state is " + num(r.state.size()) + " B, the layout needs " +
               num(per_layer_state * l.linear_layers);
    const uint64_t kv_layer = r.position * l.kv_bytes_per_token_per_layer();
    if ((r.contents & kBlobKv) && r.kv.size() != kv_layer * l.attention_layers)
        return "KV is " + num(r.kv.size()) + " B, " + num(r.position) + " tokens need " +
               num(kv_layer * l.attention_layers);
    if ((r.contents & kBlobTokens) && r.tokens.size() < r.consumed)
        return num(r.tokens.size()) + " tokens, fewer than the " + num(r.consumed) + " consumed";
    const std::vector<Expected> secs = expected_sections(l, r.position, r.contents);
    const uint64_t total = blob_bytes(l, r.position, r.tokens.size(), r.contents);
    std::vector<std::byte>& b = *out;
    b.reserve(size_t(total));
    put_bytes(b, kBlobMagic, 8);
    put32(b, kBlobVersion);
    put32(b, uint32_t(kBlobHeaderBytes));
    put64(b, total);
    put64(b, r.model_hash);
    put64(b, r.position);
    put64(b, r.consumed);
    put64(b, r.prompt_tokens);
    put32(b, r.contents);
    put32(b, uint32_t(secs.size()));
    b.push_back(std::byte(l.state_order));
    b.push_back(std::byte(l.state_dtype));
    b.push_back(std::byte(l.conv_dtype));
    b.push_back(std::byte(l.kv_dtype));
    for (uint32_t v : {l.linear_layers, l.attention_layers, l.heads, l.v_heads, l.head_k, l.head_v,
                       l.conv_width, l.kv_row, l.chunk})
        put32(b, v);
    put64(b, 0);  // reserved
    const std::byte* state = r.state.data();
    const std::byte* kv = r.kv.data();
    for (const Expected& e : secs) {
        put32(b, e.kind);
        put32(b, e.layer);
        switch (e.kind) {
            case kRecurrent:
            case kConv:
                put64(b, e.bytes);
                put_bytes(b, state, size_t(e.bytes));
                state += e.bytes;
                break;
            case kKv:
                put64(b, e.bytes);
                put_bytes(b, kv, size_t(e.bytes));
                kv += e.bytes;
                break;
            case kTokens:
                put64(b, 4 * uint64_t(r.tokens.size()));
                for (int32_t t : r.tokens) put32(b, uint32_t(t));
                break;
            case kSampler: {
                put64(b, kSamplerPayloadBytes);
                uint32_t tb;
                std::memcpy(&tb, &r.sampler.temperature, 4);
                put32(b, tb);
                put32(b, r.sampler.rng.has_spare ? 1u : 0u);
                for (uint64_t s : r.sampler.rng.s) put64(b, s);
                uint64_t sb;
                std::memcpy(&sb, &r.sampler.rng.spare, 8);
                put64(b, sb);
                break;
            }
        }
    }
    put32(b, crc32c(b.data(), b.size()));
    if (b.size() != total) {  // blob_bytes and the writer disagree: a bug, never a user error
        b.clear();
        return "internal: wrote " + num(b.size()) + " B, blob_bytes says " + num(total);
    }
    return {};
}

BlobStatus read_blob(std::span<const std::byte> blob, RequestState* out) {
    *out = RequestState{};
    const uint64_t n = blob.size();
    const std::byte* p = blob.data();
    if (BlobStatus s = check_envelope(p, n); !s.ok()) return s;
    RequestState r;
    if (BlobStatus s = read_header(p, r); !s.ok()) return s;
    const std::vector<Expected> secs = expected_sections(r.layout, r.position, r.contents);
    const uint32_t count = get32(p + kOffSections);
    if (count != secs.size())
        return fail(BlobError::bad_header, kOffSections,
                    "section count " + num(count) + ", contents " + contents_text(r.contents) + " need " +
                        num(secs.size()));
    if (BlobStatus s = read_sections(p, n, secs, r); !s.ok()) return s;
    if ((r.contents & kBlobTokens) && r.prompt_tokens > r.tokens.size())
        return fail(
            BlobError::bad_tokens, kOffPrompt,
            "prompt of " + num(r.prompt_tokens) + " tokens, but the blob holds " + num(r.tokens.size()));
    *out = std::move(r);
    return {};
}

BlobStatus check_blob(const RequestState& r, const BlobExpect& e) {
    if (r.model_hash != e.model_hash) {
        char b[96];
        std::snprintf(b, sizeof b, "written by model 0x%016llx, this model is 0x%016llx",
                      static_cast<unsigned long long>(r.model_hash),
                      static_cast<unsigned long long>(e.model_hash));
        return fail(BlobError::model_mismatch, kOffModelHash, b);
    }
    if (std::string d = r.layout.difference(e.layout); !d.empty())
        return fail(BlobError::layout_mismatch, kOffLayout, "layout differs: " + d);
    if (e.consumed && r.consumed != *e.consumed)
        return fail(
            BlobError::position_mismatch, kOffConsumed,
            "the blob resumes after " + num(r.consumed) + " tokens, the request is at " + num(*e.consumed));
    if (e.vocab > 0)
        for (size_t i = 0; i < r.tokens.size(); ++i)
            if (r.tokens[i] < 0 || r.tokens[i] >= e.vocab)
                return fail(BlobError::bad_tokens, 0,
                            "token " + num(i) + " (id " + std::to_string(r.tokens[i]) +
                                ") is outside the vocabulary [0, " + std::to_string(e.vocab) + ")");
    return {};
}

BlobStatus read_blob(std::span<const std::byte> blob, const BlobExpect& e, RequestState* out) {
    if (BlobStatus s = read_blob(blob, out); !s.ok()) return s;
    if (BlobStatus s = check_blob(*out, e); !s.ok()) {
        *out = RequestState{};
        return s;
    }
    return {};
}

void reseal_blob(std::vector<std::byte>& blob) {
    if (blob.size() < kBlobTrailerBytes) return;
    const size_t n = blob.size() - 4;
    const uint32_t c = crc32c(blob.data(), n);
    for (int i = 0; i < 4; ++i) blob[n + size_t(i)] = std::byte(c >> (8 * i));
}

}  // namespace k3::lifecycle
