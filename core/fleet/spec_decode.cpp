#include "core/fleet/spec_decode.h"

#include <algorithm>
#include <cmath>

#include "core/spec/storage.h"

namespace k3 {

SpecAcceptance::SpecAcceptance(double acceptance_len)
    : milli_(uint32_t(std::max(1000.0, std::round(acceptance_len * 1000.0)))) {}

uint64_t SpecAcceptance::steps_done(uint64_t decoded) const { return (decoded * 1000 + milli_ - 1) / milli_; }

uint64_t SpecAcceptance::tokens(uint64_t decoded, uint64_t m) const {
    return (steps_done(decoded) + m) * milli_ / 1000 - decoded;
}

uint64_t SpecAcceptance::steps_for(uint64_t decoded, uint64_t want) const {
    // The first step count s with floor(s A) >= decoded + want.
    return ((decoded + want) * 1000 + milli_ - 1) / milli_ - steps_done(decoded);
}

uint64_t SpecAcceptance::steps_within(uint64_t decoded, uint64_t room) const {
    // The last step count s with floor(s A) <= decoded + room, i.e. s A < decoded + room + 1.
    return ((decoded + room + 1) * 1000 - 1) / milli_ - steps_done(decoded);
}

SpecWork spec_work(const ModelConfig& m, SpecState state, uint32_t draft_len) {
    SpecWork s;
    if (state == SpecState::off) return s;
    s.drafts = draft_len;
    if (state == SpecState::snapshot) {
        s.extra_state_transfers = draft_len;
        return s;
    }
    // RecoverSSM: the records of the 1 + N positions as vLLM allocates them (correction_cache and
    // kg_cache, spec::vllm_pages), written by the verify and read by the commit, against the state.
    const spec::VllmPages p =
        spec::vllm_pages(spec::vllm_kda_page_tensors(m, int(draft_len)), int(draft_len));
    s.extra_state_transfers = 1 + 2 * double(p.records) / double(p.state);
    return s;
}

SpecWork spec_work(const FleetConfig& c) { return spec_work(c.model, c.spec_state, c.draft_len); }

void add_drafts(IterationWork& w, const SpecWork& s) {
    const double n = s.drafts, decodes = w.decode;
    w.draft_tokens = decodes * n;
    w.draft_attention = n * (w.decode_context + decodes * (n + 1) / 2);
    w.extra_state_transfers = decodes * s.extra_state_transfers;
}

}  // namespace k3
