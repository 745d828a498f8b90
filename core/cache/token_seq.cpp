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
        if (same_run) {
            pos = end;
        } else {
            for (; pos < end; ++pos)
                if (a.piece_token(x, pos) != b.piece_token(y, pos)) return pos;
        }
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

}  // namespace k3
