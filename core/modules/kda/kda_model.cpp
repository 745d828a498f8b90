// Module 1 `kda`: the runnable model's prefill and decode, timed (kda_model.h).
#include "core/modules/kda/kda_model.h"

#include <span>

#include "core/base/rng.h"
#include "core/model/model_cache.h"
#include "core/model/sampler.h"

namespace k3 {

namespace {
constexpr double kTimedModelMs = 6;  // least timed time per measurement, as the kernels'
}

bool KdaModelTiming::load() {
    model_ = model::cached_model({.preset = rates_.preset}, &rates_.error);
    if (!model_) return false;
    const int tokens = kKdaModelContext + kKdaModelDecodeSteps + kKdaModelPrefill;
    PoolResult p = model::make_model_pool(*model_, 1, uint64_t(tokens), 16);
    if (!p.pool) return rates_.error = p.error, false;
    pool_ = std::move(p.pool);
    model::SequenceResult s = model_->new_sequence(*pool_, 1);
    if (!s.seq) return rates_.error = s.error, false;
    seq_ = std::move(s.seq);
    Rng r(7);
    for (int i = 0; i < tokens; ++i) prompt_.push_back(int32_t(r.below(uint64_t(model_->vocab()))));
    empty_ = model_->save(*seq_);
    const std::string e =
        model_->prefill(*seq_, std::span<const int32_t>(prompt_.data(), size_t(kKdaModelContext)), &logits_);
    if (!e.empty()) return rates_.error = e, false;
    at_context_ = model_->save(*seq_);
    rates_.parameters = model_->weights().parameters();
    return true;
}

// A prefill of kKdaModelPrefill tokens into the empty sequence (restoring it is a copy of nothing).
double KdaModelTiming::prefill_call() {
    (void)model_->restore(*seq_, empty_);
    (void)model_->prefill(*seq_, std::span<const int32_t>(prompt_.data(), size_t(kKdaModelPrefill)));
    return kKdaModelPrefill;
}

// Greedy decode steps from the saved context (restoring it copies the state: under 1 % of the call).
double KdaModelTiming::decode_call() {
    (void)model_->restore(*seq_, at_context_);
    int32_t tok = model::argmax(logits_.data(), model_->vocab());
    std::vector<float> logits;
    for (int i = 0; i < kKdaModelDecodeSteps; ++i) {
        (void)model_->decode(*seq_, tok, &logits);
        tok = model::argmax(logits.data(), model_->vocab());
    }
    return kKdaModelDecodeSteps;
}

double KdaModelTiming::advance(const Deadline& dl) {
    if (stage_ == 0) {
        if (!load()) return stage_ = 3, 1.0;
        // The prefill's tokens see half of the prompt on average.
        rates_.prefill_work =
            model::model_token_work(model_->config(), model_->weights(), kKdaModelPrefill / 2.0);
        rates_.decode_work = model::model_token_work(model_->config(), model_->weights(), kKdaModelContext);
        timed_ = {[this] { return prefill_call(); }};
        stage_ = 1;
        if (dl.passed()) return 0.3;
    }
    if (stage_ == 1) {
        if (!timed_.advance(dl, kTimedModelMs)) return 0.5;
        rates_.prefill = timed_.best;
        timed_ = {[this] { return decode_call(); }};
        stage_ = 2;
    }
    if (stage_ == 2) {
        if (!timed_.advance(dl, kTimedModelMs)) return 0.8;
        rates_.decode = timed_.best;
        stage_ = 3;
        seq_.reset(), pool_.reset();  // the sequence gives its pages back to the pool
    }
    return 1.0;
}

}  // namespace k3
