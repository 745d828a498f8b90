// Pause, resume and migrate a request of the runnable model (module 10):
//
//   RequestState st = capture(model_a, req, MigrationStrategy::move_all, 0);
//   std::vector<std::byte> blob;  write_blob(st, &blob);                       // blob.h
//   RequestState in;  read_blob(blob, expect_for(model_b, req.consumed()), &in);
//   Request resumed;  resume(model_b, pool_b, owner, in, nullptr, &resumed);  // then step_request(...)
//
// capture() keeps what the strategy sends (migration_cost.h): move_all everything; move_kv the KV up to
// a state checkpoint the destination holds (its position is `checkpoint`) and the tokens; recompute
// only the tokens. resume() restores what the blob holds (and the checkpoint), then re-feeds the tokens
// [position, consumed) along the original path: prefill inside the prompt, decode steps after it. That
// path has the original's bits when the restart point is 0, at or past the end of the prompt, or a
// multiple of the chunk size (chunks then start where they started; reference/kda.md §3.4 item 7);
// ResumeInfo::exact_path says whether it holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/lifecycle/blob.h"
#include "core/lifecycle/migration_cost.h"
#include "core/lifecycle/request.h"

namespace k3::lifecycle {

// The blob layout of a model's sequences (fp32 everywhere, [K][V], the model's chunk size).
BlobLayout model_layout(const model::Model& m);
// What resuming on `m` expects; `consumed` = the request's position as the scheduler knows it (optional).
BlobExpect expect_for(const model::Model& m, std::optional<uint64_t> consumed = std::nullopt);

// What a strategy sends for request r. `checkpoint`: the position of the destination's checkpoint
// (move_kv only; <= r.consumed()).
RequestState capture(const model::Model& m, const Request& r, MigrationStrategy s, uint64_t checkpoint = 0);

struct ResumeInfo {
    uint64_t restored_position = 0;  // position after restoring the blob (and checkpoint)
    uint64_t recomputed_tokens = 0;  // tokens re-fed to reach `consumed`
    uint64_t prefilled = 0, decoded = 0;
    bool used_checkpoint = false;
    bool exact_path = true;  // the recompute follows the original chunk boundaries
};

// Resumes a parsed and checked blob on m as a new sequence of `owner` in `pool`. A blob with KV but
// no state needs `ckpt` at exactly its position (else position_mismatch) from the same model (else
// model_mismatch). Errors are BlobStatus codes; a model error (a full pool) is resume_failed with its text.
[[nodiscard]] BlobStatus resume(model::Model& m, PagePool& pool, OwnerId owner, const RequestState& r,
                                const StateCheckpoint* ckpt, Request* out, ResumeInfo* info = nullptr);

}  // namespace k3::lifecycle
