// What compressing a state checkpoint does to the runnable model (module 5): the state error each
// codec makes on real KDA states, and how far the next-token logits move when a request resumes
// from the compressed checkpoint instead of the exact one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/state_codec.h"
#include "core/model/model.h"

namespace k3::serve {

struct CodecEffectConfig {
    int prompts = 3;  // random prompts (seeded)
    int resume = 64;  // checkpoint position (a multiple of the kernel chunk: the exact resume is bitwise)
    int continue_tokens = 16;  // prompt tokens prefilled after the resume
    int steps = 2;             // next-token predictions compared: the prompt's last, then greedy decode steps
    uint64_t seed = 1;
    // Falsifier hooks (k3cli audit-checks), off by default: measure_codec flips a bit of each encoding
    // of a real state before decoding it; one bit of every stored checkpoint is flipped before the resume.
    bool flip_encoded_bit = false, flip_checkpoint_bit = false;
};

struct CodecEffect {
    StateCodec codec = StateCodec::fp32;
    uint64_t checkpoint_bytes = 0;
    // On the real states (every linear layer of every prompt): largest error / stated bound, largest
    // absolute error, largest per-layer relative RMS error.
    double state_bound_ratio = 0, state_max_abs = 0, state_rel_rms = 0;
    // Resume from the compressed checkpoint vs the exact one, the same tokens fed to both.
    double max_logit_diff = 0;
    double logit_scale = 0;  // largest |logit| of the exact runs, for scale
    uint64_t rows = 0, top1_agree = 0;
    bool bitwise = true;  // every compared logit row has the same bits
    // The resume (its KDA state wiped, then loaded from the checkpoint alone) against a cold run that
    // prefills the whole prompt in one call with no checkpoint: every logit row has the same bits.
    bool cold_bitwise = true;
};

// One entry per codec of state_codec_ids(), in that order. Empty and *error set on failure.
std::vector<CodecEffect> measure_codec_effects(model::Model& m, const CodecEffectConfig& c,
                                               std::string* error);

}  // namespace k3::serve
