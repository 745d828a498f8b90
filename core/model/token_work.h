// What one token costs the runnable model, for the device roofline of module 1 and `bench model`
// (core/kda/device.h): its arithmetic and the bytes it moves. Every projection weight is one
// multiply-add per token (2 flop) and 2 bytes of bf16; the KDA layers add their recurrence (7 flop per
// state element, the state read and written), the MLA layers their attention over the cached latents.
// Norms, gates, the conv windows and the activations are left out: under 2 % of the flop of the
// runnable presets.
#pragma once

#include "core/kda/device.h"
#include "core/model/config.h"
#include "core/model/weights.h"

namespace k3::model {

struct ModelTokenWork {
    double projection_flop = 0, core_flop = 0;  // the projections (2 x weights); KDA and attention cores
    double weight_bytes = 0;                    // bf16 projection weights, all of them
    double state_bytes = 0;                     // fp32 recurrent states of all KDA layers (read + written)
    double kv_bytes = 0;                        // the cached latents an attention step reads
};

// One token at `context` tokens of history.
ModelTokenWork model_token_work(const ModelConfig& c, const ModelWeights& w, double context);

// A decode step: the weights stream once per token from `weights_level` (the level nearest their
// size). A prefill of T tokens: the batched projection reads each weight once per call, so the weight
// traffic per token is 1 / T of it.
kda::KernelWork decode_token_work(const ModelTokenWork& t, kda::MemLevel weights_level);
kda::KernelWork prefill_token_work(const ModelTokenWork& t, int T, kda::MemLevel weights_level);

}  // namespace k3::model
