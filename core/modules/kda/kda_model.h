// Module 1 `kda`: the runnable model (core/model) on the device's roofline. Its prefill and decode
// tokens/s, measured like the kernels (timed_rate.h), and what a token of each costs
// (core/model/token_work.h), so the report can put the whole model beside its kernels.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/kda/device.h"
#include "core/model/model.h"
#include "core/model/token_work.h"
#include "core/modules/kda/timed_rate.h"

namespace k3 {

// Tokens of the timed prefill (one chunk of the model's kernel: a call short enough for a page slice)
// and of the context the timed decode steps start from, and the steps per timed decode call.
inline constexpr int kKdaModelPrefill = 64, kKdaModelContext = 64, kKdaModelDecodeSteps = 4;

struct KdaModelRates {
    std::string preset;  // empty: the run measured no model
    uint64_t parameters = 0;
    double prefill = 0, decode = 0;                   // tokens/s
    model::ModelTokenWork prefill_work, decode_work;  // a token of each (core/model/token_work.h)
    std::string error;                                // the model could not be made
};

class KdaModelTiming {
  public:
    explicit KdaModelTiming(std::string preset) { rates_.preset = std::move(preset); }
    // Loads the model (kept across runs, core/model/model_cache.h), then times prefill and decode.
    // Returns the progress in [0, 1].
    double advance(const Deadline& dl);
    const KdaModelRates& rates() const { return rates_; }

  private:
    bool load();
    double prefill_call();
    double decode_call();

    KdaModelRates rates_;
    std::shared_ptr<model::Model> model_;
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<model::Sequence> seq_;
    std::vector<int32_t> prompt_;
    model::SequenceSnapshot empty_, at_context_;
    std::vector<float> logits_;
    int stage_ = 0;  // 0 load, 1 prefill timed, 2 decode timed, 3 done
    TimedRate timed_;
};

}  // namespace k3
