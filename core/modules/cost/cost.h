// Module 15 `cost`: TTFT, TPOT, throughput, memory and $ per million tokens of one deployment, from the
// calibrated step-time model (core/fleet/step_model.h, factors of core/fleet/calibration.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/experiments/module.h"
#include "core/fleet/calibration.h"
#include "core/fleet/closed_loop.h"
#include "core/fleet/step_model.h"

namespace k3 {

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class CostFalsify : uint8_t {
    none,
    factors,         // the fitted f_mem halved: every memory-bound estimate twice too slow
    bandwidth,       // the step reads the HBM bandwidth inverted about the preset's (more is slower)
    context,         // the decode step takes the context inverted about the workload's (more is faster)
    weight_share,    // the routed experts' bytes per GPU multiplied by the ranks instead of divided
    step_fast,       // every step counted a hundred times too fast
    max_batch_plus,  // the largest batch reported one sequence per attention group too large
    prefill_free,    // every engine's eager prefill path costs nothing (the per-layer factors zeroed)
};

enum class SpecMemory : uint8_t { snapshots, recoverssm };

struct CostParams {
    ModelPreset preset = ModelPreset::kimi_k3;
    Hardware gpu = *hardware_preset("gb300");
    int gpus = 16, tp = 16, ep = 16;
    bool dp_attention = false;
    DType kv_dtype = DType::bf16;
    Engine engine = Engine::trtllm;
    int concurrency = 4;
    int input_tokens = 8192, output_tokens = 1024;
    double prefix_hit = 0;
    int draft_len = 0;
    double acceptance_len = 1;
    SpecMemory spec_memory = SpecMemory::recoverssm;
    int chunk = 8208;     // TensorRT-LLM's TEP16 recipe: the prompt plus its batch of 16
    int rounds = 5;       // the benchmark sends rounds x concurrency prompts
    bool overlap = true;  // the engine's overlap scheduler (TensorRT-LLM's recipe: on)
    double memory_fraction = 0.9;
    double price_per_gpu_hour = 4.0;
    CostFalsify falsify = CostFalsify::none;  // not a declared parameter
};

// Memory of one GPU (the busiest rank: every rank holds the same under the model's even split).
struct CostMemory {
    double capacity = 0;              // device memory x memory_fraction
    double weights = 0;               // dense (per attention width) + routed experts (per EP / TP share)
    double kv_per_sequence = 0;       // at input + output tokens
    double state_per_sequence = 0;    // the linear layers' state (S and conv window)
    double scratch_per_sequence = 0;  // speculative decoding's state pages beyond the state
    int sequences_per_rank = 0;       // of the concurrency, on the busiest attention group
    int max_per_rank = 0;             // the largest number of sequences a rank holds
    int max_batch = 0;                // max_per_rank x attention groups
    double per_sequence() const { return kv_per_sequence + state_per_sequence + scratch_per_sequence; }
    double used(int seqs) const { return weights + double(seqs) * per_sequence(); }
};

// One concurrency's benchmark (core/fleet/closed_loop.h): the decode step at the concurrency, the
// median TTFT and TPOT over the benchmark's requests, its throughputs, its duration and the part of it
// the prefills take beyond the decode steps they ride with.
struct CostPoint {
    int concurrency = 0;
    double step_s = 0, tpot_s = 0, ttft_s = 0, output_per_s = 0, total_per_s = 0;
    double duration_s = 0, prefill_share_s = 0;
};

struct CostResult {
    ModelConfig model;
    Deployment deploy;
    StepFactors factors;
    CostMemory memory;
    StepTerms decode_terms, prefill_terms;
    CostPoint at;                  // at the chosen concurrency
    std::vector<CostPoint> sweep;  // 1, 2, 4, ... up to max_batch, and the chosen concurrency
    int sweep_cut = 0;             // the smallest concurrency left out: its benchmark over the limit
    std::vector<CalibrationRow> calibration;
};

ParamList<CostParams> cost_params();
void validate_cost(const CostParams& p, Issues& issues);
ModelConfig cost_model(const CostParams& p);
Deployment cost_deployment(const CostParams& p);
CostMemory cost_memory(const CostParams& p, const ModelConfig& m);
// One step: `decodes` sequences at `context` verifying 1 + draft_len tokens each, plus a chunk of
// `chunk` new tokens after `chunk_ctx` (chunk 0: none), under the run's corruption.
StepTerms cost_step(const CostParams& p, const ModelConfig& m, const Deployment& d, const StepFactors& f,
                    double decodes, double context, double chunk_ctx, double chunk);
// The benchmark at `concurrency`: rounds x concurrency prompts, the engine's scheduling and budget.
ClosedLoop cost_benchmark(const CostParams& p, int concurrency);
CostPoint cost_point(const CostParams& p, const ModelConfig& m, const Deployment& d, const StepFactors& f,
                     int concurrency);
// The concurrencies of the sweep: powers of two below the largest batch, the largest batch and the
// run's own (run_cost leaves out those whose benchmark is past the closed loop's limit).
std::vector<int> sweep_concurrencies(const CostParams& p, int max_batch);
CostResult run_cost(const CostParams& p);
RunEstimate estimate_cost(const CostParams& p);
void report_cost(const CostParams& p, const CostResult& c, Report& r);

}  // namespace k3
