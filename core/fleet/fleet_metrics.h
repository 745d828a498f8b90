// Figures of a fleet run under the names serving simulators and benchmarks use (Vidur,
// LLMServingSim, vLLM's benchmark_serving): TTFT (arrival to first output token), TPOT (time per
// output token after the first), E2E (arrival to last token) with mean / p50 / p90 / p99 / max,
// throughput, prefix-cache hit rates (KV-visible and state-usable, over prompt tokens at each
// request's first admission), load imbalance and Jain's fairness index, GPU-hours and cost.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/fleet/fleet_sim.h"

namespace k3 {

struct Percentiles {
    uint64_t n = 0;
    double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
// Linear interpolation between order statistics (numpy's default), on a sorted copy.
Percentiles percentiles(std::vector<double> v);
double percentile_sorted(const std::vector<double>& sorted, double q);
// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one takes all.
double jain_index(const std::vector<double>& x);
// Max-min fair shares of `total` among demands with weights (weighted water-filling): no one gets
// more than it asked for, and what it leaves is split among the others by weight.
std::vector<double> max_min_fair_shares(double total, const std::vector<double>& demand,
                                        const std::vector<double>& weight);

// Requests of a run seen together (all of them, one tenant, arrivals in a window).
struct RequestSummary {
    uint64_t requests = 0, completed = 0, failed = 0;
    uint64_t prompt_tokens = 0, output_tokens = 0;  // output: tokens generated
    uint64_t kv_hit_tokens = 0, state_hit_tokens = 0, best_state_tokens = 0;
    uint64_t prefill_work = 0;  // context tokens computed, over all attempts
    uint64_t preemptions = 0, moves = 0, violations = 0;
    Percentiles ttft_ms, tpot_ms, e2e_ms;
    double first_arrival_ms = 0, last_finish_ms = 0;

    double hit_kv() const { return prompt_tokens ? double(kv_hit_tokens) / double(prompt_tokens) : 0; }
    double hit_state() const { return prompt_tokens ? double(state_hit_tokens) / double(prompt_tokens) : 0; }
    // Tokens another eligible instance could have resumed, over prompt tokens (routing miss).
    double hit_best() const { return prompt_tokens ? double(best_state_tokens) / double(prompt_tokens) : 0; }
    double span_s() const { return (last_finish_ms - first_arrival_ms) / 1000.0; }
};
using RequestFilter = std::function<bool(const RequestOutcome&)>;
RequestSummary summarize_requests(const std::vector<RequestOutcome>& v, const RequestFilter& keep = {});

struct FleetSummary {
    RequestSummary all;
    double makespan_s = 0;             // first arrival to last completion
    double output_tokens_per_s = 0;    // generated tokens / makespan
    double total_tokens_per_s = 0;     // (prompt + generated tokens) / makespan
    double busy_s = 0;                 // summed over instances
    double load_imbalance = 0;         // busiest instance's busy time / the mean (1 = even)
    double jain_busy = 0;              // Jain's index over instances' busy time
    double gpu_hours_provisioned = 0;  // instances x GPUs x makespan
    double gpu_hours_busy = 0;         // GPUs x summed busy time
};
FleetSummary summarize_fleet(const FleetSim& s);

// Requests that completed within both service levels (TTFT and TPOT at most these), their share of
// the workload and their rate over the run (goodput, DistServe's measure).
struct SloMet {
    uint64_t met = 0;
    double share = 0, per_s = 0;
};
SloMet slo_met(const FleetSim& s, double ttft_ms, double tpot_ms);

// The decode steps of every request, the tokens they yielded, and the requests that took any.
struct DecodeTally {
    uint64_t steps = 0, tokens = 0, requests = 0;
    // At acceptance length A each step yields A tokens on average, and a request's last step may stop at
    // its output: A S - A n < D <= A S for D tokens of S steps over n requests (D = S without
    // speculative decoding).
    double most(double A) const { return A * double(steps); }
    double least(double A) const { return most(A) - A * double(requests); }
    bool yields(double A) const {
        return double(tokens) <= most(A) + 1e-9 && (steps == 0 || double(tokens) > least(A));
    }
};
DecodeTally decode_steps_of(const FleetSim& s);

// Money per million tokens (prompt + generated) at a price per GPU-hour, for the GPU time given.
inline double cost_per_million_tokens(double gpu_hours, double price_per_gpu_hour, double tokens) {
    return tokens > 0 ? gpu_hours * price_per_gpu_hour / (tokens / 1e6) : 0;
}

}  // namespace k3
