// One request decoded speculatively on the runnable model through a record ring (spec/ring.h): the
// stream module 8 shows step by step. Each step: plan (flush first if the verification would not fit,
// or shorten it), rebuild the working state from the checkpoint and the kept records, verify the
// pending token and the drafts in one recurrent forward while recording, push the records, keep the
// accepted prefix (a cursor move), and flush on commit. With reference states from plain greedy
// decoding (spec/decoder.h) it checks, bitwise:
//   - every rebuilt working state against the directly computed state at that position;
//   - at every flush, the checkpoint plus j records for every ring position j = 0 .. count;
//   - the committed tokens against plain greedy decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/spec/drafter.h"
#include "core/spec/ring.h"

namespace k3::spec {

struct RingStreamOptions {
    int draft_len = 4;
    int capacity = 16;
    Overflow overflow = Overflow::fold;
    int commit_every = 0;  // tokens between commits (flushes); 0: only at the end of the request
    RecordVariant variant = RecordVariant::minimal_exact;
    int new_tokens = 64;
    bool check_all_positions = true;    // at each flush, replay every ring position (O(L^2) replays)
    RingFault fault = RingFault::none;  // module 8's falsifiers only
};

enum class RingEventKind : uint8_t { verify, keep, flush_full, flush_commit };

struct RingEvent {
    int step = 0;
    RingEventKind kind = RingEventKind::verify;
    int tail = 0, count = 0;  // occupied slots after the event (kept + pending)
    int tokens = 0;           // verified, kept, or folded
    std::string text;
};

struct RingStreamStats {
    int steps = 0, flushes_full = 0, flushes_commit = 0, shortened = 0;
    uint64_t verified = 0, rebuild_replayed = 0, flush_replayed = 0, checkpoint_writes = 0;
    int peak_occupancy = 0;
    std::vector<int> occupancy;    // kept records after each step
    std::vector<int> replay_work;  // records replayed in each step (rebuild + flushes)
    std::vector<int> kept;         // tokens kept in each step
    // Bitwise checks against the reference states (counts of comparisons and of exact ones).
    int rebuilds_checked = 0, rebuilds_exact = 0, positions_checked = 0, positions_exact = 0;
    std::string first_mismatch;
};

class RingStream {
  public:
    RingStream(model::Model& m, Drafter& d, const RingStreamOptions& o);
    // Prefills the prompt and takes the state after it as the first checkpoint. `reference` (may be
    // null): states of plain greedy decoding, reference[j] = after the prompt and j tokens; must cover
    // new_tokens + draft_len positions or the checks stop at its end.
    [[nodiscard]] std::string start(std::span<const int32_t> prompt,
                                    const std::vector<std::vector<std::byte>>* reference);
    // One speculative step; *done once new_tokens are committed (the final commit flush has run).
    [[nodiscard]] std::string step(bool* done);

    const RecordRing& ring() const { return *ring_; }
    const RingStreamStats& stats() const { return stats_; }
    const std::vector<RingEvent>& events() const { return events_; }
    const std::vector<int32_t>& tokens() const { return committed_; }

  private:
    std::string flush(bool commit);
    // Compares `state` (position checkpoint + j) with the reference, counting the comparison.
    void compare(const std::vector<std::byte>& state, int j, const char* what, int* checked, int* exact);
    void event(RingEventKind k, int tokens, std::string text);

    model::Model& m_;
    Drafter& d_;
    RingStreamOptions o_;
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<model::Sequence> seq_;
    std::unique_ptr<RecordRing> ring_;
    Recorder recorder_;
    const std::vector<std::vector<std::byte>>* ref_ = nullptr;
    uint64_t prompt_len_ = 0, next_commit_ = 0;
    int32_t pending_ = -1;
    bool done_ = false, fault_spent_ = false;
    int step_replay_ = 0;
    std::vector<int32_t> committed_, tokens_, drafts_;
    std::vector<float> logits_;
    std::vector<std::byte> scratch_state_;
    std::vector<RingEvent> events_;
    RingStreamStats stats_;
};

}  // namespace k3::spec
