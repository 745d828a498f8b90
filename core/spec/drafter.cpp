#include "core/spec/drafter.h"

#include <algorithm>
#include <cmath>

#include "core/model/sampler.h"

namespace k3::spec {

// ---- ChanceDrafter -----------------------------------------------------------------------------

ChanceDrafter::ChanceDrafter(std::vector<int32_t> continuation, double p, uint64_t seed, int vocab)
    : cont_(std::move(continuation)), p_(p), rng_(seed), vocab_(vocab) {}

std::string ChanceDrafter::name() const { return "chance p=" + std::to_string(p_).substr(0, 4); }

std::string ChanceDrafter::start(std::span<const int32_t>) {
    pos_ = 0;
    return {};
}

std::string ChanceDrafter::draft(int32_t pending, int count, std::vector<int32_t>* out) {
    out->clear();
    bool right = true;
    for (int i = 1; i <= count; ++i) {
        const size_t at = pos_ + size_t(i);
        const bool hit = rng_.bernoulli(p_);  // drawn for every token: the stream does not depend on hits
        const uint64_t other = rng_.below(uint64_t(std::max(vocab_ - 1, 1)));
        if (at >= cont_.size()) {
            out->push_back(int32_t(other));
            continue;
        }
        right = right && hit;
        // A miss proposes any token but the right one.
        out->push_back(right ? cont_[at] : int32_t((uint64_t(cont_[at]) + 1 + other) % uint64_t(vocab_)));
    }
    (void)pending;
    return {};
}

std::string ChanceDrafter::commit(std::span<const int32_t> tokens) {
    pos_ += tokens.size();
    return {};
}

// ---- quantised weights -------------------------------------------------------------------------

namespace {

void quantise(model::Matrix& m, int bits) {
    const double qmax = double((1 << (bits - 1)) - 1);
    for (int o = 0; o < m.out; ++o) {
        double amax = 0;
        for (int i = 0; i < m.in; ++i) amax = std::max(amax, std::fabs(double(m.at(i, o))));
        if (amax == 0) continue;
        const double scale = amax / qmax;
        for (int i = 0; i < m.in; ++i) {
            const double q = std::clamp(std::floor(double(m.at(i, o)) / scale + 0.5), -qmax, qmax);
            m.set(i, o, float(q * scale));
        }
    }
}

}  // namespace

void quantise_weights(model::ModelWeights& w, int bits) {
    if (bits >= 16) return;
    for (auto& b : w.blocks) {
        for (model::Matrix* m :
             {&b.kda.q, &b.kda.k, &b.kda.v, &b.kda.f_a, &b.kda.f_b, &b.kda.b, &b.kda.g_a, &b.kda.g_b,
              &b.kda.o, &b.mla.q, &b.mla.kv_a, &b.mla.o, &b.mlp.gate, &b.mlp.up, &b.mlp.down})
            quantise(*m, bits);
        for (auto& m : b.mla.w_uk) quantise(m, bits);
        for (auto& m : b.mla.w_uv) quantise(m, bits);
    }
    quantise(w.lm_head, bits);
}

model::ModelResult make_quantised_model(const ModelConfig& config, uint64_t seed, int bits,
                                        const model::ModelOptions& o) {
    if (bits < 2 || (bits > 8 && bits != 16))
        return {nullptr,
                "drafter bits (" + std::to_string(bits) + ") must be in [2, 8], or 16 for unquantised"};
    model::ModelResult r = model::Model::create(config, seed, o);
    if (!r.model) return r;
    // Model has no constructor from given weights; its weights are a plain member of a non-const
    // object, written once here before any use (core/model does not cache anything derived from them).
    quantise_weights(const_cast<model::ModelWeights&>(r.model->weights()), bits);
    return r;
}

// ---- SelfDrafter -------------------------------------------------------------------------------

SelfDrafter::SelfDrafter(model::Model& m)
    : m_(m), verifier_(m, Rollback::replay, RecordVariant::minimal_exact) {}

std::unique_ptr<SelfDrafter> SelfDrafter::create(model::Model& drafter, uint64_t max_tokens,
                                                 std::string* error) {
    std::unique_ptr<SelfDrafter> d(new SelfDrafter(drafter));
    PoolResult p = model::make_model_pool(drafter, 1, max_tokens);
    if (!p.pool) {
        *error = "drafter pool: " + p.error;
        return nullptr;
    }
    d->pool_ = std::move(p.pool);
    model::SequenceResult s = drafter.new_sequence(*d->pool_, 1);
    if (!s.seq) {
        *error = "drafter sequence: " + s.error;
        return nullptr;
    }
    d->seq_ = std::move(s.seq);
    d->name_ = "self (quantised copy)";
    return d;
}

std::string SelfDrafter::start(std::span<const int32_t> prompt) {
    if (seq_->position() != 0)
        if (std::string e = m_.truncate(*seq_, 0); !e.empty()) return e;
    std::vector<std::byte> zero(m_.pool_model().state_bytes(), std::byte{0});
    if (std::string e = m_.restore_state(*seq_, zero); !e.empty()) return e;
    committed_.assign(prompt.begin(), prompt.end());
    fed_ = drafted_ = 0;
    return m_.prefill(*seq_, prompt);
}

std::string SelfDrafter::draft(int32_t pending, int count, std::vector<int32_t>* out) {
    out->clear();
    fed_ = drafted_ = 0;
    if (count <= 0) return {};
    // Catch up on committed tokens the drafter has not seen (all its drafts were accepted), then the
    // pending token; each further draft is fed back in, one token at a time.
    std::vector<int32_t> feed(committed_.begin() + ptrdiff_t(seq_->position()), committed_.end());
    feed.push_back(pending);
    if (std::string e = verifier_.begin(*seq_); !e.empty()) return e;
    const size_t V = size_t(m_.vocab());
    for (int i = 0; i < count; ++i) {
        logits_.clear();
        if (std::string e = verifier_.extend(*seq_, feed, &logits_); !e.empty()) return e;
        fed_ += int(feed.size());
        const int32_t d = model::argmax(logits_.data() + logits_.size() - V, int(V));
        out->push_back(d);
        ++drafted_;
        feed.assign(1, d);
    }
    return {};  // the last draft is never fed in: fed_ = catch-up + pending + count - 1 tokens
}

std::string SelfDrafter::commit(std::span<const int32_t> tokens) {
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
    if (drafted_ == 0) return {};
    // Processed: catch-up, pending, drafts 1 .. count - 1. The target kept the pending token and the
    // accepted drafts; when it kept every draft, the last one is fed in with the next draft() call.
    const int catch_up = fed_ - drafted_;
    const int keep = std::min(fed_, catch_up + int(tokens.size()));
    drafted_ = 0;
    return verifier_.keep(*seq_, keep);
}

}  // namespace k3::spec
