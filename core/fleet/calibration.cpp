#include "core/fleet/calibration.h"

#include <algorithm>

#include "core/base/fmath.h"

namespace k3 {

// fit_step_factors() on the 12 fitted points below (K1 KL 4K / 1M, K1 MLA 1M, K2 MLA 4K, K2 KL and MLA 1M,
// S1 TPOT and TTFT, V1 TPOT and TTFT, TRT TEP16 TPOT and TTFT), loss 0.0022 at the fit; rounded to three
// significant figures (tests/unit/test_step_model.cpp re-runs the fit and checks these to 0.5 %).
// SGLang's per-step overhead falls to its bound, zero: S1's decode floor is explained by its 96
// all-reduces a step. Each engine's prefill factor rests on its own single-request or
// burst TTFTs: vLLM's on K2 and V1, SGLang's on S1 (1.92 ms a layer, which the K3 cookbook's 8K TTFT on
// 93 layers confirms within 13 %), TensorRT-LLM's on TEP16 (8.32 ms a layer: its K3 prefill spends far
// more than the terms; DEP16's two TTFTs validate it).
const StepFactors kFittedFactors = {
    0.761, 0.690, 0.781, 2.26e-5, {4.00e-4, 2.28e-3, 5.71e-3}, {1.92e-3, 1.76e-3, 8.28e-3}};

namespace {

Deployment deploy(const char* gpu, int gpus, int tp, int ep, bool dp, Engine e, bool mxfp4 = false) {
    Deployment d;
    d.gpu = *hardware_preset(gpu);
    d.gpus = gpus;
    d.tp = tp;
    d.ep = ep;
    d.dp_attention = dp;
    d.engine = e;
    d.mxfp4_experts = mxfp4;
    return d;
}

// A point measured by a serving benchmark: `prompts` at most c at a time, its median or mean, the
// engine's token budget per step (per DP group).
void benchmark(CalibrationPoint& p, int prompts, bool median, double budget = 8192) {
    p.prompts = prompts;
    p.median = median;
    p.chunk = budget;
}

CalibrationPoint point(const char* id, const char* model, Deployment d, PointKind kind, int c, double in,
                       double out, double measured_ms, bool fitted) {
    CalibrationPoint p;
    p.id = id;
    p.model = model;
    p.deploy = d;
    p.kind = kind;
    p.concurrency = c;
    p.input_tokens = in;
    p.output_tokens = out;
    p.measured_s = measured_ms * 1e-3;
    p.tolerance = kind == PointKind::tpot || kind == PointKind::derived_step ? 0.25 : 0.35;
    p.fitted = fitted;
    return p;
}

const char* kKimiLinearSrc =
    "MoonshotAI/Kimi-Linear tech_report.pdf Fig. 7 (bs = 1), plotted points (calibration.md K1/K2, §3)";
const char* kKimiLinearAssume =
    "hardware, engine and TP not stated: taken as vLLM on 8 x H100 TP8 (calibration.md §4 derivation 3: "
    "the 1M prefill needs about 8 Hopper GPUs; the decode slope fits H100 bandwidth), chunks of 8192";

void add_kimi_linear(std::vector<CalibrationPoint>& v) {
    const double lengths[5] = {4096, 131072, 262144, 524288, 1048576};
    const char* names[5] = {"4K", "128K", "256K", "512K", "1M"};
    const double kl_tpot[5] = {5.09, 5.74, 6.00, 6.66, 7.99}, mla_tpot[5] = {5.32, 7.67, 9.10, 11.96, 17.76};
    const double kl_pre[5] = {96, 1397, 3214, 8068, 22753}, mla_pre[5] = {64, 2005, 5764, 18629, 65460};
    const Deployment d = deploy("h100", 8, 8, 1, false, Engine::vllm);
    for (int i = 0; i < 5; ++i) {
        const bool ends = i == 0 || i == 4;
        const std::string n = names[i];
        v.push_back(point("", "kimi-linear-48b", d, PointKind::tpot, 1, lengths[i], 0, kl_tpot[i], ends));
        v.back().id = "K1 KL " + n;
        v.push_back(point("", "mla-48b", d, PointKind::tpot, 1, lengths[i], 0, mla_tpot[i], i == 4));
        v.back().id = "K1 MLA " + n;
        v.push_back(point("", "kimi-linear-48b", d, PointKind::ttft, 1, lengths[i], 0, kl_pre[i], i == 4));
        v.back().id = "K2 KL " + n;
        v.push_back(point("", "mla-48b", d, PointKind::ttft, 1, lengths[i], 0, mla_pre[i], ends));
        v.back().id = "K2 MLA " + n;
    }
    for (CalibrationPoint& p : v) {
        p.what = p.kind == PointKind::tpot ? "decode TPOT at bs 1, context " : "prefill latency, prompt ";
        p.what += p.id.substr(p.id.rfind(' ') + 1);
        p.source = kKimiLinearSrc;
        p.assumption = kKimiLinearAssume;
    }
}

// The last two points (one run's TPOT or step and its TTFT): their source, assumption and benchmark
// (`prompts`, the mean).
void describe_last_two(std::vector<CalibrationPoint>& v, const char* source, const char* assumption,
                       int prompts) {
    for (auto* p : {&v[v.size() - 2], &v.back()}) {
        p->source = source;
        p->assumption = assumption;
        benchmark(*p, prompts, false);
    }
}

void add_qwen3_next(std::vector<CalibrationPoint>& v) {
    const char* q = "qwen3-next-80b";
    const Deployment h100 = deploy("h100", 4, 4, 1, false, Engine::sglang);
    v.push_back(point("S1 TPOT", q, h100, PointKind::tpot, 1, 1000, 1000, 5.330, true));
    v.push_back(point("S1 TTFT", q, h100, PointKind::ttft, 1, 1000, 1000, 113.9, true));
    describe_last_two(v, "sgl-project/sglang PR #10233, TP4 H100, c = 1 (calibration.md S1)",
                      "lengths not in the excerpt: ISL = OSL = 1000 (calibration.md: input ~ output "
                      "throughput, ~1K); one request at a time, so the prompt count does not matter",
                      1);
    // The same PR's c = 4 row: output 589.9 tokens/s (a step of 4 / 589.9 s) and TTFT 197.7 ms.
    v.push_back(point("S1 c4 step", q, h100, PointKind::derived_step, 4, 1000, 1000, 4e3 / 589.9, false));
    v.back().what = "step = 4 / output throughput at c = 4, 1000 / 1000";
    v.push_back(point("S1 c4 TTFT", q, h100, PointKind::ttft, 4, 1000, 1000, 197.7, false));
    describe_last_two(
        v, "sgl-project/sglang PR #10233, TP4 H100, c = 4 (calibration.md S1)",
        "lengths as S1's; the prompt count not in the excerpt: 5 x c (TensorRT-LLM's sweep); "
        "no overlap scheduler (SGLang turns it off for its mamba cache without the extra buffer)",
        20);
    const int gpus[2] = {4, 8};
    const double step_ms[2] = {32e3 / 2233.44, 32e3 / 2704.56};
    for (int i = 0; i < 2; ++i) {
        const Deployment d = deploy("h20", gpus[i], gpus[i], 1, false, Engine::sglang);
        v.push_back(
            point(i ? "S3 TP8" : "S3 TP4", q, d, PointKind::derived_step, 32, 1000, 2000, step_ms[i], false));
        v.back().what = "step = 32 / output throughput at c = 32, 1000 / 2000";
        v.back().source = "sgl-project/sglang PR #10467, H20 TP4/TP8 (calibration.md S3)";
        v.back().assumption = "no overlap scheduler (as S1)";
        benchmark(v.back(), 100, false);
    }
    const Deployment ep = deploy("h20", 4, 4, 4, false, Engine::vllm);
    v.push_back(point("V1 TPOT", q, ep, PointKind::tpot, 32, 2048, 1024, 14.09, true));
    v.push_back(point("V1 TTFT", q, ep, PointKind::ttft, 32, 2048, 1024, 1101.49, true));
    describe_last_two(v, "vllm-project/vllm PR #28095, H20 x 4, TP4 + expert parallel (calibration.md V1)",
                      "32 prompts sent at once (the benchmark's burst), vLLM's 8192-token budget per step, "
                      "no async scheduling (vLLM's default then)",
                      32);
    v.push_back(point("V2 TPOT", q, deploy("h200", 2, 2, 1, false, Engine::vllm), PointKind::tpot, 8, 237,
                      300, 9.85, false));
    v.back().source = "vllm-project/vllm PR #35777 baseline, H200, c = 8 (calibration.md V2)";
    v.back().assumption =
        "GPU count cut off in the excerpt: 2 x H200 TP2 (the smallest that holds BF16 80B); "
        "every prompt 237 tokens (the excerpt's mean); no async scheduling";
    benchmark(v.back(), 1000, false);
    // S5: a prefill-heavy run, generated shared prefixes with the radix cache off: 500 requests of
    // 11,043 tokens on average at c = 5, 128 out; output 338 tokens/s, a step of 5 / 338 s.
    v.push_back(point("S5 step", q, deploy("h100", 4, 4, 1, false, Engine::sglang), PointKind::derived_step,
                      5, 11043, 128, 5e3 / 338.0, false));
    v.back().what = "step = 5 / output throughput at c = 5, 11,043 / 128 (input 29,157.6 tokens/s)";
    v.back().source =
        "sgl-project/sglang PR #11214 baseline (--disable-radix-cache), TP4 (calibration.md S5)";
    v.back().assumption =
        "GPU not in the excerpt: H100, as the same author's PR #10233; every prompt 11,043 tokens (the "
        "mean); SGLang's overlap scheduler on (no radix cache, so no no_buffer rule)";
    benchmark(v.back(), 500, false);
    v.back().overlap = true;
}

void add_kimi_k3(std::vector<CalibrationPoint>& v) {
    const char* src =
        "NVIDIA/TensorRT-LLM deployment guide for Kimi K3 on GB300 NVL, 8K / 1K (kimi_k3.md §5)";
    const Deployment tep = deploy("gb300", 16, 16, 16, false, Engine::trtllm, true);
    const Deployment dep = deploy("gb300", 16, 1, 16, true, Engine::trtllm, true);
    v.push_back(point("TRT TEP16 TPOT", "kimi-k3", tep, PointKind::tpot, 4, 8192, 1024, 18.12, true));
    v.push_back(point("TRT TEP16 TTFT", "kimi-k3", tep, PointKind::ttft, 4, 8192, 1024, 1769.2, true));
    v.push_back(point("TRT DEP16 TPOT", "kimi-k3", dep, PointKind::tpot, 64, 8192, 1024, 34.06, false));
    v.push_back(point("TRT DEP16 TTFT", "kimi-k3", dep, PointKind::ttft, 64, 8192, 1024, 4512.3, false));
    v.push_back(point("TRT DEP16 c256 TPOT", "kimi-k3", dep, PointKind::tpot, 256, 8192, 1024, 62.24, false));
    v.push_back(
        point("TRT DEP16 c256 TTFT", "kimi-k3", dep, PointKind::ttft, 256, 8192, 1024, 4586.7, false));
    for (size_t i = v.size() - 6; i < v.size(); ++i) {
        CalibrationPoint& p = v[i];
        p.source = src;
        p.what = p.kind == PointKind::tpot ? "median decode TPOT" : "median TTFT";
        // perf_sweep.sbatch: c x 5 prompts (c x 3 from 256), max_num_tokens = ISL + MAX_BATCH_SIZE
        // (16 for TEP16; 64 per rank for DEP16).
        const bool tep = p.deploy.tp == 16;
        benchmark(p, p.concurrency * (p.concurrency >= 256 ? 3 : 5), true, tep ? 8192 + 16 : 8192 + 64);
        p.overlap = true;  // the sweep's "disable_overlap_scheduler: false"
        p.assumption =
            tep ? "the sweep's c x 5 prompts; a step budget of 8,208 tokens (8192 + the 16-request batch)"
                : "the sweep's c x 5 prompts (x 3 from c = 256); 8,256 tokens per rank a step";
    }
}

// SGLang's Kimi K3 cookbook on 8 x B300, the "Low-Latency" cell (sgl-project/sglang PR #37878,
// v0.5.18): --tp-size 8, no expert parallelism, MXFP4 experts; bench_serving with 5 x c prompts
// (16 at c = 1), random 8192 / 1024, medians.
void add_kimi_k3_sglang(std::vector<CalibrationPoint>& v) {
    const Deployment tp8 = deploy("gb300", 8, 8, 1, false, Engine::sglang, true);
    const int conc[2] = {1, 16};
    const double tpot[2] = {8.51, 19.47}, ttft[2] = {378, 3539};
    for (int i = 0; i < 2; ++i) {
        const std::string c = std::to_string(conc[i]);
        v.push_back(point("", "kimi-k3", tp8, PointKind::tpot, conc[i], 8192, 1024, tpot[i], false));
        v.back().id = "SG K3 c" + c + " TPOT";
        v.push_back(point("", "kimi-k3", tp8, PointKind::ttft, conc[i], 8192, 1024, ttft[i], false));
        v.back().id = "SG K3 c" + c + " TTFT";
        for (auto* p : {&v[v.size() - 2], &v.back()}) {
            p->source = "sgl-project/sglang PR #37878, Kimi-K3 cookbook, B300 1x8 Low-Latency (TP8), MXFP4";
            p->assumption =
                "B300 taken as the GB300 preset (the same Blackwell Ultra GPU); SGLang's "
                "16,384-token chunk on GPUs over 160 GB; its overlap scheduler on (extra_buffer)";
            p->what = p->kind == PointKind::tpot ? "median decode TPOT" : "median TTFT";
            benchmark(*p, conc[i] == 1 ? 16 : 5 * conc[i], true, 16384);
            p->overlap = true;
            p->cross_check = true;
        }
    }
}

}  // namespace

const char* point_role(const CalibrationPoint& p) {
    if (p.fitted) return "fitted";
    return p.cross_check ? "cross-check" : "validation";
}

const std::vector<CalibrationPoint>& calibration_points() {
    static const std::vector<CalibrationPoint> points = [] {
        std::vector<CalibrationPoint> v;
        add_kimi_linear(v);
        add_qwen3_next(v);
        add_kimi_k3(v);
        add_kimi_k3_sglang(v);
        for (CalibrationPoint& p : v)
            if (p.what.empty()) p.what = p.kind == PointKind::tpot ? "mean decode TPOT" : "mean TTFT";
        return v;
    }();
    return points;
}

ModelConfig calibration_model(const std::string& id) {
    if (id != "mla-48b") return *model_preset(id);
    // The report's MLA baseline has Kimi Linear's layers, heads and MoE: every layer MLA, the same
    // parameter counts (taken as equal; the report gives none of its own).
    ModelConfig m = *model_preset("kimi-linear-48b");
    m.id = "mla-48b";
    m.name = "MLA-48B (Kimi Linear's all-MLA baseline)";
    std::fill(m.layers.begin(), m.layers.end(), LayerKind::attention);
    return m;
}

ClosedLoop deployment_benchmark(const Deployment& d, int concurrency, int prompts, double in, double out,
                                double budget, bool overlap) {
    ClosedLoop b;
    b.concurrency = concurrency;
    b.prompts = prompts;
    b.input_tokens = in;
    b.output_tokens = out;
    b.step_budget = budget;
    b.prefill_first = d.engine == Engine::sglang;
    b.overlap = overlap;
    b.dp_groups = std::max(1, d.dp_attention ? d.gpus : d.gpus / std::max(d.tp, 1));
    return b;
}

namespace {

// The point's benchmark on the step model of its deployment.
ClosedLoopResult run_benchmark(const ModelConfig& m, const CalibrationPoint& p, const StepFactors& f) {
    const ClosedLoop b = deployment_benchmark(p.deploy, p.concurrency, p.prompts, p.input_tokens,
                                              p.output_tokens, p.chunk, p.overlap);
    const StepModel sm(m, p.deploy, f);
    return run_closed_loop(b, [&sm](const IterationWork& w) { return sm.seconds(w); });
}

}  // namespace

double estimate_point(const CalibrationPoint& p, const StepFactors& f) {
    const ModelConfig m = calibration_model(p.model);
    if (p.prompts == 0) {
        if (p.kind == PointKind::ttft) return prefill_seconds(m, p.deploy, f, p.input_tokens, p.chunk);
        const double ctx = p.input_tokens + p.output_tokens / 2;
        return step_seconds(m, p.deploy, f, decode_work(double(p.concurrency), ctx));
    }
    const ClosedLoopResult r = run_benchmark(m, p, f);
    auto stat = [&p](const std::vector<double>& v) { return p.median ? median_of(v) : mean_of(v); };
    switch (p.kind) {
        case PointKind::tpot: return stat(r.tpot_s);
        case PointKind::ttft: return stat(r.ttft_s);
        case PointKind::derived_step: break;
    }
    return double(p.concurrency) * r.duration_s / (double(p.prompts) * p.output_tokens);
}

std::vector<CalibrationRow> calibration_table(const StepFactors& f) {
    std::vector<CalibrationRow> rows;
    for (const CalibrationPoint& p : calibration_points()) {
        CalibrationRow r;
        r.point = &p;
        r.estimated_s = estimate_point(p, f);
        r.error = r.estimated_s / p.measured_s - 1.0;
        r.within = r.error <= p.tolerance && r.error >= -p.tolerance;
        rows.push_back(r);
    }
    return rows;
}

double fit_loss(const StepFactors& f) {
    double loss = 0;
    for (const CalibrationPoint& p : calibration_points()) {
        if (!p.fitted) continue;
        const double e = log_f64(estimate_point(p, f) / p.measured_s);
        loss += e * e;
    }
    return loss;
}

namespace {

std::vector<double*> factor_slots(StepFactors& f) {
    return {&f.f_gemm,
            &f.f_attn,
            &f.f_mem,
            &f.alpha_s,
            &f.overhead_s[0],
            &f.overhead_s[1],
            &f.overhead_s[2],
            &f.prefill_layer_s[0],
            &f.prefill_layer_s[1],
            &f.prefill_layer_s[2]};
}

}  // namespace

StepFactors fit_step_factors() {
    StepFactors f;
    f.overhead_s = {1e-3, 1e-3, 1e-3};
    f.prefill_layer_s = {1e-3, 1e-3, 1e-3};
    double best = fit_loss(f);
    for (double h = 0.5; h >= 1e-4; h /= 2) {
        bool improved = true;
        while (improved) {
            improved = false;
            for (size_t i = 0; i < factor_slots(f).size(); ++i) {
                for (double sign : {1.0, -1.0}) {
                    StepFactors g = f;
                    double* x = factor_slots(g)[i];
                    *x *= exp_f64(sign * h);
                    if (i < 3) *x = std::min(*x, 1.0);  // a fraction of the peak
                    if (i >= 4 && *x < 1e-6) *x = 0;    // an overhead below 1 us is none
                    const double loss = fit_loss(g);
                    if (loss < best) {
                        best = loss;
                        f = g;
                        improved = true;
                    }
                }
            }
        }
    }
    return f;
}

}  // namespace k3

namespace k3 {

namespace {

// Every TPOT point's estimate with a changed point against the point's own.
template <class Change>
std::string tpot_points_hold(const StepFactors& f, const char* what, Change change, bool never_slower) {
    for (const CalibrationPoint& p : calibration_points()) {
        if (p.kind != PointKind::tpot) continue;
        CalibrationPoint q = p;
        change(q);
        const double a = estimate_point(p, f), b = estimate_point(q, f);
        if (never_slower ? b > a : b < a)
            return p.id + ": " + what + " takes " + std::to_string(b * 1e3) + " ms against " +
                   std::to_string(a * 1e3) + " ms";
    }
    return "";
}

const char* kCheckModels[3] = {"kimi-linear-48b", "qwen3-next-80b", "kimi-k3"};

}  // namespace

std::string check_bandwidth_monotone(const StepFactors& f) {
    return tpot_points_hold(
        f, "1.5 x the HBM bandwidth", [](CalibrationPoint& q) { q.deploy.gpu.mem_bytes_per_s *= 1.5; }, true);
}

std::string check_context_monotone(const StepFactors& f) {
    return tpot_points_hold(
        f, "twice the context", [](CalibrationPoint& q) { q.input_tokens *= 2; }, false);
}

std::string check_gpus_weight_bytes(const StepFactors& f) {
    for (const char* id : kCheckModels) {
        const ModelConfig m = calibration_model(id);
        for (bool ep : {false, true}) {
            double last = 1e300;
            for (int g : {1, 2, 4, 8, 16}) {
                Deployment d;
                d.gpu = *hardware_preset("h100");
                d.gpus = d.tp = g;
                d.ep = ep ? g : 1;
                if (!deployment_error(m, d).empty()) continue;
                const StepTerms s = step_terms(m, d, f, decode_work(8, 4096));
                const double bytes = s[StepTerm::dense_weights].bytes + s[StepTerm::moe_experts].bytes;
                if (bytes > last)
                    return std::string(id) + ": " + std::to_string(g) +
                           " GPUs read more weight bytes per GPU";
                last = bytes;
            }
        }
    }
    return "";
}

std::string check_weights_floor(const StepFactors& f) {
    for (const CalibrationPoint& p : calibration_points()) {
        if (p.kind != PointKind::tpot) continue;
        const ModelConfig m = calibration_model(p.model);
        const Deployment& d = p.deploy;
        // One token reads the dense weights (split by the attention width) and k experts per MoE layer
        // (split over the ranks holding them), at no more than the peak bandwidth.
        const MoeSplit s = moe_split(m);
        const double ta = d.dp_attention ? 1.0 : double(d.tp);
        const double share = d.ep > 1 ? double(d.ep) : double(d.gpus);
        const double expert_bytes = double(s.moe_layers) * double(m.moe.top_k) * s.expert_params *
                                    (d.mxfp4_experts ? 0.53125 : 2.0) / share;
        const double floor = (2.0 * s.dense_params / ta + expert_bytes) / d.gpu.mem_bytes_per_s;
        const double step = step_seconds(m, d, f, decode_work(1, p.input_tokens));
        if (step < floor)
            return p.id + ": batch-1 decode " + std::to_string(step * 1e3) + " ms below the weights floor " +
                   std::to_string(floor * 1e3) + " ms";
    }
    return "";
}

}  // namespace k3
