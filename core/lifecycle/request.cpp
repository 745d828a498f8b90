#include "core/lifecycle/request.h"

#include "core/base/bytes.h"

namespace k3::lifecycle {

StateCheckpoint take_checkpoint(const model::Model& m, const model::Sequence& seq) {
    return {m.fingerprint(), seq.position(), m.save_state(seq)};
}

std::string start_request(model::Model& m, PagePool& pool, OwnerId owner, std::span<const int32_t> prompt,
                          const model::Sampler& sampler, Request* out, std::vector<float>* logits,
                          std::span<const uint64_t> cuts, std::vector<StateCheckpoint>* checkpoints) {
    if (prompt.empty()) return "the prompt is empty";
    uint64_t prev = 0;
    for (uint64_t c : cuts) {
        if (c <= prev || c >= prompt.size() || c % uint64_t(m.options().chunk) != 0)
            return "checkpoint cut " + std::to_string(c) + " must be ascending, inside the prompt of " +
                   std::to_string(prompt.size()) + " tokens and a multiple of the chunk size " +
                   std::to_string(m.options().chunk);
        prev = c;
    }
    if (!cuts.empty() && !checkpoints) return "checkpoint cuts need somewhere to put the checkpoints";
    model::SequenceResult s = m.new_sequence(pool, owner);
    if (!s.seq) return s.error;
    std::vector<float> local;
    std::vector<float>& lg = logits ? *logits : local;
    prev = 0;
    for (uint64_t c : cuts) {
        if (std::string e = m.prefill(*s.seq, prompt.subspan(size_t(prev), size_t(c - prev))); !e.empty())
            return e;
        checkpoints->push_back(take_checkpoint(m, *s.seq));
        prev = c;
    }
    if (std::string e = m.prefill(*s.seq, prompt.subspan(size_t(prev)), &lg); !e.empty()) return e;
    Request r;
    r.seq = std::move(s.seq);
    r.tokens.assign(prompt.begin(), prompt.end());
    r.prompt_tokens = prompt.size();
    r.sampler = sampler;
    r.tokens.push_back(r.sampler.next(lg.data(), m.vocab()));
    *out = std::move(r);
    return {};
}

std::string step_request(model::Model& m, Request& r, std::vector<float>* logits) {
    if (!r.seq) return "the request has no sequence";
    const uint64_t pos = r.seq->position();
    if (pos >= r.tokens.size()) return "the request has no pending token";
    std::vector<float> local;
    std::vector<float>& lg = logits ? *logits : local;
    if (std::string e = m.decode(*r.seq, r.tokens[size_t(pos)], &lg); !e.empty()) return e;
    if (pos + 1 == r.tokens.size()) r.tokens.push_back(r.sampler.next(lg.data(), m.vocab()));
    return {};
}

std::string continue_for(model::Model& m, Request& r, int n, Trace* t) {
    for (int i = 0; i < n; ++i) {
        std::vector<float> lg;
        if (std::string e = step_request(m, r, &lg); !e.empty()) return e;
        t->logits.push_back(std::move(lg));
    }
    t->tokens = r.tokens;
    return {};
}

bool identical(const Trace& a, const Trace& b) {
    if (a.tokens != b.tokens || a.logits.size() != b.logits.size()) return false;
    for (size_t i = 0; i < a.logits.size(); ++i)
        if (!bitwise_equal(a.logits[i], b.logits[i])) return false;
    return true;
}

}  // namespace k3::lifecycle
