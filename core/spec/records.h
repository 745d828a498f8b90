// Per-token records of the runnable model's KDA layers (reference/kda.md §6), taken during a forward by
// a ForwardObserver, and their replay onto a layer state. Every field is fp32 in the runnable model
// (its activations are fp32), so a record is RecordLayout::floats * 4 bytes: the figure
// spec::held_bytes_per_token_per_layer gives for the runnable presets (whose dtypes are all fp32), which
// is spec::record_bytes_per_token_per_layer for every variant but recoverssm. RecoverSSM's layout is its
// record (correction, key before L2, raw gate z) followed by the token's raw q, k, v rows: in vLLM those
// rows are a column of the conv window widened to W - 1 + N (counted in the page, not in the record),
// here the record carries that column, so floats x 4 = record bytes + one conv column.
//
// Replay runs the layer's own stages (core/model/kda_layer.h) on the recorded rows:
//   minimal_exact      conv from the window, SiLU, L2, recurrent core          (kda_replay)
//   raw_gates          conv, SiLU, L2, gates from z and the beta logit, core
//   layer_input        every projection from x, then as raw_gates
//   core_only          recurrent core only; the conv windows are NOT rebuilt
//   no_conv_recompute  recurrent core, and the raw rows shifted into the windows
//   delta / delta_conv S = D S + k delta^T (spec/delta.h); delta_conv shifts the raw rows in too
//   recoverssm         the commit fold (kimi_k3.md §3.2) in token order: k = l2norm(recorded k), g from
//                      z through the layer's gate stage (model::kda_gates), S = exp(g) S + k c^T
//                      (delta_replay), and the raw rows shifted into the windows
// Replaying the first n records from the state the recording started at gives the bits of the
// recorded forward after n tokens when that forward ran with CoreMode::recurrent (verification).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/model/model.h"
#include "core/spec/storage.h"

namespace k3::spec {

using kda::FloatBuf;

// Float offsets of a record's fields (-1 when the variant has no such field). One token, one layer.
struct RecordLayout {
    RecordVariant variant = RecordVariant::minimal_exact;
    int floats = 0;
    int k = -1, v = -1, g = -1, beta = -1, delta = -1;
    int raw_q = -1, raw_k = -1, raw_v = -1, z = -1, beta_logit = -1, x = -1;
    int k_pre = -1;  // k after the conv and SiLU, before its L2 norm (recoverssm)
    static RecordLayout of(const model::KdaDims& d, RecordVariant v);
    // Falsifier hook (module 7, k3cli audit-checks): the same layout with its last field laid over the
    // end of the one before it, so a record is allotted that field's floats too few. Every write stays
    // inside the record; the two fields clash. A one-field layout comes back unchanged.
    RecordLayout under_allocated() const;
};

// Falsifier hook (modules 7 and 8): flips bit `bit` of a record's first gate value (g, else the gate
// input z, else the layer input x), which every variant's replay reads; with `correction`, of its first
// correction value instead (the delta forms and recoverssm; nothing for the other variants).
void flip_record_bit(const RecordLayout& lay, float* record, int bit, bool correction = false);

// Records of consecutive tokens for every linear layer: layer l is [tokens][floats], row-major.
class RecordBuffer {
  public:
    void reset(const RecordLayout& lay, int layers);  // empty; keeps the allocations
    const RecordLayout& layout() const { return lay_; }
    int layers() const { return int(rows_.size()); }
    // Tokens every layer holds (a forward fills the layers one after the other).
    int tokens() const;
    // Appends `n` zeroed token rows to layer l and returns the first.
    float* append(int layer, int n);
    const float* row(int layer, int t) const { return rows_[size_t(layer)].data() + size_t(t) * lay_.floats; }
    float* row(int layer, int t) { return rows_[size_t(layer)].data() + size_t(t) * lay_.floats; }
    uint64_t bytes() const;  // tokens x floats x 4 x layers

  private:
    RecordLayout lay_;
    std::vector<FloatBuf> rows_;
    std::vector<int> filled_;
};

// Records every KDA layer of a forward. begin() starts a recording from the sequence's current state
// (the delta form needs it: delta depends on S); a recording may span several forwards.
class Recorder : public model::ForwardObserver {
  public:
    // `under_allocated`: a falsifier hook (RecordLayout::under_allocated), false in normal use.
    Recorder(const model::Model& m, RecordVariant v, bool under_allocated = false);
    // `start`: the state the recording starts from, Model::save_state layout (read by the delta form only).
    void begin(std::span<const std::byte> start);
    const RecordBuffer& records() const { return buf_; }
    void on_kda(int layer, int linear_index, uint64_t pos, const float* x, const model::KdaActs& a) override;
    // Falsifier hook (module 7): spec::flip_record_bit on the recorded token `token` in linear layer
    // `layer`; nothing if that token is not recorded.
    void flip_record_bit(int layer, int token, int bit, bool correction = false);

  private:
    const model::Model& m_;
    RecordLayout lay_;
    RecordBuffer buf_;
    std::vector<FloatBuf> S_;    // delta form: each layer's S after the tokens recorded so far
    std::vector<FloatBuf> win_;  // recoverssm: each layer's conv windows (q, k, v) after them
    model::KdaActs conv_;        // recoverssm: the conv stage run again (k before its L2 norm)
    FloatBuf delta_;
};

struct ReplayScratch {
    model::KdaActs acts;
    FloatBuf zeros;  // q for the recurrent core (read, but only for the output, which replay skips)
    FloatBuf x;      // layer-input rows
    FloatBuf c;      // recoverssm: the corrections, [n][HV*V]
};

// RecoverSSM's commit inputs of n records (rows `rec`, RecordLayout::floats apart), as the commit kernel
// recomputes them: k = l2norm(recorded k) [n][H*K] in s.acts.k, g from z through the layer's gate stage
// [n][HV*K] in s.acts.g, and the corrections [n][HV*V] in s.c. Whatever gate the model uses, this is it.
struct FoldInputs {
    const float *k = nullptr, *c = nullptr, *g = nullptr;
    int n = 0;
};
FoldInputs recoverssm_fold_inputs(const model::KdaWeights& w, const model::KdaDims& d,
                                  const RecordLayout& lay, const float* rec, int n, ReplayScratch& s);

// Applies n records (rows `rec`, RecordLayout::floats apart) to one layer's state, in token order.
void replay_layer(const model::KdaWeights& w, const model::KdaDims& d, const RecordLayout& lay,
                  const model::KdaState& st, const float* rec, int n, ReplayScratch& s, kda::Impl impl);

// Tokens [first, first + n) of `buf` replayed onto every linear layer of `seq` (its state only: the
// caller sets the KV with Model::truncate).
void replay(const model::Model& m, model::Sequence& seq, const RecordBuffer& buf, int first, int n,
            ReplayScratch& s);

}  // namespace k3::spec
