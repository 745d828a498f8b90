#include "core/cache/token_seq.h"

#include <algorithm>

namespace k3 {

TokenSeq::Builder& TokenSeq::Builder::stream(uint64_t key, uint64_t offset, uint32_t len) {
    if (len == 0 || !ok_) return *this;
    if (size_ + len > kMaxLength) {
        ok_ = false;
        return *this;
    }
    // Extend the previous piece when this run continues it (a message split across calls).
    if (!pieces_.empty()) {
        Piece& p = pieces_.back();
        if (!p.literal && p.key == key && p.offset + p.len == offset && uint64_t(p.len) + len <= UINT32_MAX) {
            p.len += len;
            size_ += len;
            return *this;
        }
    }
    pieces_.push_back({size_, key, offset, len, false});
    size_ += len;
    return *this;
}

TokenSeq::Builder& TokenSeq::Builder::tokens(std::span<const Token> t) {
    if (t.empty() || !ok_) return *this;
    if (size_ + t.size() > kMaxLength) {
        ok_ = false;
        return *this;
    }
    size_t done = 0;
    while (done < t.size()) {
        const uint32_t n = uint32_t(std::min<size_t>(t.size() - done, UINT32_MAX));
        if (!pieces_.empty() && pieces_.back().literal &&
            pieces_.back().offset + pieces_.back().len == lit_.size() &&
            uint64_t(pieces_.back().len) + n <= UINT32_MAX) {
            pieces_.back().len += n;
        } else {
            pieces_.push_back({size_, 0, lit_.size(), n, true});
        }
        lit_.insert(lit_.end(), t.begin() + ptrdiff_t(done), t.begin() + ptrdiff_t(done + n));
        size_ += n;
        done += n;
    }
    return *this;
}

TokenSeq::Builder& TokenSeq::Builder::append(const TokenSeq& s, uint64_t n) {
    n = std::min(n, s.size());
    for (const Piece& p : s.pieces()) {
        if (p.start >= n) break;
        const uint32_t len = uint32_t(std::min<uint64_t>(p.len, n - p.start));
        if (p.literal)
            tokens(std::span<const Token>(s.lit_.data() + p.offset, len));
        else
            stream(p.key, p.offset, len);
    }
    return *this;
}

TokenSeqPtr TokenSeq::Builder::build() {
    if (!ok_) return nullptr;
    auto s = std::make_shared<TokenSeq>();
    s->pieces_ = std::move(pieces_);
    s->lit_ = std::move(lit_);
    s->size_ = size_;
    pieces_.clear();
    lit_.clear();
    size_ = 0;
    return s;
}

size_t TokenSeq::piece_at(uint64_t pos) const {
    // The last piece whose start is <= pos.
    auto it = std::upper_bound(pieces_.begin(), pieces_.end(), pos,
                               [](uint64_t v, const Piece& p) { return v < p.start; });
    return size_t(it - pieces_.begin()) - 1;
}

Token TokenSeq::at(uint64_t pos) const { return piece_token(pieces_[piece_at(pos)], pos); }

TokenSeq::TokenId TokenSeq::id_at(uint64_t pos) const {
    const Piece& p = pieces_[piece_at(pos)];
    if (p.literal) return {false, 0, piece_token(p, pos)};
    return {true, p.key, p.offset + (pos - p.start)};
}

void TokenSeq::read(uint64_t from, uint64_t n, Token* out) const {
    if (n == 0) return;
    size_t i = piece_at(from);
    for (uint64_t pos = from, end = from + n; pos < end; ++pos) {
        if (pos >= pieces_[i].start + pieces_[i].len) ++i;
        *out++ = piece_token(pieces_[i], pos);
    }
}

std::vector<Token> TokenSeq::to_vector(uint64_t from, uint64_t n) const {
    if (from >= size_) return {};
    n = std::min(n, size_ - from);
    std::vector<Token> v(n);
    read(from, n, v.data());
    return v;
}

uint64_t common_prefix(const TokenSeq& a, const TokenSeq& b, uint64_t from, uint64_t to) {
    if (from >= to || &a == &b) return to;
    const auto& pa = a.pieces();
    const auto& pb = b.pieces();
    size_t ia = a.piece_at(from), ib = b.piece_at(from);
    uint64_t pos = from;
    while (pos < to) {
        const TokenSeq::Piece& x = pa[ia];
        const TokenSeq::Piece& y = pb[ib];
        const uint64_t ex = x.start + x.len, ey = y.start + y.len;
        const uint64_t end = std::min({ex, ey, to});
        const bool same_run = !x.literal && !y.literal && x.key == y.key &&
                              x.offset + (pos - x.start) == y.offset + (pos - y.start);
        if (same_run)
            pos = end;
        else if (!x.literal || !y.literal)
            return pos;  // a stream token equals only its own stream's same index
        else
            for (; pos < end; ++pos)
                if (a.piece_token(x, pos) != b.piece_token(y, pos)) return pos;
        if (pos == ex) ++ia;
        if (pos == ey) ++ib;
    }
    return to;
}

uint64_t page_fingerprint(const TokenSeq& s, uint64_t from, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    if (n == 0) return mix64(h);
    const auto& ps = s.pieces();
    size_t i = s.piece_at(from);
    for (uint64_t pos = from, end = from + n; pos < end; ++pos) {
        if (pos >= ps[i].start + ps[i].len) ++i;
        h = (h ^ s.piece_token(ps[i], pos)) * 0x100000001b3ull;
    }
    return mix64(h);
}

namespace {

// One block's content: stream runs by (key, offset, length), literal tokens by value.
struct RunHash {
    uint64_t h = 0x243f6a8885a308d3ull;
    bool open = false;
    uint64_t key = 0, offset = 0, len = 0;
    void flush() {
        if (open) h = mix64(h ^ mix64(key + 0x9e37) ^ mix64(offset * 0x51ed27 + len));
        open = false;
    }
    void stream(uint64_t k, uint64_t off, uint64_t n) {
        if (open && k == key && offset + len == off) {
            len += n;
            return;
        }
        flush();
        open = true, key = k, offset = off, len = n;
    }
    void token(Token t) {
        flush();
        h = mix64(h ^ (uint64_t(t) | (uint64_t(1) << 40)));
    }
};

constexpr uint64_t kChainRoot = 0x76c6c6d5f6e6f6eull;  // the root's parent (vLLM's init_none_hash)

uint64_t block_content_hash(const TokenSeq& q, uint64_t lo, uint64_t hi) {
    const auto& pieces = q.pieces();
    RunHash rh;
    for (size_t k = q.piece_at(lo); k < pieces.size() && pieces[k].start < hi; ++k) {
        const TokenSeq::Piece& p = pieces[k];
        const uint64_t a = std::max(lo, p.start), z = std::min(hi, p.start + p.len);
        if (p.literal)
            for (uint64_t pos = a; pos < z; ++pos) rh.token(q.piece_token(p, pos));
        else
            rh.stream(p.key, p.offset + (a - p.start), z - a);
    }
    rh.flush();
    return rh.h;
}

}  // namespace

void extend_block_hash_chain(const TokenSeq& s, uint64_t len, uint64_t block, std::vector<uint64_t>& chain) {
    if (block == 0) return;
    const uint64_t n = std::min<uint64_t>(len, s.size()) / block;
    uint64_t parent = chain.empty() ? kChainRoot : chain.back();
    chain.reserve(size_t(n));
    for (uint64_t b = chain.size(); b < n; ++b) {
        parent = mix64(parent * 0x100000001b3ull ^ block_content_hash(s, b * block, b * block + block));
        chain.push_back(parent);
    }
}

std::vector<uint64_t> block_hash_chain(const TokenSeq& s, uint64_t len, uint64_t block) {
    std::vector<uint64_t> chain;
    extend_block_hash_chain(s, len, block, chain);
    return chain;
}

}  // namespace k3
