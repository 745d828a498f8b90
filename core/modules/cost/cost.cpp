// Module 15 `cost`: its parameters, validation and declaration.
#include "core/modules/cost/cost.h"

#include "core/base/bytes.h"
#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

void deployment_params(ParamList<CostParams>& l) {
    l.choice(
         &CostParams::preset, "preset", "Model",
         preset_choices({ModelPreset::kimi_k3, ModelPreset::kimi_linear_48b, ModelPreset::qwen3_next_80b}))
        .in_group("Deployment");
    l.choice(&CostParams::gpu, "gpu", "GPU", hardware_choices()).in_group("Deployment");
    l.integer(&CostParams::gpus, "gpus", "GPUs", "GPUs", 1, 1024)
        .log()
        .in_group("Deployment")
        .describe("GPUs of the instance: a multiple of tp and of ep.");
    l.integer(&CostParams::tp, "tp", "Tensor parallel", "ranks", 1, 1024).log().in_group("Deployment");
    l.integer(&CostParams::ep, "ep", "Expert parallel", "ranks", 1, 1024).log().in_group("Deployment");
    l.flag(&CostParams::dp_attention, "dp_attention", "Attention data parallel").in_group("Deployment");
    l.choice(&CostParams::kv_dtype, "kv_dtype", "KV dtype", dtype_choices({DType::bf16, DType::fp8}))
        .in_group("Deployment")
        .describe("Element type of the attention cache; the linear layers' state stays fp32.");
    l.choice(&CostParams::engine, "engine", "Engine",
             Choices<Engine>{{Engine::sglang, "sglang", "SGLang"},
                             {Engine::vllm, "vllm", "vLLM"},
                             {Engine::trtllm, "trtllm", "TensorRT-LLM"}})
        .in_group("Deployment");
    l.real(&CostParams::memory_fraction, "memory_fraction", "Usable memory fraction", "ratio", 0.05, 1)
        .in_group("Deployment");
    l.integer(&CostParams::chunk, "chunk", "Tokens per step", "tokens", 64, 1048576)
        .log()
        .in_group("Deployment");
    l.flag(&CostParams::overlap, "overlap", "Overlap scheduler").in_group("Deployment");
}

void workload_params(ParamList<CostParams>& l) {
    l.integer(&CostParams::concurrency, "concurrency", "Concurrency", "requests", 1, 65536)
        .log()
        .in_group("Workload");
    l.integer(&CostParams::rounds, "rounds", "Prompts per request slot", "rounds", 1, 100)
        .in_group("Workload");
    l.integer(&CostParams::input_tokens, "input_tokens", "Input tokens", "tokens", 1, 4194304)
        .log()
        .in_group("Workload")
        .describe("Prompt tokens per request.");
    l.integer(&CostParams::output_tokens, "output_tokens", "Output tokens", "tokens", 1, 1048576)
        .log()
        .in_group("Workload")
        .describe("Generated tokens per request.");
    l.real(&CostParams::prefix_hit, "prefix_hit", "Prefix-cache hit rate", "ratio", 0, 0.999)
        .in_group("Workload");
    l.integer(&CostParams::draft_len, "draft_len", "Draft length N", "tokens", 0, 16).in_group("Speculative");
    l.real(&CostParams::acceptance_len, "acceptance_len", "Acceptance length A", "tokens", 1, 17)
        .in_group("Speculative");
    l.choice(&CostParams::spec_memory, "spec_memory", "Speculative state pages",
             Choices<SpecMemory>{{SpecMemory::snapshots, "snapshots", "snapshots (vLLM default)"},
                                 {SpecMemory::recoverssm, "recoverssm", "RecoverSSM (Kimi-K3)"}})
        .in_group("Speculative");
    l.real(&CostParams::price_per_gpu_hour, "price_per_gpu_hour", "Price per GPU-hour", "USD", 0.01, 1000)
        .log()
        .in_group("Price");
}

std::vector<Falsifier<CostParams>> cost_falsifiers() {
    auto set = [](CostFalsify f) { return [f](CostParams& p) { p.falsify = f; }; };
    return {
        {"factors",
         "the fitted memory fraction f_mem halved",
         {"fitted_points_within", "validation_tpot_within"},
         set(CostFalsify::factors)},
        {"bandwidth",
         "the step reads the HBM bandwidth inverted about the preset's (more bandwidth, slower)",
         {"bandwidth_monotone"},
         set(CostFalsify::bandwidth)},
        {"context",
         "the decode step takes the context inverted about the workload's (more context, faster)",
         {"context_monotone"},
         set(CostFalsify::context)},
        {"weight_share",
         "the routed experts' bytes per GPU grow with the ranks that share them",
         {"gpus_weight_bytes"},
         set(CostFalsify::weight_share)},
        {"step_fast",
         "every step counted a hundred times too fast",
         {"weights_floor"},
         set(CostFalsify::step_fast)},
        {"prefill_free",
         "every engine's eager prefill path costs nothing (the per-layer prefill factors zeroed)",
         {"validation_ttft_within"},
         set(CostFalsify::prefill_free)},
        {"max_batch_plus",
         "the largest batch reported one sequence per attention group too large",
         {"max_batch_fits"},
         set(CostFalsify::max_batch_plus)},
    };
}

}  // namespace

ParamList<CostParams> cost_params() {
    ParamList<CostParams> l;
    deployment_params(l);
    workload_params(l);
    return l;
}

void validate_cost(const CostParams& p, Issues& issues) {
    const ModelConfig m = cost_model(p);
    const Deployment d = cost_deployment(p);
    if (const std::string e = deployment_error(m, d); !e.empty()) {
        if (e.find("of ep") != std::string::npos)
            issues.error(p.ep, e);
        else
            issues.error(p.tp, e);
    }
    if (p.dp_attention && p.tp != 1)
        issues.error(p.tp, "attention data parallelism runs attention at width 1: set tp to 1");
    if (p.ep > 1 && m.moe.experts % p.ep != 0)
        issues.error(p.ep, "ep (" + std::to_string(p.ep) + ") must divide the " +
                               std::to_string(m.moe.experts) + " routed experts");
    if (p.draft_len == 0 && p.acceptance_len != 1)
        issues.error(p.acceptance_len, "without drafts (draft_len 0) every step yields one token: set 1");
    if (p.acceptance_len > double(p.draft_len) + 1)
        issues.error(p.acceptance_len, "a verify of 1 + draft_len tokens yields at most " +
                                           std::to_string(p.draft_len + 1) + " tokens");
    const CostMemory c = cost_memory(p, m);
    if (c.weights > c.capacity) {
        issues.error(p.gpus, "the weights take " + format_sig(c.weights / kGiB, 4) +
                                 " GiB per GPU, more than the " + format_sig(c.capacity / kGiB, 4) +
                                 " GiB usable (" + p.gpu.id + " x memory_fraction): more GPUs, tp or ep");
        return;
    }
    if (const std::string e = closed_loop_error(cost_benchmark(p, p.concurrency)); !e.empty())
        issues.error(p.concurrency, e);
    if (p.concurrency > c.max_batch)
        issues.error(p.concurrency, "at most " + std::to_string(c.max_batch) + " sequences of " +
                                        std::to_string(p.input_tokens + p.output_tokens) + " tokens fit (" +
                                        format_sig(c.per_sequence() / kGiB, 4) + " GiB each per GPU, " +
                                        format_sig((c.capacity - c.weights) / kGiB, 4) +
                                        " GiB free after the weights)");
}

Experiment make_cost_experiment() {
    return make_experiment(Module<CostParams>{
        .number = 15,
        .id = "cost",
        .title = "Serving cost of a deployment",
        .component = "fleet scheduling",
        .purpose = "TTFT, TPOT, throughput, memory and dollars per million tokens of a deployment, from a "
                   "step-time model calibrated on published measurements.",
        .params = cost_params(),
        .validate = validate_cost,
        .estimate = estimate_cost,
        .start = [](const CostParams& p, const Params& raw) -> std::unique_ptr<Run> {
            return one_step_run("cost", raw, "step model",
                                [p](Report& r) { report_cost(p, run_cost(p), r); });
        },
        .headlines =
            {
                {"Kimi-K3 on 16 GB300 (TensorRT-LLM TEP16, 8K / 1K, 4 requests): TPOT", {}, "tpot_ms", true},
                {"The same deployment: dollars per million output tokens",
                 {},
                 "usd_per_m_output_tokens",
                 true},
                {"Kimi-K3 DEP16 at 64 requests: output tokens per second per GPU",
                 {{"tp", "1"}, {"dp_attention", "true"}, {"concurrency", "64"}},
                 "tokens_per_s_per_gpu"},
            },
        .falsifiers = cost_falsifiers(),
        .audit_params = {{{"tp", "1"}, {"dp_attention", "true"}, {"concurrency", "64"}},
                         {{"preset", "qwen3-next-80b"},
                          {"gpu", "h100"},
                          {"gpus", "4"},
                          {"tp", "4"},
                          {"ep", "1"},
                          {"engine", "sglang"},
                          {"draft_len", "3"},
                          {"acceptance_len", "2.5"}}}});
}

K3_REGISTER_EXPERIMENT(make_cost_experiment);

}  // namespace k3
