#include "core/spec/ring_stream.h"

#include <algorithm>

#include "core/model/sampler.h"

namespace k3::spec {

RingStream::RingStream(model::Model& m, Drafter& d, const RingStreamOptions& o)
    : m_(m), d_(d), o_(o), recorder_(m, o.variant) {}

std::string RingStream::start(std::span<const int32_t> prompt,
                              const std::vector<std::vector<std::byte>>* reference) {
    if (std::string e = RecordRing::check(o_.capacity, o_.draft_len); !e.empty()) return e;
    if (prompt.empty()) return "the prompt is empty";
    if (o_.new_tokens < 1) return "new_tokens must be at least 1";
    PoolResult p = model::make_model_pool(m_, 1, prompt.size() + uint64_t(o_.new_tokens + 2 * o_.draft_len));
    if (!p.pool) return p.error;
    pool_ = std::move(p.pool);
    model::SequenceResult s = m_.new_sequence(*pool_, 1);
    if (!s.seq) return s.error;
    seq_ = std::move(s.seq);
    ring_ = std::make_unique<RecordRing>(m_, o_.variant, o_.capacity, o_.fault);
    ref_ = reference;
    prompt_len_ = prompt.size();
    next_commit_ = o_.commit_every > 0 ? uint64_t(o_.commit_every) : ~0ull;
    committed_.clear();
    events_.clear();
    stats_ = {};
    done_ = fault_spent_ = false;
    if (std::string e = m_.prefill(*seq_, prompt, &logits_); !e.empty()) return e;
    pending_ = model::argmax(logits_.data(), m_.vocab());
    if (std::string e = ring_->reset(*seq_); !e.empty()) return e;
    ++stats_.checkpoint_writes;
    return d_.start(prompt);
}

void RingStream::event(RingEventKind k, int tokens, std::string text) {
    const RingCursor& c = ring_->cursor();
    events_.push_back({stats_.steps, k, c.tail, c.count + c.pending, tokens, std::move(text)});
}

void RingStream::compare(const std::vector<std::byte>& state, int j, const char* what, int* checked,
                         int* exact) {
    if (!ref_) return;
    const uint64_t idx = ring_->checkpoint_position() + uint64_t(j) - prompt_len_;
    if (idx >= ref_->size()) return;
    ++*checked;
    if (state == (*ref_)[size_t(idx)]) {
        ++*exact;
    } else if (stats_.first_mismatch.empty()) {
        stats_.first_mismatch = std::string(what) + " state at position " +
                                std::to_string(ring_->checkpoint_position() + uint64_t(j)) + " (step " +
                                std::to_string(stats_.steps) + ") differs from plain decoding";
    }
}

std::string RingStream::flush(bool commit) {
    const int n = ring_->cursor().count;
    if (o_.check_all_positions && ref_)
        for (int j = 0; j < n; ++j) {  // j = n is checked below: the folded checkpoint
            if (std::string e = ring_->state_at(j, &scratch_state_); !e.empty()) return e;
            compare(scratch_state_, j, "replayed ring", &stats_.positions_checked, &stats_.positions_exact);
        }
    if (std::string e = ring_->flush(*seq_); !e.empty()) return e;
    compare(ring_->checkpoint(), 0, "folded checkpoint", &stats_.positions_checked, &stats_.positions_exact);
    stats_.flush_replayed += uint64_t(n);
    step_replay_ += n;
    ++stats_.checkpoint_writes;
    ++(commit ? stats_.flushes_commit : stats_.flushes_full);
    event(commit ? RingEventKind::flush_commit : RingEventKind::flush_full, n,
          std::string(commit ? "commit" : "ring full") + ": folded " + std::to_string(n) +
              " records into the checkpoint (replayed " + std::to_string(n) + " tokens, wrote one state)");
    return {};
}

std::string RingStream::step(bool* done) {
    *done = done_;
    if (done_) return {};
    if (!ring_) return "start() first";
    step_replay_ = 0;
    const StepPlan plan = plan_step(ring_->cursor(), o_.draft_len, o_.overflow);
    if (plan.flush) {
        if (std::string e = flush(false); !e.empty()) return e;
    } else {
        // Verification reads the checkpoint and the kept records: rebuild the working state from them.
        const int n = ring_->cursor().count;
        if (std::string e = ring_->materialise(*seq_, n); !e.empty()) return e;
        stats_.rebuild_replayed += uint64_t(n);
        step_replay_ += n;
        if (ref_)
            compare(m_.save_state(*seq_), n, "rebuilt working", &stats_.rebuilds_checked,
                    &stats_.rebuilds_exact);
    }
    const int T = plan.tokens;
    stats_.shortened += T < o_.draft_len;
    if (std::string e = d_.draft(pending_, T - 1, &drafts_); !e.empty()) return "drafter: " + e;
    tokens_.assign(1, pending_);
    tokens_.insert(tokens_.end(), drafts_.begin(), drafts_.end());
    const bool delta = RecordLayout::of(m_.kda(), o_.variant).delta >= 0;
    recorder_.begin(delta ? m_.save_state(*seq_) : std::vector<std::byte>{});
    const model::ForwardOptions fo{model::CoreMode::recurrent, model::LogitRows::all, &recorder_};
    if (std::string e = m_.forward(*seq_, tokens_, fo, &logits_); !e.empty()) return e;
    const uint64_t position = prompt_len_ + committed_.size();  // of the pending token
    if (std::string e = ring_->push(recorder_.records(), 0, T, position, tokens_); !e.empty()) return e;
    stats_.peak_occupancy = std::max(stats_.peak_occupancy, ring_->cursor().count + T);
    event(RingEventKind::verify, T,
          "verify " + std::to_string(T) + " tokens (pending + " + std::to_string(T - 1) + " drafts" +
              (T < o_.draft_len ? ", shortened to fit" : "") + "): " + std::to_string(T) +
              " records at the head");
    const int V = m_.vocab();
    int kept = 1;
    while (kept < T && tokens_[size_t(kept)] == model::argmax(logits_.data() + size_t(kept - 1) * V, V))
        ++kept;
    if (kept < T && o_.fault == RingFault::commit_rejected && !fault_spent_) ++kept, fault_spent_ = true;
    const int32_t next = model::argmax(logits_.data() + size_t(kept - 1) * V, V);
    if (std::string e = ring_->accept(kept); !e.empty()) return e;
    event(RingEventKind::keep, kept,
          "kept " + std::to_string(kept) + " of " + std::to_string(T) +
              (kept < T ? ": head moves back over " + std::to_string(T - kept) + " rejected records"
                        : ": all kept"));
    const auto kept_tokens = std::span<const int32_t>(tokens_).first(size_t(kept));
    if (std::string e = d_.commit(kept_tokens); !e.empty()) return "drafter: " + e;
    committed_.insert(committed_.end(), kept_tokens.begin(), kept_tokens.end());
    pending_ = next;
    stats_.verified += uint64_t(T);
    stats_.kept.push_back(kept);
    ++stats_.steps;
    const bool end = committed_.size() >= size_t(o_.new_tokens);
    if (committed_.size() >= next_commit_ || (end && ring_->cursor().count > 0)) {
        if (std::string e = flush(true); !e.empty()) return e;
        while (next_commit_ <= committed_.size()) next_commit_ += uint64_t(o_.commit_every);
    }
    stats_.occupancy.push_back(ring_->cursor().count);
    stats_.replay_work.push_back(step_replay_);
    done_ = *done = end;
    return {};
}

}  // namespace k3::spec
