#include "core/spec/decoder.h"

#include <algorithm>

#include "core/model/sampler.h"

namespace k3::spec {

SpecDecoder::SpecDecoder(model::Model& target, Drafter& drafter, SpecOptions o)
    : m_(target), drafter_(drafter), o_(o), verifier_(target, o.rollback, o.variant) {}

std::string SpecDecoder::start(model::Sequence& seq, std::span<const int32_t> prompt) {
    if (o_.draft_len < 1) return "draft_len must be at least 1";
    if (prompt.empty()) return "the prompt is empty";
    stats_ = {};
    if (std::string e = m_.prefill(seq, prompt, &logits_); !e.empty()) return e;
    pending_ = model::argmax(logits_.data(), m_.vocab());
    return drafter_.start(prompt);
}

std::string SpecDecoder::step(model::Sequence& seq, std::vector<int32_t>* out) {
    if (pending_ < 0) return "start() first";
    const int N = o_.draft_len;
    if (std::string e = drafter_.draft(pending_, N - 1, &drafts_); !e.empty()) return "drafter: " + e;
    tokens_.assign(1, pending_);
    tokens_.insert(tokens_.end(), drafts_.begin(), drafts_.end());
    logits_.clear();
    if (std::string e = verifier_.begin(seq); !e.empty()) return e;
    if (std::string e = verifier_.extend(seq, tokens_, &logits_); !e.empty()) return e;
    // Keep the pending token and every draft the target would have picked itself.
    const int V = m_.vocab(), T = int(tokens_.size());
    int kept = 1;
    while (kept < T && tokens_[size_t(kept)] == model::argmax(logits_.data() + size_t(kept - 1) * V, V))
        ++kept;
    const int32_t next = model::argmax(logits_.data() + size_t(kept - 1) * V, V);
    stats_.peak_bytes_held = std::max(stats_.peak_bytes_held, verifier_.bytes_held());
    if (std::string e = verifier_.keep(seq, kept); !e.empty()) return e;
    const auto committed = std::span<const int32_t>(tokens_).first(size_t(kept));
    if (std::string e = drafter_.commit(committed); !e.empty()) return "drafter: " + e;
    out->insert(out->end(), committed.begin(), committed.end());
    pending_ = next;
    ++stats_.steps;
    stats_.committed += uint64_t(kept);
    stats_.verified += uint64_t(T);
    stats_.drafted += uint64_t(T - 1);
    stats_.accepted += uint64_t(kept - 1);
    stats_.rollbacks += kept < T;
    stats_.kept.push_back(kept);
    return {};
}

std::string greedy_decode(model::Model& m, model::Sequence& seq, std::span<const int32_t> prompt, int count,
                          std::vector<int32_t>* out, std::vector<std::vector<std::byte>>* states) {
    std::vector<float> logits;
    if (std::string e = m.prefill(seq, prompt, &logits); !e.empty()) return e;
    if (states) states->push_back(m.save_state(seq));
    for (int i = 0; i < count; ++i) {
        const int32_t t = model::argmax(logits.data(), m.vocab());
        out->push_back(t);
        if (i + 1 == count) break;
        if (std::string e = m.decode(seq, t, &logits); !e.empty()) return e;
        if (states) states->push_back(m.save_state(seq));
    }
    return {};
}

}  // namespace k3::spec
