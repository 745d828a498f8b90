// The state blob (core/lifecycle/blob.h): round trip, and every injected fault rejected with its own
// error: every bit of a small blob flipped, truncation at every length, trailing bytes, and forged
// (re-checksummed) blobs with a wrong model hash, layout, position, version or field value.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/base/rng.h"
#include "core/lifecycle/blob.h"

using namespace k3;
using namespace k3::lifecycle;

namespace {

// A small, complete request state: 2 linear layers (K = 4, V = 3, one head), 1 attention layer of
// 5-element rows, 3 tokens of KV, 5 token ids (the last two pending), a temperature sampler.
RequestState small_state() {
    RequestState r;
    r.model_hash = 0x1234567890abcdefull;
    BlobLayout& l = r.layout;
    l.linear_layers = 2, l.attention_layers = 1, l.heads = 1, l.v_heads = 1, l.head_k = 4, l.head_v = 3;
    l.conv_width = 4, l.kv_row = 5, l.chunk = 16;
    r.position = 3, r.consumed = 3, r.prompt_tokens = 2;
    r.contents = kBlobAll;
    Rng rng(7);
    r.state.resize(size_t((l.recurrent_bytes_per_layer() + l.conv_bytes_per_layer()) * l.linear_layers));
    r.kv.resize(size_t(3 * l.kv_bytes_per_token_per_layer()));
    for (auto& b : r.state) b = std::byte(rng.below(256));
    for (auto& b : r.kv) b = std::byte(rng.below(256));
    r.tokens = {5, 9, 2, 7, 1};
    Rng sr(99);
    sr.normal();  // leaves a spare deviate cached
    r.sampler = {0.7f, sr.state()};
    return r;
}

BlobExpect expect_of(const RequestState& r) {
    BlobExpect e;
    e.model_hash = r.model_hash;
    e.layout = r.layout;
    e.vocab = 16;
    return e;
}

std::vector<std::byte> written(const RequestState& r) {
    std::vector<std::byte> b;
    const std::string e = write_blob(r, &b);
    REQUIRE_MESSAGE(e.empty(), e);
    return b;
}

void put32(std::vector<std::byte>& b, size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[off + size_t(i)] = std::byte(v >> (8 * i));
}
void put64(std::vector<std::byte>& b, size_t off, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[off + size_t(i)] = std::byte(v >> (8 * i));
}

BlobError read_error(const std::vector<std::byte>& b, const BlobExpect& e) {
    RequestState out;
    const BlobStatus s = read_blob(b, e, &out);
    if (!s.ok()) {
        CHECK_FALSE(s.message.empty());
        CHECK(out.state.empty());  // nothing half-read is handed out
        CHECK(out.tokens.empty());
    }
    return s.code;
}

}  // namespace

TEST_CASE("lifecycle blob: round trip, exact size, stable bytes") {
    const RequestState r = small_state();
    const std::vector<std::byte> b = written(r);
    CHECK(b.size() == blob_bytes(r.layout, r.position, r.tokens.size(), r.contents));
    CHECK(std::memcmp(b.data(), kBlobMagic, 8) == 0);
    RequestState back;
    const BlobStatus s = read_blob(b, expect_of(r), &back);
    REQUIRE_MESSAGE(s.ok(), s.message);
    CHECK(back.model_hash == r.model_hash);
    CHECK(back.layout == r.layout);
    CHECK(back.position == 3);
    CHECK(back.consumed == 3);
    CHECK(back.prompt_tokens == 2);
    CHECK(back.contents == kBlobAll);
    CHECK(back.state == r.state);
    CHECK(back.kv == r.kv);
    CHECK(back.tokens == r.tokens);
    CHECK(back.sampler.temperature == 0.7f);
    CHECK(std::memcmp(back.sampler.rng.s, r.sampler.rng.s, sizeof r.sampler.rng.s) == 0);
    CHECK(back.sampler.rng.has_spare);
    CHECK(back.sampler.rng.spare == r.sampler.rng.spare);
    // The restored generator continues the same stream.
    Rng a = Rng::from_state(r.sampler.rng), c = Rng::from_state(back.sampler.rng);
    CHECK(a.normal() == c.normal());
    CHECK(a.next() == c.next());
    // Writing is deterministic: same state, same bytes (no padding, no uninitialised bytes).
    CHECK(written(back) == b);
    // Partial contents: tokens and sampler only.
    RequestState t = r;
    t.contents = kBlobTokens | kBlobSampler;
    t.position = 0;
    t.state.clear();
    t.kv.clear();
    const std::vector<std::byte> tb = written(t);
    CHECK(tb.size() == 112 + 16 + 20 + 16 + 48 + 4);
    CHECK(read_blob(tb, expect_of(t), &back).ok());
    CHECK(back.consumed == 3);
    CHECK(back.position == 0);
}

TEST_CASE("lifecycle blob: the writer refuses inconsistent states") {
    std::vector<std::byte> b;
    RequestState r = small_state();
    r.kv.pop_back();
    CHECK(write_blob(r, &b).find("KV is") != std::string::npos);
    CHECK(b.empty());
    r = small_state();
    r.state.push_back(std::byte{0});
    CHECK(write_blob(r, &b).find("state is") != std::string::npos);
    r = small_state();
    r.consumed = 9;
    CHECK(write_blob(r, &b).find("tokens, fewer") != std::string::npos);
    r = small_state();
    r.contents = kBlobRecurrent | kBlobKv;
    CHECK(write_blob(r, &b).find("only resume together") != std::string::npos);
    r = small_state();
    r.layout.v_heads = 3, r.layout.heads = 2;
    CHECK(write_blob(r, &b).find("multiple") != std::string::npos);
}

TEST_CASE("lifecycle blob: every flipped bit is rejected") {
    const RequestState r = small_state();
    const std::vector<std::byte> b = written(r);
    const BlobExpect e = expect_of(r);
    int checksum = 0;
    for (size_t byte = 0; byte < b.size(); ++byte)
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<std::byte> f = b;
            f[byte] ^= std::byte(1u << bit);
            const BlobError err = read_error(f, e);
            CAPTURE(byte);
            CAPTURE(bit);
            if (byte < 8)
                CHECK(err == BlobError::bad_magic);
            else if (byte >= kOffTotal && byte < kOffTotal + 8)
                CHECK((err == BlobError::truncated || err == BlobError::trailing_bytes));
            else
                CHECK(err == BlobError::checksum_mismatch);
            checksum += err == BlobError::checksum_mismatch;
        }
    CHECK(checksum == int(b.size() - 16) * 8);
}

TEST_CASE("lifecycle blob: truncation at every length and trailing bytes are rejected") {
    const RequestState r = small_state();
    const std::vector<std::byte> b = written(r);
    for (size_t n = 0; n < b.size(); ++n) {
        CAPTURE(n);
        CHECK(read_error(std::vector<std::byte>(b.begin(), b.begin() + ptrdiff_t(n)), expect_of(r)) ==
              BlobError::truncated);
    }
    std::vector<std::byte> longer = b;
    longer.push_back(std::byte{0});
    CHECK(read_error(longer, expect_of(r)) == BlobError::trailing_bytes);
    CHECK(read_error(std::vector<std::byte>(200, std::byte{0x41}), expect_of(r)) == BlobError::bad_magic);
}

TEST_CASE("lifecycle blob: forged blobs with a wrong model, layout or position are rejected") {
    const RequestState r = small_state();
    const BlobExpect e = expect_of(r);
    auto forged = [&](auto edit) {
        std::vector<std::byte> b = written(r);
        edit(b);
        reseal_blob(b);
        return read_error(b, e);
    };
    CHECK(forged([](auto& b) { put64(b, kOffModelHash, 0x1234567890abcdeeull); }) ==
          BlobError::model_mismatch);
    // [V][K] instead of [K][V]: same sizes, another meaning.
    CHECK(forged([](auto& b) { b[kOffLayout] = std::byte{1}; }) == BlobError::layout_mismatch);
    CHECK(forged([](auto& b) { put32(b, kOffLayout + 4 + 8 * 4, 64); }) ==
          BlobError::layout_mismatch);  // chunk
    CHECK(forged([](auto& b) { b[kOffLayout + 2] = std::byte(uint8_t(DType::bf16)); }) ==
          BlobError::bad_section);
    CHECK(forged([](auto& b) { b[kOffLayout + 1] = std::byte{9}; }) == BlobError::bad_layout);
    CHECK(forged([](auto& b) { put32(b, kOffLayout + 4 + 4 * 4, 8); }) == BlobError::bad_section);  // head_k
    // Position one further than the KV rows.
    CHECK(forged([](auto& b) {
              put64(b, kOffPosition, 4);
              put64(b, kOffConsumed, 4);
          }) == BlobError::position_mismatch);
    CHECK(forged([](auto& b) { put64(b, kOffConsumed, 2); }) ==
          BlobError::bad_header);  // consumed < position
    CHECK(forged([](auto& b) { put32(b, kOffVersion, 2); }) == BlobError::unsupported_version);
    CHECK(forged([](auto& b) { put64(b, kOffReserved, 1); }) == BlobError::bad_header);
    CHECK(forged([](auto& b) { put32(b, kOffContents, kBlobAll | 64); }) == BlobError::bad_header);
    CHECK(forged([](auto& b) { put32(b, kOffSections, 3); }) == BlobError::bad_header);
    CHECK(forged([](auto& b) { put64(b, kOffPrompt, 6); }) == BlobError::bad_tokens);
    // The request is somewhere else than the blob says.
    BlobExpect later = e;
    later.consumed = 4;
    CHECK(read_error(written(r), later) == BlobError::position_mismatch);
    // Token ids outside the vocabulary.
    RequestState big = r;
    big.tokens[4] = 16;
    CHECK(read_error(written(big), e) == BlobError::bad_tokens);
    // Sampler values.
    RequestState bad = r;
    bad.sampler.temperature = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::byte> b;
    REQUIRE(write_blob(bad, &b).empty());  // the writer does not police sampler values; the reader does
    CHECK(read_error(b, e) == BlobError::bad_sampler);
}
