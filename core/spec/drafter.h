// Drafters for speculative decoding on the runnable model. A step verifies N tokens: the pending token
// (the target's last pick, known correct) followed by N - 1 drafted tokens.
//   ChanceDrafter: proposes the target's own greedy continuation (computed beforehand) and gets each
//                  token right with a set probability, seeded: the acceptance sweeps of modules 7, 8
//                  and `k3cli bench spec`. Drafting costs nothing, so it bounds what speculation gains.
//   SelfDrafter:   the runnable model drafting for itself with its projection weights quantised to b
//                  bits (per output channel, symmetric). It runs greedily on a sequence of its own and
//                  rolls back like the target (records + replay, spec/verify.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/model/model.h"
#include "core/spec/verify.h"

namespace k3::spec {

class Drafter {
  public:
    virtual ~Drafter() = default;
    virtual std::string name() const = 0;
    // The target prefilled `prompt`; the committed stream starts after it.
    [[nodiscard]] virtual std::string start(std::span<const int32_t> prompt) = 0;
    // `count` tokens to follow the committed stream and `pending` (the next token, known correct).
    [[nodiscard]] virtual std::string draft(int32_t pending, int count, std::vector<int32_t>* out) = 0;
    // The verifier kept `tokens` (the pending token and the accepted drafts): the committed stream grows.
    [[nodiscard]] virtual std::string commit(std::span<const int32_t> tokens) = 0;
};

class ChanceDrafter : public Drafter {
  public:
    // `continuation`: the target's greedy tokens after the prompt (the first is the first pending token).
    // Each drafted token is the right one with probability `p` while all before it were right; otherwise
    // a different token. Past the end of the continuation every draft is a random token.
    ChanceDrafter(std::vector<int32_t> continuation, double p, uint64_t seed, int vocab);
    std::string name() const override;
    std::string start(std::span<const int32_t> prompt) override;
    std::string draft(int32_t pending, int count, std::vector<int32_t>* out) override;
    std::string commit(std::span<const int32_t> tokens) override;

  private:
    std::vector<int32_t> cont_;
    double p_;
    Rng rng_;
    int vocab_;
    size_t pos_ = 0;  // committed tokens of the continuation
};

// Projection weights rounded to `bits` (2..8) per output channel: scale = max |w| / (2^(bits-1) - 1),
// w = round(w / scale) * scale, then stored as bf16 again. 16 leaves the weights as they are. The
// embedding, norms, conv taps and gate constants stay (weight-only quantisation as GPTQ/AWQ do).
void quantise_weights(model::ModelWeights& w, int bits);

// The model of `config` and `seed` with quantised weights (its fingerprint is the unquantised one's:
// never restore its states into the target).
model::ModelResult make_quantised_model(const ModelConfig& config, uint64_t seed, int bits,
                                        const model::ModelOptions& o = {});

class SelfDrafter : public Drafter {
  public:
    // `drafter`: a model of the target's geometry (its quantised copy); must outlive this.
    static std::unique_ptr<SelfDrafter> create(model::Model& drafter, uint64_t max_tokens,
                                               std::string* error);
    std::string name() const override { return name_; }
    std::string start(std::span<const int32_t> prompt) override;
    std::string draft(int32_t pending, int count, std::vector<int32_t>* out) override;
    std::string commit(std::span<const int32_t> tokens) override;

  private:
    explicit SelfDrafter(model::Model& m);
    model::Model& m_;
    std::string name_;
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<model::Sequence> seq_;
    Verifier verifier_;
    std::vector<int32_t> committed_;  // prompt and committed tokens
    std::vector<float> logits_;
    int fed_ = 0, drafted_ = 0;  // tokens the last draft() fed in (catch-up + pending) and drafted
};

}  // namespace k3::spec
