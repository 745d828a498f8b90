// The step-time model's calibration (core/fleet/step_model.h) against reference/calibration.md's
// published points and reference/kimi_k3.md §5 (TensorRT-LLM's Kimi K3 figures on GB300).
//
// Every point models the mechanism of its setup (model, engine, GPU, TP/EP, batch, lengths); nothing is
// tuned per point. Where the source does not state the setup, the point states the assumption it makes
// (`assumption`). A point is a TPOT, a TTFT or a step derived from output throughput (c / output tokens
// per second). A point from a serving benchmark is estimated by running the benchmark's closed loop
// (core/fleet/closed_loop.h) on the step model: its prompts, its concurrency, the engine's scheduling
// and token budget; so its TPOT holds the steps that carry other requests' prefills, and its TTFT the
// wait for the prompts sent before it. A point measured on one request alone is one decode step at
// the context, or the prompt's prefill by itself.
//
// Fitted subset (CalibrationPoint::fitted, 12 of 40; 4 of the others are cross-checks): K1 KL 4K and 1M, K1
// MLA 1M, K2 MLA 4K, K2 KL and MLA 1M, S1 TPOT and TTFT, V1 TPOT and TTFT, TRT TEP16 TPOT and TTFT; every
// other point is validation. Fit (fit_step_factors): least squares on the log error, sum over the FITTED
// points of ln(estimate / measured)^2, by coordinate descent in log space: every factor is tried at x
// e^(+-h), improvements kept until none, then h halves, from h = 0.5 to h < 1e-4; the fractions are capped
// at 1. Start: f_gemm = f_attn = 0.5, f_mem = 0.8, alpha = 10 us, every overhead (the engines' per step and
// per prefill layer) 1 ms; an overhead that falls below 1 us is set to zero (its bound). kFittedFactors
// are its result rounded to three significant figures; tests/unit/test_step_model.cpp re-runs the fit
// and checks it reproduces them to 0.5 %.
#pragma once

#include <string>
#include <vector>

#include "core/fleet/closed_loop.h"
#include "core/fleet/step_model.h"

namespace k3 {

enum class PointKind : uint8_t { tpot, ttft, derived_step };

struct CalibrationPoint {
    std::string id, what, source, assumption;
    std::string model;  // a preset id, or "mla-48b" (Kimi-Linear's all-MLA baseline: every layer MLA)
    Deployment deploy;
    PointKind kind = PointKind::tpot;
    int concurrency = 1;
    double input_tokens = 0, output_tokens = 0;
    double chunk = 8192;  // the engine's token budget per step (per DP group)
    // The benchmark's closed loop (core/fleet/closed_loop.h): `prompts` requests at most `concurrency`
    // at a time, the TPOT / TTFT its median or mean over them. 0: one request measured alone (a step
    // at the mean context, a prefill by itself), as Kimi Linear's figures are.
    int prompts = 0;
    bool median = false;
    bool overlap = false;  // the engine's overlap scheduler (closed_loop.h) on in the measured run
    double measured_s = 0;
    double tolerance = 0.25;  // |estimate / measured - 1| allowed: 25 % TPOT, 35 % TTFT (issue 16)
    bool fitted = false;
    // A point beyond the set (reference/calibration.md and TensorRT-LLM's K3 guide): other
    // engines' Kimi-K3 runs found since. Shown with its error beside the others, named when outside,
    // and not part of the checks that hold the target.
    bool cross_check = false;
};

// "fitted", "validation" or "cross-check".
const char* point_role(const CalibrationPoint& p);

struct CalibrationRow {
    const CalibrationPoint* point = nullptr;
    double estimated_s = 0;
    double error = 0;  // estimate / measured - 1
    bool within = false;
};

// The factors the product uses: fit_step_factors() on the fitted points of calibration_points() (the
// provenance beside each value in calibration.cpp).
extern const StepFactors kFittedFactors;

// The closed loop a benchmark runs on a deployment (core/fleet/closed_loop.h): `prompts` of `in` / `out`
// tokens at most `concurrency` at a time, the engine's scheduling (SGLang prefill-first) and its
// budget per step, one group per attention-DP rank group.
ClosedLoop deployment_benchmark(const Deployment& d, int concurrency, int prompts, double in, double out,
                                double budget, bool overlap);

const std::vector<CalibrationPoint>& calibration_points();
ModelConfig calibration_model(const std::string& id);
double estimate_point(const CalibrationPoint& p, const StepFactors& f);
std::vector<CalibrationRow> calibration_table(const StepFactors& f);

// Sum over the fitted points of ln(estimate / measured)^2.
double fit_loss(const StepFactors& f);
StepFactors fit_step_factors();

// The model's own checks (what a module reports): each returns "" when it holds, else what failed.
// Each calibration point within its tolerance is read off calibration_table; these are the physics:
std::string check_bandwidth_monotone(const StepFactors& f);  // more HBM bandwidth never slower
std::string check_context_monotone(const StepFactors& f);    // more context never faster at decode
std::string check_gpus_weight_bytes(const StepFactors& f);   // more GPUs never more weight bytes per GPU
std::string check_weights_floor(const StepFactors& f);       // batch-1 decode >= the weights-read floor

}  // namespace k3
