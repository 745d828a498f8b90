// A serving benchmark's closed loop, as sglang.bench_serving, `vllm bench serve` and TensorRT-LLM's
// benchmark_serving run it with --max-concurrency: `prompts` requests of equal lengths, at most
// `concurrency` in flight; the first `concurrency` are sent at once, then one each time one finishes.
// The engine runs steps (each timed by the caller's step model, core/fleet/step_model.h):
//   - attention-DP groups (dp of them): a request joins the group with the fewest requests in flight
//     (the lowest on a tie) and stays there; each group has its own token budget per step;
//   - mixed engines (vLLM, TensorRT-LLM): a step holds every decode of the group (one token each) and,
//     in arrival order, chunks of the waiting prompts within the budget left;
//   - prefill-first (SGLang): while any prompt waits, the step is a prefill step (chunks only, the
//     decodes wait); otherwise a decode step;
//   - a prompt's last chunk gives its first token at the end of that step; each decode step then adds
//     `tokens_per_decode` tokens (speculative decoding's acceptance length; 1 without);
//   - with an overlap scheduler (TensorRT-LLM's and SGLang's; vLLM's async scheduling) the engine forms
//     step i + 1 while step i runs: a request sent when step i ends, while others are in flight, misses
//     step i + 1 (already formed) and joins i + 2 at the earliest (TensorRT-LLM PyExecutor's overlap
//     loop). Its first token still leaves when its own step ends.
// Per request: TTFT = first token - sent; TPOT = (last token - first token) / (output - 1), as the
// benchmarks define them; so a TPOT holds the steps that carry other requests' prefills.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/fleet/iteration_work.h"

namespace k3 {

struct ClosedLoop {
    int concurrency = 1, prompts = 1;
    double input_tokens = 1, output_tokens = 2;
    double cached_tokens = 0;    // of each prompt, a prefix hit: not prefilled
    double step_budget = 8192;   // tokens per step per DP group (decodes count in mixed engines)
    bool prefill_first = false;  // SGLang's scheduling
    bool overlap = false;        // the next step is formed while one runs
    int dp_groups = 1;
    double tokens_per_decode = 1;
};

struct ClosedLoopResult {
    std::vector<double> ttft_s, tpot_s;  // per request, in the order sent
    double duration_s = 0;               // first sent to last token
    uint64_t steps = 0;
};

double mean_of(const std::vector<double>& v);
double median_of(std::vector<double> v);  // the mean of the middle two for an even count

// The step model: seconds of one step of this work (the whole instance, every DP group).
using StepSeconds = std::function<double(const IterationWork&)>;

// Why the loop cannot run ("" when it can): counts at least 1, output at least 2 tokens, a budget that
// holds a decode and a chunk token, and at most kMaxClosedLoopWork request-steps (steps x concurrency,
// estimated up front: each round decodes its output, each prompt's chunks take steps of their own).
inline constexpr double kMaxClosedLoopWork = 4e7;
std::string closed_loop_error(const ClosedLoop& b);
// The request-steps the loop takes at most (steps x concurrency, as closed_loop_error counts them).
double closed_loop_work(const ClosedLoop& b);
ClosedLoopResult run_closed_loop(const ClosedLoop& b, const StepSeconds& step_s);

}  // namespace k3
