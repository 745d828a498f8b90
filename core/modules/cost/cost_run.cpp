// Module 15 `cost`: the deployment, its memory per GPU and its steps, from the calibrated step model.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/fleet/closed_loop.h"
#include "core/fleet/spec_decode.h"
#include "core/model/accounting.h"
#include "core/model/tp_shard.h"
#include "core/modules/cost/cost.h"
#include "core/spec/storage.h"

namespace k3 {

ModelConfig cost_model(const CostParams& p) {
    ModelConfig m = *model_preset(p.preset);
    m.kv_dtype = p.kv_dtype;
    return m;
}

Deployment cost_deployment(const CostParams& p) {
    Deployment d;
    d.gpu = p.gpu;
    d.gpus = p.gpus;
    d.tp = p.tp;
    d.ep = p.ep;
    d.dp_attention = p.dp_attention;
    d.kv_dtype = p.kv_dtype;
    d.mxfp4_experts = p.preset == ModelPreset::kimi_k3;  // K3's published checkpoint: MXFP4 experts
    d.engine = p.engine;
    return d;
}

namespace {

double attention_width(const CostParams& p) { return p.dp_attention ? 1.0 : double(p.tp); }
int attention_groups(const CostParams& p) { return std::max(1, p.gpus / int(attention_width(p))); }

// Weights on one GPU: the non-routed parameters in bf16 split by the attention width, the routed experts
// split over the EP ranks (or tensor-sharded over every GPU when ep = 1).
double gpu_weight_bytes(const CostParams& p, const ModelConfig& m) {
    const WeightBytes w = weight_bytes(m);
    const double share = p.ep > 1 ? double(p.ep) : double(p.gpus);
    const double experts =
        p.falsify == CostFalsify::weight_share ? w.routed * share / 256.0 : w.routed / share;
    return w.other / attention_width(p) + experts;
}

}  // namespace

CostMemory cost_memory(const CostParams& p, const ModelConfig& m) {
    CostMemory c;
    const int ta = int(attention_width(p)), dp = attention_groups(p);
    c.capacity = p.gpu.mem_bytes * p.memory_fraction;
    c.weights = gpu_weight_bytes(p, m);
    const MemoryAccount a = account_memory(shard_for_tp(m, ta));
    c.kv_per_sequence = double(a.kv_bytes_per_token) * double(p.input_tokens + p.output_tokens);
    c.state_per_sequence = double(a.state_bytes);
    if (p.draft_len > 0 && a.linear_layers > 0) {
        // vLLM's state pages under speculative decoding (module 3): align mode when prefixes are cached.
        const spec::VllmPages pg =
            spec::vllm_pages(spec::vllm_kda_page_tensors(m, p.draft_len, ta), p.draft_len);
        const bool align = p.prefix_hit > 0;
        const uint64_t per_layer = p.spec_memory == SpecMemory::snapshots
                                       ? (align ? pg.snapshot_align : pg.snapshot_none)
                                       : (align ? pg.recoverssm_align : pg.recoverssm_none);
        c.scratch_per_sequence = double(per_layer) * double(a.linear_layers) - c.state_per_sequence;
    }
    c.sequences_per_rank = (p.concurrency + dp - 1) / dp;
    const double free = c.capacity - c.weights;
    c.max_per_rank = free > 0 && c.per_sequence() > 0 ? int(std::floor(free / c.per_sequence())) : 0;
    c.max_batch = c.max_per_rank * dp + (p.falsify == CostFalsify::max_batch_plus ? dp : 0);
    return c;
}

namespace {

// The deployment the run's corruption leaves (bandwidth: inverted about the preset's).
Deployment falsified_deployment(const CostParams& p, const Deployment& d) {
    Deployment dd = d;
    if (p.falsify == CostFalsify::bandwidth) {
        const double base = hardware_preset(p.gpu.id)->mem_bytes_per_s;
        dd.gpu.mem_bytes_per_s = base * base / d.gpu.mem_bytes_per_s;
    }
    return dd;
}

// The verify step (core/fleet/spec_decode.h): each decoding sequence reads its KV once; its N draft
// tokens ride as extra query tokens (attention over its context, in the prefill form), no prefill-step
// overhead; its state traffic is the speculative state's (snapshot pages or RecoverSSM's records).
StepTerms verify_step(const CostParams& p, const ModelConfig& m, const StepModel& sm, IterationWork w) {
    if (p.draft_len > 0)
        add_drafts(
            w,
            spec_work(m, p.spec_memory == SpecMemory::snapshots ? SpecState::snapshot : SpecState::recoverssm,
                      uint32_t(p.draft_len)));
    StepTerms s = sm.terms(w);
    if (p.falsify == CostFalsify::step_fast)
        for (TermCost& t : s.term) t.seconds *= 0.01;
    return s;
}

}  // namespace

StepTerms cost_step(const CostParams& p, const ModelConfig& m, const Deployment& d, const StepFactors& f,
                    double decodes, double context, double chunk_ctx, double chunk) {
    if (p.falsify == CostFalsify::context) {
        const double base = double(p.input_tokens) + double(p.output_tokens) / 2;
        context = base * base / context;
    }
    IterationWork w = decode_work(decodes, context);
    if (chunk > 0) w.add_chunk(chunk_ctx, chunk);
    return verify_step(p, m, StepModel(m, falsified_deployment(p, d), f), w);
}

ClosedLoop cost_benchmark(const CostParams& p, int concurrency) {
    ClosedLoop b =
        deployment_benchmark(cost_deployment(p), concurrency, p.rounds * concurrency, double(p.input_tokens),
                             double(p.output_tokens), double(p.chunk), p.overlap);
    b.cached_tokens = std::round(double(p.input_tokens) * p.prefix_hit);
    b.tokens_per_decode = p.acceptance_len;
    return b;
}

CostPoint cost_point(const CostParams& p, const ModelConfig& m, const Deployment& d, const StepFactors& f,
                     int concurrency) {
    CostPoint c;
    c.concurrency = concurrency;
    const double in = double(p.input_tokens), out = double(p.output_tokens);
    c.step_s = cost_step(p, m, d, f, double(concurrency), in + out / 2, 0, 0).seconds();
    // The benchmark's closed loop on the step model; a step's time beyond the decode step of its
    // decodes is the prefill's (the GPU time the input tokens are charged).
    const StepModel sm(m, falsified_deployment(p, d), f);
    const ClosedLoop b = cost_benchmark(p, concurrency);
    const ClosedLoopResult r = run_closed_loop(b, [&](const IterationWork& w) {
        const double s = verify_step(p, m, sm, w).seconds();
        if (w.prefill_chunks == 0) return s;
        IterationWork decodes;
        decodes.decode = w.decode;
        decodes.decode_context = w.decode_context;
        c.prefill_share_s += s - verify_step(p, m, sm, decodes).seconds();
        return s;
    });
    c.ttft_s = median_of(r.ttft_s);
    c.tpot_s = median_of(r.tpot_s);
    c.duration_s = r.duration_s;
    const double prompts = double(b.prompts);
    c.output_per_s = r.duration_s > 0 ? prompts * out / r.duration_s : 0;
    c.total_per_s = r.duration_s > 0 ? prompts * (in + out) / r.duration_s : 0;
    return c;
}

std::vector<int> sweep_concurrencies(const CostParams& p, int max_batch) {
    std::vector<int> xs;
    for (int b = 1; b < max_batch && xs.size() < 16; b *= 2) xs.push_back(b);
    xs.push_back(std::max(max_batch, 1));
    xs.push_back(p.concurrency);
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    return xs;
}

RunEstimate estimate_cost(const CostParams& p) {
    // Measured on the development machine (k3cli run cost at concurrency 1 to 512, rounds 5 to 100,
    // output 1024 to 65,536): a closed-loop step costs about 0.15 us (the step model evaluated), a
    // request visited by a step that prefills about 0.03 us; the calibration table and the rest of
    // the report about 0.1 s. Doubled for a slower machine.
    constexpr double kMargin = 2, kFixedSeconds = 0.1, kStepSeconds = 0.15e-6, kVisitSeconds = 0.03e-6;
    double steps = 0, visits = 0;
    const int max_batch = cost_memory(p, cost_model(p)).max_batch;
    for (int b : sweep_concurrencies(p, max_batch)) {
        const ClosedLoop l = cost_benchmark(p, b);
        if (!closed_loop_error(l).empty()) continue;
        const double work = closed_loop_work(l);
        steps += work / double(b);
        visits += double(l.prompts) * double(b);
    }
    RunEstimate e;
    e.seconds = kMargin * (kFixedSeconds + steps * kStepSeconds + visits * kVisitSeconds);
    e.bytes = 16.0 * 1024 * 1024;  // the process; the loop holds one record per request in flight
    e.counted = format_si(steps, 3) + " closed-loop steps, " + format_si(visits, 3) + " prefill visits";
    e.on = &p.output_tokens;
    return e;
}

CostResult run_cost(const CostParams& p) {
    CostResult c;
    c.model = cost_model(p);
    c.deploy = cost_deployment(p);
    c.factors = kFittedFactors;
    if (p.falsify == CostFalsify::factors) c.factors.f_mem *= 0.5;
    if (p.falsify == CostFalsify::prefill_free) c.factors.prefill_layer_s.fill(0.0);
    c.memory = cost_memory(p, c.model);
    const double ctx = double(p.input_tokens) + double(p.output_tokens) / 2;
    c.decode_terms = cost_step(p, c.model, c.deploy, c.factors, double(p.concurrency), ctx, 0, 0);
    const double hit = std::round(double(p.input_tokens) * p.prefix_hit);
    c.prefill_terms = cost_step(p, c.model, c.deploy, c.factors, 0, ctx, hit,
                                std::min(double(p.chunk), double(p.input_tokens) - hit));
    c.at = cost_point(p, c.model, c.deploy, c.factors, p.concurrency);
    for (int b : sweep_concurrencies(p, c.memory.max_batch))
        if (closed_loop_error(cost_benchmark(p, b)).empty())
            c.sweep.push_back(cost_point(p, c.model, c.deploy, c.factors, b));
        else
            c.sweep_cut = c.sweep_cut ? std::min(c.sweep_cut, b) : b;
    c.calibration = calibration_table(c.factors);
    return c;
}

}  // namespace k3
