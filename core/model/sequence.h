// A sequence of the runnable model and the memory it lives in (a PagePool with backing storage):
//   - one state slot holding every KDA layer's recurrent state S and its conv windows, in the layout
//     of KdaState (kda_layer.h): per layer S [HV][K][V] fp32, then the q, k, v windows [W-1][channels];
//   - the latent KV cache of every MLA layer in the pool's KV pages, one fp32 row
//     [c_kv (latent) | k_pe (rope)] per token per layer;
//   - its position (tokens processed so far; the KV holds exactly that many tokens).
// The pool's PoolModel must be Model::pool_model(), i.e. derived from core/model/accounting.h, so the
// accounting and the bytes really used agree exactly.
//
// A Sequence is the only user of its owner id in the pool and releases everything the owner holds
// when destroyed, so the pool must outlive its sequences. Pointers into the pool are never kept across calls
// (the unified pool's compaction moves bytes; handles stay valid).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory/pool.h"

namespace k3::model {

class Model;

class Sequence {
  public:
    ~Sequence();
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;

    uint64_t position() const { return position_; }
    OwnerId owner() const { return owner_; }
    StateRef state() const { return state_; }
    PagePool& pool() const { return *pool_; }

  private:
    friend class Model;
    Sequence(PagePool* pool, OwnerId owner, StateRef state) : pool_(pool), owner_(owner), state_(state) {}

    PagePool* pool_;
    OwnerId owner_;
    StateRef state_;
    uint64_t position_ = 0;
};

struct SequenceResult {
    std::unique_ptr<Sequence> seq;
    std::string error;
};

// Everything a sequence needs to continue, as plain bytes (the versioned, checksummed blob format of
// module 10 wraps this). Restoring it and continuing gives the same bits as never stopping.
struct SequenceSnapshot {
    uint64_t fingerprint = 0;  // Model::fingerprint() of the model that wrote it
    uint64_t position = 0;
    std::vector<std::byte>
        state;                  // every linear layer in order, state_bytes_per_layer each (S, then windows)
    std::vector<std::byte> kv;  // every attention layer in order, position x cache-row bytes, token-major
};

// The same position and the same bytes of state and KV (whichever model wrote them).
inline bool same_contents(const SequenceSnapshot& a, const SequenceSnapshot& b) {
    return a.position == b.position && a.state == b.state && a.kv == b.kv;
}

}  // namespace k3::model
