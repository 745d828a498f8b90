// Forks of one prefix on the runnable model: parallel sampling (n samples of one prompt) and branching
// (n continuations, each with its own suffix), run together step by step as a batch would.
//
// Two ways to fork (reference/serving.md §2.1: SGLang copies the branch-point state into each fork's
// working slot; vLLM shares KV blocks by reference count):
//   eager  Model::fork: every fork gets its own copy of the state and of every KV page at once;
//   cow    copy-on-write: the forks share the parent's state slot and KV pages (KvPages reference
//          counts). A fork copies the state when it first writes (its first decode or branch prefill;
//          the last fork to write takes the parent's slot without a copy) and copies only the partly
//          filled last page it writes into; the full prefix pages stay shared for good.
// Each fork's output must equal the same fork run alone (a fresh sequence: prompt, branch, sampling
// with the fork's own seed), bit for bit, whichever way it was forked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model.h"

namespace k3::serve {

enum class ForkMode : uint8_t { eager, cow };
const char* fork_mode_id(ForkMode m);  // "eager", "cow"

struct ForkSpec {
    std::vector<int32_t> branch;  // prefilled after the shared prompt (empty: parallel sampling)
    int gen = 1;                  // tokens sampled
    float temperature = 0.0f;     // 0 = greedy
    uint64_t seed = 1;            // the fork's sampler
};

struct ForkOutput {
    std::vector<int32_t> tokens;
    std::vector<float> logits;  // gen rows of vocab: row i is what tokens[i] was sampled from
};

// The same tokens and every logit's bits: what "a fork equals the fork run alone" means.
bool same_output(const ForkOutput& a, const ForkOutput& b);

struct ForkStats {
    uint64_t peak_bytes = 0;  // pool bytes held (KV pages + state slots), largest after any step
    uint64_t peak_kv_pages = 0, peak_states = 0;
    uint64_t state_copies = 0;  // whole states copied
    uint64_t state_bytes_copied = 0;
    uint64_t kv_pages_copied = 0;  // eager: every page of every copy; cow: partly filled pages on write
    uint64_t kv_bytes_copied = 0;  // filled rows copied
    uint64_t states_taken = 0;     // cow: the parent's slot taken over without a copy
    std::vector<double> bytes_after_step;  // pool bytes after the fork, then after each round of steps
};

struct ForkRun {
    std::string error;
    std::vector<ForkOutput> outputs;
    ForkStats stats;
    // After the run: every page and state released, every reference count back to zero.
    bool released = false;
    std::string release_detail;
};

// Deliberate faults for module 6's falsifiers (k3cli audit-checks); none in every real run. Each strikes
// once, at the first fork it can.
enum class ForkFault : uint8_t {
    none,
    flip_state_bit,   // eager: one bit of an eager copy's state is flipped
    skip_state_copy,  // cow: a fork that must copy the shared state decodes from a fresh slot instead
    wrong_page_copy,  // cow: a copy-on-write page copy is filled from the page before the shared one
    extra_page_copy,  // cow: the last reader of a shared page copies it instead of writing in place
    keep_memory,      // both: the first fork to finish keeps its sequence and page references
};

// Runs the prompt once, forks it n = forks.size() ways and steps every fork round-robin until each has
// sampled its gen tokens. The pool (backing storage, the model's geometry) must be empty and hold
// n states and the pages of n sequences; it is empty again afterwards.
ForkRun run_forks(model::Model& m, PagePool& pool, ForkMode mode, const std::vector<int32_t>& prompt,
                  const std::vector<ForkSpec>& forks, ForkFault fault = ForkFault::none);

// One fork run alone: a fresh sequence in `pool`, the prompt, its branch, its sampling.
ForkOutput run_alone(model::Model& m, PagePool& pool, const std::vector<int32_t>& prompt, const ForkSpec& f,
                     std::string* error);

}  // namespace k3::serve
