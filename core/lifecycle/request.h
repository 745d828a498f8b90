// A generation request served by the runnable model: its sequence (state and KV in a page pool), its
// token history and its sampler. The serving path is fixed so that it can be replayed bit for bit:
// the prompt is prefilled in one call (chunked KDA kernel), then every generated token is fed by one
// decode step (recurrent KDA step). A sampled token is "pending" until it is fed.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/sampler.h"

namespace k3::lifecycle {

struct Request {
    std::unique_ptr<model::Sequence> seq;
    std::vector<int32_t> tokens;  // prompt, then generated; tokens[seq->position() ...] are pending
    uint64_t prompt_tokens = 0;
    model::Sampler sampler;

    uint64_t consumed() const { return seq ? seq->position() : 0; }
};

// A KDA state kept at a position (a prefix-cache checkpoint, a host-tier replica).
struct StateCheckpoint {
    uint64_t model_hash = 0;
    uint64_t position = 0;
    std::vector<std::byte> state;  // Model::save_state layout
};
StateCheckpoint take_checkpoint(const model::Model& m, const model::Sequence& seq);

// Makes a new sequence for `owner` in `pool`, prefills `prompt` (at least one token) and samples the
// first generated token (pending). logits: of the last prompt token (optional).
// With `cuts` (ascending positions inside the prompt, multiples of the chunk size) the prompt is
// prefilled in pieces ending there, which has the bits of one call, and a checkpoint of the state
// after each piece is appended to *checkpoints (as a prefix cache would keep them).
[[nodiscard]] std::string start_request(model::Model& m, PagePool& pool, OwnerId owner,
                                        std::span<const int32_t> prompt, const model::Sampler& sampler,
                                        Request* out, std::vector<float>* logits = nullptr,
                                        std::span<const uint64_t> cuts = {},
                                        std::vector<StateCheckpoint>* checkpoints = nullptr);

// Feeds the pending token with one decode step and samples the next one. logits: of the fed token.
[[nodiscard]] std::string step_request(model::Model& m, Request& r, std::vector<float>* logits = nullptr);

// What a request produced from some point on (a pause, say): its token history at the end and the
// logits of every token fed since. Two runs of a request agree when their traces are identical.
struct Trace {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
};

// Feeds n more tokens (step_request), appending the logits of each to t->logits; then t->tokens is the
// request's token history. Stops at the first error and returns it.
[[nodiscard]] std::string continue_for(model::Model& m, Request& r, int n, Trace* t);

// The same tokens and, bit for bit (k3::bitwise_equal), the same logits.
bool identical(const Trace& a, const Trace& b);

}  // namespace k3::lifecycle
