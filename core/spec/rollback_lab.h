// Draft -> verify -> reject at n -> restore, both ways, on the runnable model (module 7 and
// `k3cli bench spec`): a prompt is prefilled, a chance drafter proposes N - 1 tokens after the
// pending one, the target verifies the N tokens once token by token with a snapshot after each and
// once in one recurrent pass with records, and for every n in 0..N the sequence is restored both ways
// and compared, bitwise: the copy with a cold run (a new sequence, the prompt prefilled, the n kept
// tokens in one recurrent forward), the replay with the n tokens decoded one by one from the
// confirmed state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/kda/layout.h"
#include "core/model/model.h"
#include "core/spec/verify.h"

namespace k3::spec {

struct RestoreOutcome {
    int n = 0;
    bool copy_exact = false;        // snapshot copy == the cold run of the n tokens (state and KV)
    bool replay_exact = false;      // replay == direct, token by token (state and KV)
    bool S_exact = false;           // replay: every layer's S == direct
    bool windows_exact = false;     // replay: every layer's conv windows == direct
    bool copy_replay_same = false;  // the copy and the replay restore: the same state and KV
    bool copy_replay_S = false;     // ... every layer's S the same
    // n = 0 only: the draft had changed the working state (both verifications), and both restores give
    // the cold run of the prompt alone (state and KV), which no draft ever touched.
    bool draft_mutated = false, untouched = false;
};

// RecoverSSM's closed-form commit (spec::closed_form_fold, vLLM's kernel) of the first n records, every
// layer's S, against decoding the n tokens directly (fp32, token by token) and against the same closed
// form in fp64: the largest |difference| over every element of every layer, relative to the largest |S|
// of the reference.
struct ClosedFormError {
    int n = 0;
    double vs_direct = 0;       // closed form (fp32) against direct decoding's bits
    double vs_fp64 = 0;         // closed form (fp32) against the closed form in fp64
    double direct_vs_fp64 = 0;  // direct decoding (fp32) against the fp64 closed form
};

class RollbackLab {
  public:
    // draft_len N >= 1 tokens per verification; the drafts follow the target's greedy continuation,
    // each right with probability `accept` (ChanceDrafter).
    // `fault`: damage for module 7's falsifiers, given to every verifier (VerifyFault).
    static std::unique_ptr<RollbackLab> create(model::Model& m, int draft_len, int prompt_len, double accept,
                                               uint64_t seed, std::string* error,
                                               VerifyFault fault = VerifyFault::none);

    int draft_len() const { return N_; }
    int accepted() const { return kept_; }  // tokens the target keeps (1 .. N): the real rejection point
    // One-pass (records) and token-by-token (snapshots) verification gave the same logits, bitwise.
    bool logits_match() const { return logits_match_; }
    uint64_t snapshot_bytes_held() const;
    uint64_t confirmed_bytes_held() const { return snap_.confirmed().size(); }

    // Restores every n in 0..N both ways (replay with records of `v`) and compares with direct decoding.
    [[nodiscard]] std::string compare(RecordVariant v, std::vector<RestoreOutcome>* out,
                                      uint64_t* record_bytes_held);
    // The closed-form commit's error for every n in 0..N (one recoverssm verification of the draft).
    // `skip_decay`: the falsifier hook of spec::closed_form_fold (-1 in normal use).
    [[nodiscard]] std::string closed_form_errors(int skip_decay, std::vector<ClosedFormError>* out);
    // Median wall time (ms) of restoring n tokens by copy and by replay of `v`, n = 0..N (`reps` each).
    [[nodiscard]] std::string time_restore(RecordVariant v, int reps, std::vector<double>* copy_ms,
                                           std::vector<double>* replay_ms);

  private:
    [[nodiscard]] std::string verify_recording(model::Sequence& seq, Verifier& rv);
    [[nodiscard]] std::string cold_runs();
    RollbackLab(model::Model& m, VerifyFault fault)
        : m_(m), fault_(fault), snap_(m, Rollback::snapshot, RecordVariant::minimal_exact, fault) {}
    model::Model& m_;
    VerifyFault fault_;
    int N_ = 0, kept_ = 0;
    bool logits_match_ = false;
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<model::Sequence> seq_;
    std::vector<int32_t> prompt_, tokens_;
    model::SequenceSnapshot confirmed_, verified_;
    std::vector<model::SequenceSnapshot> direct_;  // direct_[n]: prompt + n tokens decoded one by one
    std::vector<model::SequenceSnapshot> cold_;    // cold_[n]: a new sequence, prompt, n tokens in one pass
    Verifier snap_;
    std::vector<float> snap_logits_;
};

// Restore of one KDA layer at a given geometry, outside any model (bench and module 7 run it at
// Kimi-Linear dimensions): copying a full layer state (S + conv windows, fp32 here) against replaying
// n minimal-exact records (conv of the raw q/k/v rows, SiLU, L2 of k, the recurrent core). Median ms
// for n = 0..n_max.
struct LayerRestoreTiming {
    uint64_t state_bytes = 0;
    std::vector<double> copy_ms, replay_ms;
};
LayerRestoreTiming time_layer_restore(const kda::Shape& s, int conv_width, int n_max, int reps,
                                      kda::Impl impl = kda::Impl::simd);

}  // namespace k3::spec
