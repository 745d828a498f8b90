// Where a prefix cache's state checkpoints of the runnable model live, named by the handles the radix
// tree carries (CheckpointRef::handle, core/cache/radix_cache.h).
//
// fp32 checkpoints are state slots of the model's pool (owner kCheckpointOwner): saving one copies
// the working slot into a fresh slot, resuming copies it back (PagePool::copy_state), bit for bit.
// With a compressing codec (core/cache/state_codec.h) a checkpoint is a byte buffer outside the pool
// (a host tier): each layer's recurrent state S [HV][K][V] is encoded with one row per key channel,
// the conv windows are kept as they are (as module 5 accounts them). A resume from such a checkpoint
// is not exact: the continuation differs by the codec's error carried forward by the recurrence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/radix_cache.h"
#include "core/cache/state_codec.h"
#include "core/model/model.h"

namespace k3::serve {

// Owner of the checkpoint slots in the pool.
inline constexpr OwnerId kCheckpointOwner = (OwnerId(1) << 40) - 2;

struct CheckpointStats {
    uint64_t live = 0, bytes = 0;  // checkpoints held now and their bytes
    uint64_t peak = 0, peak_bytes = 0;
    uint64_t saved = 0, loaded = 0, freed = 0;
};

class CheckpointStore {
  public:
    CheckpointStore(const model::Model& m, PagePool& pool, StateCodec codec = StateCodec::fp32);
    ~CheckpointStore();  // frees what is left
    CheckpointStore(const CheckpointStore&) = delete;
    CheckpointStore& operator=(const CheckpointStore&) = delete;

    StateCodec codec() const { return codec_; }
    // Bytes one checkpoint takes with this store's codec.
    uint64_t checkpoint_bytes() const;

    // A checkpoint of seq's current state (its KDA states and conv windows). Sets *out (handle >= 1).
    [[nodiscard]] std::string save(const model::Sequence& seq, CheckpointRef* out);
    // Writes checkpoint `handle` into seq's working state.
    [[nodiscard]] std::string load(uint64_t handle, model::Sequence& seq);
    // Frees checkpoint `handle`; false if there is no such live checkpoint.
    bool free(uint64_t handle);
    bool live(uint64_t handle) const;
    // Falsifier hook (k3cli audit-checks): flips bit `bit` (0-7) of byte `byte` of checkpoint
    // `handle` as stored (its slot's bytes, or its encoding), a corruption a resume must not hide.
    // False when the checkpoint is not live or the byte is out of range.
    bool flip_stored_bit(uint64_t handle, uint64_t byte, int bit);

    const CheckpointStats& stats() const { return stats_; }

  private:
    struct Entry {
        bool live = false;
        StateRef slot = kNoRef;     // fp32: a pool slot
        std::vector<uint8_t> blob;  // other codecs: encoded bytes
        uint64_t bytes = 0;
    };
    const model::Model& model_;
    PagePool& pool_;
    StateCodec codec_;
    std::vector<Entry> entries_;  // handle h is entries_[h - 1]
    std::vector<uint64_t> free_;
    CheckpointStats stats_;
};

}  // namespace k3::serve
