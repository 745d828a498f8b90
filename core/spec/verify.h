// Verification of tokens by the target model and rollback to any prefix of them (reference/kda.md §6,
// reference/serving.md §3), two ways:
//   snapshot: a full state copy after every verified token; rollback copies one back (vLLM, SGLang and
//             TRT-LLM by default). The runnable model's forward runs layer by layer over all its tokens,
//             so the per-token states exist only if it verifies token by token, which it does here
//             (same bits as one recurrent forward, tests/unit/test_model.cpp); an engine's verify
//             kernel writes them from its one pass.
//   replay:   one recurrent forward over all tokens, recording per-token records (spec/records.h);
//             rollback copies the confirmed state back and replays the kept records.
// The confirmed state is a copy here in both cases, because the runnable model's forward updates the
// sequence's state in place (a GPU verify kernel reads it and writes elsewhere).
//
//   Verifier v(model, Rollback::replay, RecordVariant::minimal_exact);
//   v.begin(seq);                          // confirmed := seq's state and position
//   v.extend(seq, tokens, &logits);        // rows of logits, one per token
//   v.keep(seq, n);                        // seq := confirmed + first n tokens, bitwise
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/spec/records.h"

namespace k3::spec {

enum class Rollback : uint8_t { snapshot, replay };
const char* rollback_name(Rollback r);

// Deliberate damage for module 7's falsifiers (k3cli audit-checks); none in normal use. Each fault acts
// only where its rollback method is involved.
enum class VerifyFault : uint8_t {
    none,
    flip_record_bit,      // replay: extend() flips one bit of the first token's gate in layer 0's record
    flip_correction_bit,  // replay: ... of its first correction value (delta forms, recoverssm)
    short_record,         // replay: records are under-allocated (RecordLayout::under_allocated)
    snapshot_position,    // snapshot: keep(n) copies snapshot n + 1 (at most verified()), cuts the KV at n
    chunked_verify,       // replay: extend() runs the chunked kernel instead of the recurrent one
};

class Verifier {
  public:
    Verifier(model::Model& m, Rollback how, RecordVariant variant = RecordVariant::minimal_exact,
             VerifyFault fault = VerifyFault::none);

    Rollback how() const { return how_; }
    RecordVariant variant() const { return variant_; }

    // Takes seq's current state and position as the confirmed ones; nothing verified yet.
    [[nodiscard]] std::string begin(const model::Sequence& seq);
    // Runs `tokens` after those verified so far and appends one row of logits per token to *logits
    // (may be null). The tokens' bits are those of decoding them one by one.
    [[nodiscard]] std::string extend(model::Sequence& seq, std::span<const int32_t> tokens,
                                     std::vector<float>* logits);
    int verified() const { return verified_; }
    const std::vector<std::byte>& confirmed() const { return confirmed_; }
    const RecordBuffer& records() const { return recorder_.records(); }

    // Makes seq the confirmed state followed by the first n verified tokens (0 <= n <= verified()): the
    // KV is cut to them and the state comes from snapshot n (a copy) or from the confirmed state plus
    // n replayed records. With n == verified() the sequence already is that state, so nothing is done
    // unless `force` (tests and timings). The verification stays: after Model::restore of the sequence as
    // it was after extend(), keep() may run again with another n; extend() needs a new begin() after a
    // keep() that dropped tokens.
    [[nodiscard]] std::string keep(model::Sequence& seq, int n, bool force = false);

    // What rollback holds now: the confirmed state plus the snapshots or the records.
    uint64_t bytes_held() const;
    // Work done by keep() so far: states copied and tokens replayed (per linear layer).
    uint64_t tokens_replayed() const { return replayed_; }

  private:
    model::Model& m_;
    Rollback how_;
    RecordVariant variant_;
    VerifyFault fault_;
    std::vector<std::byte> confirmed_;
    std::vector<std::vector<std::byte>> snapshots_;  // state after verified token i
    Recorder recorder_;
    ReplayScratch scratch_;
    std::vector<float> row_;
    uint64_t position_ = 0;
    int verified_ = 0;
    bool begun_ = false;
    uint64_t replayed_ = 0;
};

}  // namespace k3::spec
