// The runnable hybrid model (reference/kda.md §1): embedding, decoder blocks
// h += Attn(RMSNorm(h)); h += MLP(RMSNorm(h)) with KDA or MLA attention in the config's pattern,
// final RMSNorm and LM head. With attention residuals (Kimi K3, attn_res.h) each sub-layer's input is
// instead the RMSNorm of a softmax over depth of the sealed block sums and the running sum. Sequences live in
// a PagePool with backing storage (sequence.h).
//
//   auto m    = Model::create(default_runnable_config(), /*seed*/ 1);      // m.model, m.error
//   auto pool = make_model_pool(*m.model, /*sequences*/ 4, /*tokens each*/ 2048);
//   auto s    = m.model->new_sequence(*pool.pool, /*owner*/ 1);           // s.seq, s.error
//   std::vector<float> logits;
//   m.model->prefill(*s.seq, prompt, &logits);           // chunked KDA kernel, logits of the last token
//   m.model->decode(*s.seq, argmax(logits.data(), vocab), &logits);  // recurrent KDA step
//
// Exactness (tests/unit/test_model*.cpp): prefill(A) then prefill(B) has the bits of prefill(A ++ B)
// when |A| is a multiple of the chunk size (the chunked kernel restarts at each call, everything else
// is row by row); a multi-token forward with CoreMode::recurrent has the bits of decoding the tokens
// one by one; save / restore / fork copy bytes, so continuing is bitwise the uninterrupted run.
// Natively and in WebAssembly the bits are the same (docs/architecture.md, Numerics).
//
// Not thread-safe: a Model owns the scratch buffers of its forward passes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/memory/pool.h"
#include "core/model/config.h"
#include "core/model/kda_layer.h"
#include "core/model/mla_layer.h"
#include "core/model/mlp.h"
#include "core/model/pool_model.h"
#include "core/model/sequence.h"
#include "core/model/weights.h"

namespace k3::model {

struct ModelOptions {
    int chunk = 64;          // KDA prefill chunk size C, in [1, kda::kMaxChunk]
    Impl impl = Impl::simd;  // kernels: xsimd or scalar (the same bits)
    // Tokens per internal prefill pass (rounded up to a multiple of `chunk`, so results are unchanged):
    // bounds the per-token scratch memory of long prompts.
    int prefill_slice = 512;
    uint64_t max_context = 1u << 20;  // refuse sequences longer than this (attention scratch grows with it)
};

// Empty when the config can run; otherwise what is wrong.
std::string check_runnable(const ModelConfig& c);

enum class LogitRows : uint8_t { none, last, all };

// Sees every layer's per-token intermediates during a forward (the seam for recording projections
// for speculative replay, reference/kda.md §6). Called after the layer's stages ran on tokens
// [pos, pos + T) of the sequence (a long prefill arrives in several slices). x is the layer input
// (the block's input RMSNorm output) [T][d_model]. The views are valid only during the call.
class ForwardObserver {
  public:
    virtual ~ForwardObserver() = default;
    virtual void on_kda(int layer, int linear_index, uint64_t pos, const float* x, const KdaActs& a) {}
    virtual void on_mla(int layer, int attention_index, uint64_t pos, const float* x, const MlaActs& a) {}
};

struct ForwardOptions {
    CoreMode core = CoreMode::chunked;
    LogitRows logits = LogitRows::last;
    ForwardObserver* observer = nullptr;
};

class Model;
struct ModelResult {
    std::unique_ptr<Model> model;
    std::string error;
};

class Model {
  public:
    static ModelResult create(const ModelConfig& c, uint64_t seed, const ModelOptions& o = {});

    const ModelConfig& config() const { return config_; }
    const ModelOptions& options() const { return options_; }
    const ModelWeights& weights() const { return weights_; }
    uint64_t seed() const { return seed_; }
    // Identifies config + seed (hence the weights) and the state layout; snapshots carry it.
    uint64_t fingerprint() const { return fingerprint_; }
    const KdaDims& kda() const { return kda_; }
    const MlaDims& mla() const { return mla_; }
    int vocab() const { return config_.vocab; }
    // Index of layer l among the linear (KDA) or attention (MLA) layers, -1 if it is of the other kind.
    int linear_index(int layer) const { return linear_index_[size_t(layer)]; }
    int attention_index(int layer) const { return attention_index_[size_t(layer)]; }
    // The layer of the i-th linear (KDA) or attention (MLA) layer.
    int layer_of_linear(int i) const { return linear_layers_[size_t(i)]; }
    const KdaWeights& kda_weights(int linear_index) const {
        return weights_.blocks[size_t(layer_of_linear(linear_index))].kda;
    }
    // What a pool for this model's sequences is made with: pool_model(config) (core/model/pool_model.h).
    const PoolModel& pool_model() const { return pool_model_; }

    // ---- sequences ----
    // A new, empty sequence (position 0, zero state) owned by `owner` in `pool`, which must have
    // backing storage and this model's pool_model(); `owner` must hold nothing yet.
    [[nodiscard]] SequenceResult new_sequence(PagePool& pool, OwnerId owner) const;
    // Everything `seq` needs to continue (state bytes, KV bytes, position).
    SequenceSnapshot save(const Sequence& seq) const;
    // Makes `into` (a sequence of this model, in any pool) exactly the saved one. On error nothing changes.
    [[nodiscard]] std::string restore(Sequence& into, const SequenceSnapshot& snap) const;
    // An eager copy of `src` under a new owner in the same pool.
    [[nodiscard]] SequenceResult fork(const Sequence& src, OwnerId owner) const;

    // ---- speculative rollback seams (reference/kda.md §6) ----
    // The KDA state alone (every linear layer: S, then the windows), e.g. the confirmed state before
    // verifying drafts. Same layout as SequenceSnapshot::state.
    std::vector<std::byte> save_state(const Sequence& seq) const;
    [[nodiscard]] std::string restore_state(Sequence& seq, std::span<const std::byte> state) const;
    // Keeps the first `position` tokens (<= seq.position()) of the KV and sets the position. The KDA
    // state cannot be rewound: the caller makes it match (restore_state, then kda_replay of the
    // accepted tokens' records). A sequence whose state and position disagree is the caller's bug.
    [[nodiscard]] std::string truncate(Sequence& seq, uint64_t position) const;
    // Makes `seq` continue after the KV its owner holds in the pool, put there without the model (a
    // prefix cache lends its pages with PagePool::append_kv): sets the position to the owner's KV
    // tokens; nothing is copied (model_adopt.cpp). The caller makes the state match (restore_state, or
    // PagePool::copy_state from a checkpoint at that position): a state of any other position gives
    // wrong outputs (vLLM #43090; module 4 measures it).
    [[nodiscard]] std::string adopt_kv(Sequence& seq) const;

    // ---- forward ----
    // Appends `tokens` at seq.position(). Logits (vocab floats per row) of the last token or of every
    // token, replacing *logits (left empty for zero tokens or LogitRows::none). All or nothing: a bad
    // token id, a full pool or an over-long context returns an error before anything changes.
    // Zero tokens change nothing.
    [[nodiscard]] std::string forward(Sequence& seq, std::span<const int32_t> tokens,
                                      const ForwardOptions& fo, std::vector<float>* logits);
    // Chunked KDA kernel, logits of the last token.
    [[nodiscard]] std::string prefill(Sequence& seq, std::span<const int32_t> tokens,
                                      std::vector<float>* logits = nullptr);
    // One token through the recurrent KDA step.
    [[nodiscard]] std::string decode(Sequence& seq, int32_t token, std::vector<float>* logits = nullptr);

    // ---- views for running one layer alone (valid until the pool next allocates) ----
    KdaState kda_state(const Sequence& seq, int linear_index) const;
    KvView kv_view(const Sequence& seq, int attention_index) const;  // covers kv_tokens(owner) rows

  private:
    Model() = default;
    std::string check_sequence(const Sequence& seq) const;
    void write_state(Sequence& seq, const std::byte* state) const;  // state_bytes(), checked by the caller
    void run_mixer(int layer, int T, uint64_t pos, const ForwardOptions& fo,
                   const std::vector<KdaState>& kda_states, const std::vector<KvView>& kv_views);
    void attn_res_input(int layer, int T, bool mlp);
    void run_slice(Sequence& seq, std::span<const int32_t> tokens, uint64_t pos, const ForwardOptions& fo,
                   const std::vector<KdaState>& kda_states, const std::vector<KvView>& kv_views,
                   bool want_last, std::vector<float>* logits);

    ModelConfig config_;
    ModelOptions options_;
    uint64_t seed_ = 0, fingerprint_ = 0;
    ModelWeights weights_;
    KdaDims kda_;
    MlaDims mla_;
    PoolModel pool_model_;
    std::vector<int> linear_index_, attention_index_, linear_layers_, attention_layers_;

    // Scratch of a forward pass (grown on demand).
    FloatBuf h_, xn_, out_, logit_rows_;
    FloatBuf mix_, blocks_;  // attention residuals: the mixed input, the sealed blocks [T][blocks][d]
    KdaActs kda_acts_;
    MlaActs mla_acts_;
    MlpActs mlp_acts_;
};

// A static-split pool with backing storage sized exactly for `sequences` sequences of up to
// `tokens_each` tokens (page_tokens tokens per KV page), for this model.
PoolResult make_model_pool(const Model& m, int sequences, uint64_t tokens_each, uint32_t page_tokens = 16);

}  // namespace k3::model
