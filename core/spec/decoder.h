// Greedy speculative decoding on the runnable model: each step verifies N tokens in one pass (the
// pending token, known correct, and N - 1 drafts), keeps the longest prefix the target agrees with,
// and rolls the state back to it (snapshot copy or record replay, spec/verify.h). The token stream is
// exactly plain greedy decoding's (tests/unit/test_spec_decode.cpp), because verification has the
// bits of decoding token by token and rollback restores the state bitwise.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/spec/drafter.h"
#include "core/spec/verify.h"

namespace k3::spec {

struct SpecOptions {
    int draft_len = 4;  // N: tokens verified per step
    Rollback rollback = Rollback::replay;
    RecordVariant variant = RecordVariant::minimal_exact;
};

struct SpecStats {
    int steps = 0;
    uint64_t committed = 0;        // tokens emitted
    uint64_t verified = 0;         // tokens run through the target
    uint64_t drafted = 0;          // draft tokens proposed
    uint64_t accepted = 0;         // draft tokens kept
    uint64_t rollbacks = 0;        // steps that dropped a token
    uint64_t peak_bytes_held = 0;  // rollback storage (confirmed + snapshots or records), largest seen
    std::vector<int> kept;         // tokens kept per step (1 .. N)
};

class SpecDecoder {
  public:
    SpecDecoder(model::Model& target, Drafter& drafter, SpecOptions o);
    // Prefills the prompt; the first pending token is the greedy pick after it.
    [[nodiscard]] std::string start(model::Sequence& seq, std::span<const int32_t> prompt);
    // One step; appends the committed tokens (1 .. N) to *out.
    [[nodiscard]] std::string step(model::Sequence& seq, std::vector<int32_t>* out);
    const SpecStats& stats() const { return stats_; }

  private:
    model::Model& m_;
    Drafter& drafter_;
    SpecOptions o_;
    Verifier verifier_;
    SpecStats stats_;
    int32_t pending_ = -1;
    std::vector<int32_t> tokens_, drafts_;
    std::vector<float> logits_;
};

// Plain greedy decoding, the reference: prefill, then `count` tokens (the first is the pick after the
// prompt; count - 1 decode steps). With `states`, the KDA state after the prompt and after every
// decoded token (states[j] = position prompt + j, Model::save_state layout).
[[nodiscard]] std::string greedy_decode(model::Model& m, model::Sequence& seq,
                                        std::span<const int32_t> prompt, int count, std::vector<int32_t>* out,
                                        std::vector<std::vector<std::byte>>* states = nullptr);

}  // namespace k3::spec
