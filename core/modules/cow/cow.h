// Module 6 `cow`: copy-on-write forks on the runnable model (parallel sampling and branching), against
// eager copies, with every fork's output checked against the same fork run alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/forks.h"
#include "core/experiments/module.h"
#include "core/model/config.h"

namespace k3 {

enum class CowScenario : uint8_t { sampling, branching };

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class CowFalsify : uint8_t {
    none,
    flip_state_bit,   // serve::ForkFault::flip_state_bit in the eager run
    skip_state_copy,  // serve::ForkFault::skip_state_copy in the copy-on-write run
    wrong_page_copy,  // serve::ForkFault::wrong_page_copy in the copy-on-write run
    extra_page_copy,  // serve::ForkFault::extra_page_copy in the copy-on-write run
    keep_memory,      // serve::ForkFault::keep_memory in both runs
    one_state_slot,   // every pool is made with one state slot, whatever the forks need
};

struct CowParams {
    CowScenario scenario = CowScenario::sampling;
    int forks = 4;
    int prompt_tokens = 120;
    int branch_tokens = 16;  // branching only
    int gen = 6;             // tokens sampled per fork
    double temperature = 0.8;
    uint64_t seed = 1;
    int page_size = 16;                     // tokens per KV page
    CowFalsify falsify = CowFalsify::none;  // not a declared parameter
};

// One way of forking, run over all forks together.
struct CowMethodRun {
    serve::ForkRun run;
    double ms = 0;  // wall clock (the report's timing)
};

struct CowResult {
    std::string failed;  // what went wrong, "" when every stage ran
    std::vector<int32_t> prompt;
    std::vector<serve::ForkSpec> specs;
    CowMethodRun eager, cow;
    std::vector<serve::ForkOutput> alone;  // each fork run alone, in a fresh sequence
    double alone_ms = 0;
    // Per fork: its output under eager copies / copy-on-write has the bits of the fork run alone.
    std::vector<bool> eager_same, cow_same;
    size_t writing_forks = 0;                          // forks that write (fork_writes)
    uint64_t state_bytes = 0, kv_bytes_per_token = 0;  // the runnable model's pool geometry

    const CowMethodRun& method(serve::ForkMode m) const { return m == serve::ForkMode::eager ? eager : cow; }
};

// Whether a fork writes after the fork: a branch to prefill, or a sampled token to decode before its last.
inline bool fork_writes(const serve::ForkSpec& s) { return !s.branch.empty() || s.gen > 1; }

ParamList<CowParams> cow_params();
void validate_cow(const CowParams& p, Issues& issues);
// What a run costs before it starts: the runnable model's tokens (core/modules/shared/runnable_cost.h).
RunEstimate cow_estimate(const CowParams& p);
// The pool a run needs for model `m`: n + 1 state slots and the pages of n + 1 sequences.
uint64_t cow_pool_bytes(const CowParams& p, const ModelConfig& m);
std::unique_ptr<Run> start_cow(const CowParams& p, const Params& raw);
void report_cow(const CowParams& p, const CowResult& m, Report& r);

}  // namespace k3
