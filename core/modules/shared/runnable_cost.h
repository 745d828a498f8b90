// What a run on the runnable models (core/model/model.h) costs, counted before it starts: the modules
// that feed tokens through them (4 prefix, 5 checkpoints, 6 cow, 7 spec-storage, 8 ring, 10 migrate)
// count their tokens here and take the native seconds and peak bytes of their run estimate
// (core/experiments/module.h RunEstimate) from one set of measured per-token costs.
#pragma once

#include <string>

#include "core/model/config.h"

namespace k3 {

struct ForwardWork {
    double instances = 0;  // models made (their seeded weights generated)
    double prefill = 0;    // tokens fed in batched calls (prefill, a verification's draft)
    double decode = 0;     // tokens fed one per call
    double pairs = 0;      // attention (token, earlier token) pairs of both
    double widest = 0;     // the largest call's attention scores: its tokens x the context it sees
    // `tokens` fed in one call after `context` tokens, `times` over.
    void add_prefill(double tokens, double context, double times = 1);
    // `tokens` fed one at a time after `context` tokens, `times` over.
    void add_decode(double tokens, double context, double times = 1);
};

// Native seconds and peak bytes of the work on model `c` (RunEstimate's margin included), and what was
// counted ("12.3 k prefill + 1.2 k decode tokens on k3-tiny").
double forward_seconds(const ForwardWork& w, const ModelConfig& c = default_runnable_config());
double forward_bytes(const ForwardWork& w, const ModelConfig& c = default_runnable_config());
std::string forward_counted(const ForwardWork& w, const ModelConfig& c = default_runnable_config());

}  // namespace k3
