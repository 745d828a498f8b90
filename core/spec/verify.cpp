#include "core/spec/verify.h"

#include <algorithm>

namespace k3::spec {

using model::CoreMode;
using model::ForwardOptions;
using model::LogitRows;

const char* rollback_name(Rollback r) { return r == Rollback::snapshot ? "snapshot" : "replay"; }

Verifier::Verifier(model::Model& m, Rollback how, RecordVariant variant, VerifyFault fault)
    : m_(m),
      how_(how),
      variant_(variant),
      fault_(fault),
      recorder_(m, variant, fault == VerifyFault::short_record) {}

std::string Verifier::begin(const model::Sequence& seq) {
    confirmed_ = m_.save_state(seq);
    position_ = seq.position();
    snapshots_.clear();
    recorder_.begin(confirmed_);
    verified_ = 0;
    begun_ = true;
    return {};
}

std::string Verifier::extend(model::Sequence& seq, std::span<const int32_t> tokens,
                             std::vector<float>* logits) {
    if (!begun_) return "verify: begin() first";
    if (seq.position() != position_ + uint64_t(verified_))
        return "verify: the sequence moved since begin() (position " + std::to_string(seq.position()) +
               ", expected " + std::to_string(position_ + uint64_t(verified_)) + ")";
    if (tokens.empty()) return {};
    const size_t V = size_t(m_.vocab());
    if (how_ == Rollback::replay) {
        const CoreMode core = fault_ == VerifyFault::chunked_verify ? CoreMode::chunked : CoreMode::recurrent;
        const ForwardOptions fo{core, logits ? LogitRows::all : LogitRows::none, &recorder_};
        if (std::string e = m_.forward(seq, tokens, fo, logits ? &row_ : nullptr); !e.empty()) return e;
        if (logits) logits->insert(logits->end(), row_.begin(), row_.begin() + ptrdiff_t(tokens.size() * V));
        if (fault_ == VerifyFault::flip_record_bit && verified_ == 0) recorder_.flip_record_bit(0, 0, 22);
        if (fault_ == VerifyFault::flip_correction_bit && verified_ == 0)
            recorder_.flip_record_bit(0, 0, 22, true);
    } else {
        const ForwardOptions fo{CoreMode::recurrent, logits ? LogitRows::last : LogitRows::none, nullptr};
        for (int32_t t : tokens) {
            if (std::string e =
                    m_.forward(seq, std::span<const int32_t>(&t, 1), fo, logits ? &row_ : nullptr);
                !e.empty())
                return e;
            if (logits) logits->insert(logits->end(), row_.begin(), row_.begin() + ptrdiff_t(V));
            snapshots_.push_back(m_.save_state(seq));
        }
    }
    verified_ += int(tokens.size());
    return {};
}

std::string Verifier::keep(model::Sequence& seq, int n, bool force) {
    if (!begun_) return "keep: nothing verified (begin() first)";
    if (n < 0 || n > verified_)
        return "keep: " + std::to_string(n) + " tokens asked, " + std::to_string(verified_) + " verified";
    if (seq.position() != position_ + uint64_t(verified_))
        return "keep: the sequence moved since the verification";
    if (n == verified_ && !force) return {};
    if (how_ == Rollback::snapshot) {
        const int from = fault_ == VerifyFault::snapshot_position ? std::min(n + 1, verified_) : n;
        if (std::string e = m_.restore_state(seq, from == 0 ? confirmed_ : snapshots_[size_t(from - 1)]);
            !e.empty())
            return e;
    } else {
        if (std::string e = m_.restore_state(seq, confirmed_); !e.empty()) return e;
        replay(m_, seq, recorder_.records(), 0, n, scratch_);
        replayed_ += uint64_t(n);
    }
    return m_.truncate(seq, position_ + uint64_t(n));
}

uint64_t Verifier::bytes_held() const {
    uint64_t b = confirmed_.size();
    for (const auto& s : snapshots_) b += s.size();
    if (how_ == Rollback::replay) b += recorder_.records().bytes();
    return b;
}

}  // namespace k3::spec
