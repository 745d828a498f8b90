// Immutable token sequences that the radix cache and the workloads share.
//
// A sequence is a list of pieces. A piece is either literal tokens (the runnable model's prompts) or
// a run of a deterministic pseudo-token stream named by a 64-bit key (the Mooncake trace expands
// each 512-token block id into such a run; synthetic workloads name each message by a key). Stream
// runs cost 24 bytes however long they are, which keeps the conversation trace (145 M prompt tokens)
// in a few megabytes, and two runs of the same stream at the same offset are equal without reading
// a token: that identity is what makes comparing long prefixes cheap.
//
// A stream token is its identity (stream key, index), not its value: pseudo_token keeps 32 bits, so
// distinct streams share values (the Mooncake blocks 17348 and 26151 start with the same one, and a
// million one-block requests meet about a hundred such pairs), and comparing values would count
// content the trace says differs as a hit. Two stream tokens are equal only when they are the same
// stream's same index; literal tokens (real token ids) are equal when their values are; a literal
// token never equals a stream token (a pseudo-token stands for unknown content, not for an id). This
// is an equivalence, and equality is always exact (never a hash match).
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/base/rng.h"

namespace k3 {

using Token = uint32_t;

// Token i of the pseudo-token stream `key`: the (i+1)-th output of SplitMix64 seeded with the key,
// upper 32 bits.
inline Token pseudo_token(uint64_t key, uint64_t i) {
    return Token(mix64(key + i * 0x9e3779b97f4a7c15ull) >> 32);
}

class TokenSeq;
using TokenSeqPtr = std::shared_ptr<const TokenSeq>;

class TokenSeq {
  public:
    // Longest sequence accepted (positions are stored in 32 bits by the cache).
    static constexpr uint64_t kMaxLength = (uint64_t(1) << 32) - 1;

    struct Piece {
        uint64_t start = 0;   // position of the piece's first token in the sequence
        uint64_t key = 0;     // stream key (stream pieces)
        uint64_t offset = 0;  // stream: index of the first token in the stream; literal: index in storage
        uint32_t len = 0;
        bool literal = false;
    };

    class Builder {
      public:
        // `len` tokens of stream `key` starting at stream index `offset`.
        Builder& stream(uint64_t key, uint64_t offset, uint32_t len);
        Builder& tokens(std::span<const Token> t);
        // Append all of `s` (or its first n tokens): turn k+1 of a chat extends turn k.
        Builder& append(const TokenSeq& s, uint64_t n = UINT64_MAX);
        uint64_t size() const { return size_; }
        // False (and nothing built) if the sequence would exceed kMaxLength.
        bool ok() const { return ok_; }
        TokenSeqPtr build();

      private:
        std::vector<Piece> pieces_;
        std::vector<Token> lit_;
        uint64_t size_ = 0;
        bool ok_ = true;
    };

    static TokenSeqPtr literal(std::span<const Token> t) { return Builder().tokens(t).build(); }

    uint64_t size() const { return size_; }
    const std::vector<Piece>& pieces() const { return pieces_; }
    // Index of the piece holding position pos (pos < size()).
    size_t piece_at(uint64_t pos) const;
    Token at(uint64_t pos) const;
    // Copies tokens [from, from + n) to out (from + n <= size()).
    void read(uint64_t from, uint64_t n, Token* out) const;
    std::vector<Token> to_vector(uint64_t from = 0, uint64_t n = UINT64_MAX) const;
    // Approximate heap bytes held (pieces and literal tokens).
    uint64_t bytes() const { return pieces_.size() * sizeof(Piece) + lit_.size() * sizeof(Token); }

    Token piece_token(const Piece& p, uint64_t pos) const {
        const uint64_t i = p.offset + (pos - p.start);
        return p.literal ? lit_[i] : pseudo_token(p.key, i);
    }

    // What token pos is under the equality above, ordered: equal ids exactly when the tokens are
    // equal (sorting sequences by value would tie distinct streams that share a value).
    struct TokenId {
        bool stream = false;
        uint64_t key = 0;    // stream key (0 for a literal token)
        uint64_t value = 0;  // stream index, or the literal token's value
        auto operator<=>(const TokenId&) const = default;
    };
    TokenId id_at(uint64_t pos) const;

  private:
    friend class Builder;
    std::vector<Piece> pieces_;
    std::vector<Token> lit_;
    uint64_t size_ = 0;
};

// First position in [from, to) where a and b differ, or `to` if they agree there
// (to <= min(a.size(), b.size())). Runs of the same stream at the same stream index are skipped
// without reading tokens, any other stream token differs at once, and literal tokens are compared
// by value.
uint64_t common_prefix(const TokenSeq& a, const TokenSeq& b, uint64_t from, uint64_t to);

// Hash of the values of tokens [from, from + n): the key of a radix-tree child (its first page).
// Equal pages have equal values, hence equal fingerprints; pages of different streams may share
// values too, so the tree confirms a fingerprint match with common_prefix.
uint64_t page_fingerprint(const TokenSeq& s, uint64_t from, uint64_t n);

// Chained hashes of the whole blocks of s[0, len): entry b names blocks 0..b, as vLLM's block hasher
// (kv_cache_utils.get_request_block_hasher) and Dynamo's compute_seq_hash_for_block chain a block with
// its parent. Cheap on long prompts: a stream run is hashed by (key, offset, length) without reading its
// tokens (maximal runs, so a run split across pieces hashes as one), literal tokens one by one: the
// identities common_prefix compares, so equal blocks hash equally and only a 64-bit collision makes
// different blocks match; callers that need certainty confirm a match with common_prefix.
std::vector<uint64_t> block_hash_chain(const TokenSeq& s, uint64_t len, uint64_t block);
// Appends the hashes of the blocks after the `chain.size()` ones `chain` already holds (a chain grown as
// its sequence's cached length grows).
void extend_block_hash_chain(const TokenSeq& s, uint64_t len, uint64_t block, std::vector<uint64_t>& chain);

}  // namespace k3
