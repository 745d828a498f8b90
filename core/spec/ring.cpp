#include "core/spec/ring.h"

#include <algorithm>
#include <cstring>

namespace k3::spec {

const char* overflow_name(Overflow o) { return o == Overflow::fold ? "fold" : "shorten"; }

StepPlan plan_step(const RingCursor& c, int draft_len, Overflow o) {
    if (c.count + draft_len <= c.capacity) return {false, draft_len};
    if (o == Overflow::shorten) {
        const int room = c.capacity - c.count;
        if (room >= std::min(2, draft_len)) return {false, room};  // at least one draft still fits
    }
    return {true, draft_len};
}

std::string RecordRing::check(int capacity, int draft_len) {
    if (draft_len < 1) return "draft length N (" + std::to_string(draft_len) + ") must be at least 1";
    if (capacity < draft_len)
        return "ring capacity L = " + std::to_string(capacity) +
               " is below the draft length N = " + std::to_string(draft_len) +
               ": one verification writes N records (the pending token and N - 1 " +
               "drafts), so the ring must hold at least N";
    return {};
}

RecordRing::RecordRing(model::Model& m, RecordVariant v, int capacity, RingFault fault)
    : m_(m), lay_(RecordLayout::of(m.kda(), v)), fault_(fault) {
    c_.capacity = std::max(capacity, 1);
    const size_t allotted = size_t(c_.capacity) + (fault == RingFault::spare_slot ? 1 : 0);
    slots_.resize(size_t(m.config().n_linear()));
    for (auto& s : slots_) s.assign(allotted * size_t(lay_.floats), 0.0f);
    tags_.assign(size_t(c_.capacity), RecordTag{});
}

uint64_t RecordRing::bytes() const {
    uint64_t b = checkpoint_.size();
    for (const FloatBuf& s : slots_) b += uint64_t(s.size()) * sizeof(float);
    return b;
}

bool RecordRing::fault_now(RingFault f) {
    if (fault_ != f || fault_spent_) return false;
    fault_spent_ = true;
    return true;
}

std::string RecordRing::reset(const model::Sequence& seq) {
    checkpoint_ = m_.save_state(seq);
    position_ = seq.position();
    c_.tail = c_.count = c_.pending = 0;
    tags_.assign(tags_.size(), RecordTag{});
    ++writes_;
    return {};
}

std::string RecordRing::check_position(int j) const {
    if (checkpoint_.empty()) return "ring: reset() first";
    if (j < 0 || j > c_.count + c_.pending)
        return "ring: position " + std::to_string(j) + " is outside the " +
               std::to_string(c_.count + c_.pending) + " records held";
    return {};
}

template <class At>
void RecordRing::replay_records(int first, int j, At at) {
    // Records first .. first + j - 1 lie in at most two contiguous runs of slots.
    const int start = c_.slot(first), head = std::min(j, c_.capacity - start);
    const int runs[2][2] = {{start, head}, {0, j - head}};
    for (const auto& r : runs) {
        if (r[1] <= 0) continue;
        for (size_t li = 0; li < slots_.size(); ++li)
            replay_layer(m_.kda_weights(int(li)), m_.kda(), lay_, at(int(li)),
                         slots_[li].data() + size_t(r[0]) * lay_.floats, r[1], scratch_, m_.options().impl);
    }
    replayed_ += uint64_t(j);
}

std::string RecordRing::from_checkpoint(model::Sequence& seq, int j) {
    if (std::string e = check_position(j); !e.empty()) return e;
    if (seq.position() < position_ + uint64_t(j))
        return "ring: the sequence holds " + std::to_string(seq.position()) + " tokens, position " +
               std::to_string(position_ + uint64_t(j)) + " asked";
    if (std::string e = m_.truncate(seq, position_ + uint64_t(j)); !e.empty()) return e;
    return m_.restore_state(seq, checkpoint_);
}

std::string RecordRing::materialise(model::Sequence& seq, int j) {
    if (std::string e = from_checkpoint(seq, j); !e.empty()) return e;
    replay_records(0, j, [&](int li) { return m_.kda_state(seq, li); });
    return {};
}

std::string RecordRing::state_at(int j, std::vector<std::byte>* out) {
    if (std::string e = check_position(j); !e.empty()) return e;
    *out = checkpoint_;
    const size_t per = size_t(m_.pool_model().state_bytes_per_layer);
    replay_records(0, j, [&](int li) {
        return model::KdaState::at(m_.kda(), reinterpret_cast<float*>(out->data() + size_t(li) * per));
    });
    return {};
}

// Slots whose record is not folded yet and not past `end` (the first position after the last push).
void RecordRing::count_live(uint64_t end) {
    int live = 0;
    for (const RecordTag& t : tags_) live += t.used && !t.folded && t.position < end;
    peak_live_ = std::max(peak_live_, live);
}

std::string RecordRing::push(const RecordBuffer& recs, int first, int n, uint64_t position,
                             std::span<const int32_t> tokens) {
    if (c_.pending != 0) return "ring: a verification is already pending";
    if (recs.layout().variant != lay_.variant || recs.layers() != int(slots_.size()))
        return "ring: records of another variant or model";
    if (first < 0 || n < 0 || first + n > recs.tokens())
        return "ring: records " + std::to_string(first) + " + " + std::to_string(n) + " of " +
               std::to_string(recs.tokens());
    if (tokens.size() != size_t(n))
        return "ring: " + std::to_string(tokens.size()) + " token ids for " + std::to_string(n) + " records";
    if (n > c_.free())
        return "ring overflow: " + std::to_string(n) + " records, " + std::to_string(c_.free()) +
               " slots free";
    const size_t F = size_t(lay_.floats);
    const int at = c_.count > 0 && fault_now(RingFault::overwrite_live) ? c_.count - 1 : c_.count;
    for (int i = 0; i < n; ++i) {
        const size_t slot = size_t(c_.slot(at + i));
        RecordTag& tag = tags_[slot];
        live_overwrites_ += tag.used && !tag.folded && tag.position < position;
        tag = {position + uint64_t(i), tokens[size_t(i)], true, false};
        for (size_t li = 0; li < slots_.size(); ++li)
            std::memcpy(slots_[li].data() + slot * F, recs.row(int(li), first + i), F * sizeof(float));
    }
    c_.pending = n;
    count_live(position + uint64_t(n));
    return {};
}

std::string RecordRing::accept(int n) {
    if (n < 0 || n > c_.pending)
        return "ring: " + std::to_string(n) + " records accepted, " + std::to_string(c_.pending) + " pending";
    c_.count += n;
    c_.pending = 0;
    if (c_.count > 0 && fault_now(RingFault::flip_record_bit))
        flip_record_bit(lay_, slots_[0].data() + size_t(c_.slot(0)) * size_t(lay_.floats), 22);
    return {};
}

std::string RecordRing::flush(model::Sequence& seq) {
    if (c_.pending != 0) return "ring: cannot flush with a verification pending";
    const int n = c_.count;
    if (std::string e = from_checkpoint(seq, n); !e.empty()) return e;
    // The kept records as (first, count) runs; the faults change them once.
    std::vector<std::pair<int, int>> folds = {{0, n}};
    if (n > 0 && fault_now(RingFault::fold_twice)) folds.insert(folds.begin(), {0, 1});
    if (n > 0 && fault_now(RingFault::fold_skip)) folds = {{1, n - 1}};
    for (const auto& [first, count] : folds) {
        replay_records(first, count, [&](int li) { return m_.kda_state(seq, li); });
        for (int i = first; i < first + count; ++i) {
            RecordTag& tag = tags_[size_t(c_.slot(i))];
            folded_.push_back(tag);
            tag.folded = true;
        }
    }
    checkpoint_ = m_.save_state(seq);
    position_ += uint64_t(n);
    c_.tail = c_.slot(n);
    c_.count = 0;
    ++writes_;
    return {};
}

// ---- simulation --------------------------------------------------------------------------------

RingSimResult simulate_ring(const RingSimOptions& o) {
    RingSimResult r;
    RingCursor c;
    c.capacity = o.capacity;
    Rng rng(o.seed);
    double occ = 0;
    uint64_t next_commit = o.commit_every > 0 ? uint64_t(o.commit_every) : ~0ull;
    auto flush = [&](bool commit) {
        r.flush_replayed += uint64_t(c.count);
        c.tail = c.slot(c.count);
        c.count = 0;
        ++(commit ? r.flushes_commit : r.flushes_full);
    };
    while (r.tokens < uint64_t(o.tokens)) {
        const StepPlan p = plan_step(c, o.draft_len, o.overflow);
        if (p.flush)
            flush(false);
        else
            r.rebuild_replayed += uint64_t(c.count);
        r.shortened += p.tokens < o.draft_len;
        c.pending = p.tokens;
        r.peak_occupancy = std::max(r.peak_occupancy, c.count + c.pending);
        int kept = 1;
        while (kept < p.tokens && rng.bernoulli(o.accept)) ++kept;
        c.count += kept;
        c.pending = 0;
        r.tokens += uint64_t(kept);
        r.verified += uint64_t(p.tokens);
        ++r.steps;
        occ += c.count;
        if (r.tokens >= next_commit) {
            flush(true);
            while (next_commit <= r.tokens) next_commit += uint64_t(o.commit_every);
        }
    }
    if (c.count > 0) flush(true);  // the end of the request commits
    r.mean_occupancy = r.steps > 0 ? occ / r.steps : 0;
    return r;
}

}  // namespace k3::spec
