// A per-request ring of records for speculative decoding (module 8; reference/serving.md §3,
// "ReplaySSM"): one checkpoint state (the confirmed state at the ring's tail) and L record slots. The
// working state is never kept: each verification rebuilds it from the checkpoint plus the records kept
// so far, records its N tokens into the slots after them, and a rollback is a cursor move (the rejected
// records are simply not kept). The checkpoint is folded forward ("flush": replay the kept records
// onto it) when a verification would not fit (ring full) or on commit.
//
//   slots    0 1 2 ... L-1 (mod L)
//   tail     first record after the checkpoint
//   count    records kept after the checkpoint (tail .. tail + count - 1)
//   pending  records of the verification in flight, after the kept ones
//
// Each slot also keeps the tag of its record (the token's position and id, folded or not), which the
// ring's own logic never reads: module 8 recounts occupancy and the folds from the tags, not the cursor.
//
// Capacity: a verification writes N records, so L >= N (RecordRing::check refuses less).
// Overflow (a verification of N tokens does not fit after the kept records):
//   fold     flush first, then verify N tokens (SGLang's ReplaySSM folds every L steps)
//   shorten  verify only the tokens that fit (fewer drafts), flush when not even one draft fits
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/model/model.h"
#include "core/spec/records.h"

namespace k3::spec {

enum class Overflow : uint8_t { fold, shorten };
const char* overflow_name(Overflow o);

struct RingCursor {
    int capacity = 0, tail = 0, count = 0, pending = 0;
    int slot(int i) const { return (tail + i) % capacity; }  // slot of the i-th record after the checkpoint
    int head() const { return slot(count + pending); }       // next free slot
    int free() const { return capacity - count - pending; }
};

// Deliberate damage for module 8's falsifiers (k3cli audit-checks); none in normal use. Each acts once,
// at its first chance.
enum class RingFault : uint8_t {
    none,
    flip_record_bit,  // the first accept that keeps records flips a bit of kept record 0 (layer 0's gate)
    fold_twice,       // the first flush of records replays its first record twice
    fold_skip,        // the first flush of records leaves its first record out
    overwrite_live,   // the first push after kept records writes one slot early, over the last kept one
    spare_slot,       // every layer allocates one record slot more than the capacity
    commit_rejected,  // (RingStream) the first rejected draft is committed anyway
};

// What the audit reads back from the slots: the token each record was written for.
struct RecordTag {
    uint64_t position = 0;  // of the token in the sequence
    int32_t token = -1;
    bool used = false, folded = false;
};

struct StepPlan {
    bool flush = false;  // fold the kept records into the checkpoint first
    int tokens = 0;      // tokens to verify (N, or fewer when shortened)
};
// What the next verification of up to N tokens does (cursor with nothing pending).
StepPlan plan_step(const RingCursor& c, int draft_len, Overflow o);

class RecordRing {
  public:
    // Empty when a ring of `capacity` can serve verifications of `draft_len` tokens; else why not.
    static std::string check(int capacity, int draft_len);

    // capacity >= 1; `fault`: module 8's falsifiers only.
    RecordRing(model::Model& m, RecordVariant v, int capacity, RingFault fault = RingFault::none);
    RecordVariant variant() const { return lay_.variant; }
    const RingCursor& cursor() const { return c_; }
    uint64_t checkpoint_position() const { return position_; }
    const std::vector<std::byte>& checkpoint() const { return checkpoint_; }
    // Memory of one request as allocated: the checkpoint's bytes plus every layer's slot buffer (the
    // slots' tags below are the audit's, not the ring's).
    uint64_t bytes() const;

    // The audit, read from the slots' tags, not from the cursor. Every record a flush replayed, in
    // order (its tag as written by push).
    const std::vector<RecordTag>& folded() const { return folded_; }
    // Pushes over a record not yet folded that precedes the push's first token (a live, kept record).
    int live_overwrites() const { return live_overwrites_; }
    // Most slots holding a record not yet folded and not past the last token pushed (kept + pending).
    int peak_live() const { return peak_live_; }

    // Checkpoint := seq's state and position; the ring empties.
    [[nodiscard]] std::string reset(const model::Sequence& seq);
    // seq := the checkpoint followed by the first j records (0 <= j <= count + pending): a copy, j
    // replayed tokens, and the KV cut to checkpoint position + j (seq must hold at least that much).
    [[nodiscard]] std::string materialise(model::Sequence& seq, int j);
    // The same state as plain bytes (Model::save_state layout), leaving every sequence alone.
    [[nodiscard]] std::string state_at(int j, std::vector<std::byte>* out);
    // Tokens [first, first + n) of `recs` become the pending records (nothing may be pending, n <= free()).
    // They are the tokens `tokens` (n ids) at positions position, position + 1, ...: each slot keeps its
    // record's tag.
    [[nodiscard]] std::string push(const RecordBuffer& recs, int first, int n, uint64_t position,
                                   std::span<const int32_t> tokens);
    // The first n pending records are kept, the rest dropped: a cursor move.
    [[nodiscard]] std::string accept(int n);
    // Folds the kept records into the checkpoint: seq := checkpoint + count records (materialise), the
    // checkpoint takes seq's state, the tail moves past them, count = 0. Nothing may be pending.
    [[nodiscard]] std::string flush(model::Sequence& seq);

    uint64_t tokens_replayed() const { return replayed_; }
    uint64_t checkpoint_writes() const { return writes_; }

  private:
    std::string check_position(int j) const;
    // seq := the checkpoint, its KV cut to checkpoint position + j (the start of materialise and flush).
    std::string from_checkpoint(model::Sequence& seq, int j);
    // Replays records first .. first + j - 1 onto the layer states `at(li)` returns.
    template <class At>
    void replay_records(int first, int j, At at);
    void count_live(uint64_t end);
    bool fault_now(RingFault f);  // whether fault f acts now (once)

    model::Model& m_;
    RecordLayout lay_;
    RingCursor c_;
    RingFault fault_;
    bool fault_spent_ = false;
    std::vector<FloatBuf> slots_;  // per linear layer [capacity][floats]
    std::vector<RecordTag> tags_;  // per slot
    std::vector<RecordTag> folded_;
    int live_overwrites_ = 0, peak_live_ = 0;
    std::vector<std::byte> checkpoint_;
    uint64_t position_ = 0;
    ReplayScratch scratch_;
    uint64_t replayed_ = 0, writes_ = 0;
};

// The ring's bookkeeping alone, without a model: how often it flushes and how much it replays for a
// stream of steps whose drafts are each accepted with probability p (module 8's capacity sweep).
struct RingSimOptions {
    int draft_len = 4, capacity = 16;
    Overflow overflow = Overflow::fold;
    int commit_every = 0;  // tokens between commits (0: only at the end)
    int tokens = 256;      // tokens to commit
    double accept = 0.8;
    uint64_t seed = 1;
};
struct RingSimResult {
    int steps = 0, flushes_full = 0, flushes_commit = 0, shortened = 0;
    uint64_t tokens = 0, verified = 0;
    uint64_t rebuild_replayed = 0;  // records replayed to rebuild the working state before verifying
    uint64_t flush_replayed = 0;    // records replayed to fold the checkpoint forward
    double mean_occupancy = 0;      // kept records after each step, averaged over steps
    int peak_occupancy = 0;         // kept + pending, largest
};
RingSimResult simulate_ring(const RingSimOptions& o);

}  // namespace k3::spec
