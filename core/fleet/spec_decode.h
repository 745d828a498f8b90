// Speculative decoding in the fleet (issue 17; reference/kimi_k3.md §3): how many tokens each verify
// step of a decoding request yields, and what a verify adds to a step's work.
//
// Acceptance: a step verifies 1 + N tokens (the last accepted one and N drafts) and keeps A of them on
// average (the acceptance length, 1 <= A <= 1 + N; DSpark on K3 measured 4.26 at N = 7). The fleet
// keeps it deterministic and exact in the mean: after s verify steps a request has decoded
// floor(s x A) tokens (A taken in thousandths, so the count is integer arithmetic, the same in every
// build). A request that decoded d tokens is at step ceil(d / A), whatever preemptions came between.
// Without speculation A = 1: one token per step, the plain decode.
//
// Work (core/fleet/iteration_work.h): each verify is a decode of its context plus N draft tokens that
// ride as query tokens (attention over the context, in the prefill form), and its state traffic: the
// state read and written once (the decode's), plus
//   snapshot     N full states written, one per draft position (vLLM's num_speculative_blocks);
//   recoverssm   the checkpoint read again by the commit, and 1 + N records (a correction vector of V
//                fp32 and the raw key and gate of K bf16 each, per value head: correction_cache and
//                kg_cache as spec::vllm_pages sizes them) written by the verify and read by the commit.
// Not modelled: the drafter's own forward passes (DSpark's, a small fraction of the target's).
#pragma once

#include <cstdint>

#include "core/fleet/fleet_config.h"
#include "core/fleet/iteration_work.h"

namespace k3 {

class SpecAcceptance {
  public:
    SpecAcceptance() = default;
    explicit SpecAcceptance(double acceptance_len);  // 1 <= A; rounded to thousandths
    uint32_t milli() const { return milli_; }
    double length() const { return milli_ / 1000.0; }
    // Tokens the next m verify steps yield to a request that has decoded `decoded` tokens.
    uint64_t tokens(uint64_t decoded, uint64_t m) const;
    // The fewest steps that yield at least `want` tokens, and the most that yield at most `room`.
    uint64_t steps_for(uint64_t decoded, uint64_t want) const;
    uint64_t steps_within(uint64_t decoded, uint64_t room) const;

  private:
    uint64_t steps_done(uint64_t decoded) const;  // ceil(decoded / A)
    uint32_t milli_ = 1000;
};

// What speculative decoding adds to a step: draft tokens per verify and state transfers (in units of
// one state read or written) beyond the decode's one read and one write.
struct SpecWork {
    uint32_t drafts = 0;
    double extra_state_transfers = 0;
};
SpecWork spec_work(const FleetConfig& c);
SpecWork spec_work(const ModelConfig& m, SpecState state, uint32_t draft_len);

// Makes every decode of w a verify: its drafts (at positions context + 1 ... context + N) and its
// extra state traffic.
void add_drafts(IterationWork& w, const SpecWork& s);

}  // namespace k3
