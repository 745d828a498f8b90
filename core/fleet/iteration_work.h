// What one iteration of an instance contains: the input of the step-time model (core/fleet/step_model.h)
// and of the uncalibrated roofline (core/fleet/cost_model.h).
#pragma once

#include <cstdint>

namespace k3 {

// What an iteration contains.
struct IterationWork {
    uint32_t decode = 0;                 // decoding sequences (one token each)
    double decode_context = 0;           // sum of their contexts (tokens already in their KV)
    uint32_t prefill_chunks = 0;         // sequences prefilling a chunk
    double prefill_tokens = 0;           // sum of chunk lengths
    double prefill_attention = 0;        // sum over chunks of n x (context before the chunk + n / 2)
    double largest_chunk = 0;            // the longest chunk's n and its n x (context + n / 2): under DP
    double largest_chunk_attention = 0;  // attention a chunk runs on one rank (core/fleet/step_model.h)
    double draft_tokens = 0;     // speculative draft tokens the decodes verify (query tokens, no chunk)
    double draft_attention = 0;  // their sum of (context + position) over the draft window
    // Speculative decoding's state reads and writes beyond each decode's one of each, in states
    // (core/fleet/spec_decode.h).
    double extra_state_transfers = 0;

    void add_decode(double context) {
        ++decode;
        decode_context += context;
    }
    void add_chunk(double context, double n) {
        ++prefill_chunks;
        prefill_tokens += n;
        const double pairs = n * (context + n / 2);
        prefill_attention += pairs;
        if (n > largest_chunk) {
            largest_chunk = n;
            largest_chunk_attention = pairs;
        }
    }
    bool empty() const { return decode == 0 && prefill_chunks == 0; }
};

}  // namespace k3
