// The calibrated step-time model (core/fleet/step_model.h) and its calibration
// (core/fleet/calibration.h). K3_CALIBRATION_PRINT=1 prints the fitted factors and the table.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "core/fleet/batch_roofline.h"
#include "core/fleet/calibration.h"
#include "core/fleet/cost_model.h"
#include "core/fleet/fleet_cost.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

namespace {

bool close_rel(double a, double b, double rel) { return a <= b * (1 + rel) && a >= b * (1 - rel); }

void print_fit(const StepFactors& f) {
    if (!std::getenv("K3_CALIBRATION_PRINT")) return;
    std::printf("f_gemm %.6g f_attn %.6g f_mem %.6g alpha_s %.6g\n", f.f_gemm, f.f_attn, f.f_mem, f.alpha_s);
    std::printf(
        "per step sglang %.6g vllm %.6g trtllm %.6g; per prefill layer sglang %.6g vllm %.6g trtllm %.6g\n",
        f.overhead_s[0], f.overhead_s[1], f.overhead_s[2], f.prefill_layer_s[0], f.prefill_layer_s[1],
        f.prefill_layer_s[2]);
    for (const CalibrationRow& r : calibration_table(f))
        std::printf("%-16s %-10s measured %10.3f ms estimated %10.3f ms error %+7.1f %% %s\n",
                    r.point->id.c_str(), r.point->fitted ? "fitted" : "validation", r.point->measured_s * 1e3,
                    r.estimated_s * 1e3, r.error * 100, r.within ? "within" : "OUTSIDE");
    for (const CalibrationPoint& p : calibration_points()) {
        if (p.kind != PointKind::tpot) continue;
        const ModelConfig m = calibration_model(p.model);
        const StepTerms t =
            step_terms(m, p.deploy, f, decode_work(p.concurrency, p.input_tokens + p.output_tokens / 2));
        std::printf("%-16s", p.id.c_str());
        for (int i = 0; i < kStepTerms; ++i)
            std::printf(" %s %.3f", step_term_name(StepTerm(i)), t.term[size_t(i)].seconds * 1e3);
        std::printf("\n");
    }
}

// What switching the fleet's default (kimi-linear-48b, 2 x H100, TP2) to the step model would change.
void print_fleet_switch() {
    if (!std::getenv("K3_CALIBRATION_PRINT")) return;
    const ModelConfig m = *model_preset("kimi-linear-48b");
    const Hardware h = *hardware_preset("h100");
    const RooflineCostModel old(m, h, 2);
    Deployment d;
    d.gpu = h;
    d.gpus = d.tp = 2;
    for (double b : {1.0, 16.0, 64.0}) {
        const IterationWork w = decode_work(b, 4096);
        std::printf("fleet default decode batch %g ctx 4096: cost model %.3f ms, step model %.3f ms\n", b,
                    old.seconds(w) * 1e3, step_seconds(m, d, kFittedFactors, w) * 1e3);
    }
    IterationWork w;
    w.add_chunk(0, 8192);
    std::printf("fleet default prefill chunk 8192: cost model %.3f ms, step model %.3f ms\n",
                old.seconds(w) * 1e3, step_seconds(m, d, kFittedFactors, w) * 1e3);
}

}  // namespace

TEST_CASE("step model: the fit reproduces the factors the product uses" * test::native_only()) {
    const StepFactors f = fit_step_factors();
    print_fit(f);
    print_fleet_switch();
    if (std::getenv("K3_CALIBRATION_PRINT")) std::printf("loss %.6g\n", fit_loss(f));
    CHECK(close_rel(f.f_gemm, kFittedFactors.f_gemm, 5e-3));
    CHECK(close_rel(f.f_attn, kFittedFactors.f_attn, 5e-3));
    CHECK(close_rel(f.f_mem, kFittedFactors.f_mem, 5e-3));
    CHECK(close_rel(f.alpha_s, kFittedFactors.alpha_s, 5e-3));
    for (size_t e = 0; e < 3; ++e) {
        CHECK(close_rel(f.overhead_s[e], kFittedFactors.overhead_s[e], 5e-3));
        CHECK(close_rel(f.prefill_layer_s[e], kFittedFactors.prefill_layer_s[e], 5e-3));
    }
    CHECK(fit_loss(kFittedFactors) <= fit_loss(StepFactors{}));
}

TEST_CASE("step model: the calibration table against the issue's tolerances") {
    const std::vector<CalibrationRow> rows = calibration_table(kFittedFactors);
    int fitted = 0, within = 0;
    std::string outside;
    for (const CalibrationRow& r : rows) {
        fitted += r.point->fitted;
        within += r.within;
        if (!r.within) outside += r.point->id + "; ";
    }
    CHECK(rows.size() == 40);
    CHECK(fitted == 12);
    // Every fitted and every validation point within its tolerance (the target); of the
    // cross-checks (SGLang's Kimi-K3 cookbook on B300) two lie outside: its decode at one request (its
    // layers run faster than the 2025 Hopper points the collective latency is fitted on) and its TTFT
    // at 16 requests (the estimate shares a prefill step between two 8K prompts; the run took longer).
    CHECK(outside == "SG K3 c1 TPOT; SG K3 c16 TTFT; ");
    CHECK(within == 38);
    for (const CalibrationRow& r : rows) CHECK((r.within || r.point->cross_check));
}

TEST_CASE("step model: the physical checks hold and can fail") {
    CHECK(check_bandwidth_monotone(kFittedFactors) == "");
    CHECK(check_context_monotone(kFittedFactors) == "");
    CHECK(check_gpus_weight_bytes(kFittedFactors) == "");
    CHECK(check_weights_floor(kFittedFactors) == "");
    // Bandwidth above the peak puts batch-1 decode under the floor: the check sees it.
    StepFactors beyond = kFittedFactors;
    beyond.f_mem = 3.0;
    beyond.overhead_s = {0, 0, 0};
    beyond.alpha_s = 0;
    CHECK(check_weights_floor(beyond) != "");
}

TEST_CASE("step model: terms") {
    const ModelConfig k3m = *model_preset("kimi-k3");
    Deployment d;
    d.gpu = *hardware_preset("gb300");
    d.gpus = d.tp = d.ep = 16;
    const StepFactors& f = kFittedFactors;
    // One token touches k experts per layer; a large batch touches nearly all of them.
    CHECK(close_rel(step_terms(k3m, d, f, decode_work(1, 1000)).experts_touched, 16.0, 1e-9));
    CHECK(step_terms(k3m, d, f, decode_work(4096, 1000)).experts_touched > 895.0);
    // MXFP4 experts read 0.53125 / 2 of the BF16 bytes; an fp8 cache halves the MLA KV read.
    const double bf16 = step_terms(k3m, d, f, decode_work(8, 8192))[StepTerm::moe_experts].bytes;
    Deployment fp4 = d;
    fp4.mxfp4_experts = true;
    fp4.kv_dtype = DType::fp8;
    const StepTerms t = step_terms(k3m, fp4, f, decode_work(8, 8192));
    CHECK(close_rel(t[StepTerm::moe_experts].bytes, bf16 * 0.53125 / 2.0, 1e-12));
    CHECK(close_rel(t[StepTerm::attn_decode].bytes,
                    step_terms(k3m, d, f, decode_work(8, 8192))[StepTerm::attn_decode].bytes / 2, 1e-12));
    // A prompt of one chunk alone is one step.
    IterationWork w;
    w.add_chunk(0, 8192);
    CHECK(close_rel(prefill_seconds(k3m, d, f, 8192, 8192), step_seconds(k3m, d, f, w), 1e-12));
    CHECK(deployment_error(k3m, d) == "");
    d.tp = 5;
    CHECK(deployment_error(k3m, d) != "");
}

// Under DP attention a step takes its busiest rank's time: decodes spread over the ranks, a prompt's
// chunk runs whole on one rank (each chunk on its own while ranks are left), and the request-by-request
// recount charges the same.
TEST_CASE("step model: DP attention costs the busiest rank") {
    const ModelConfig k3m = *model_preset("kimi-k3");
    Deployment dep;
    dep.gpu = *hardware_preset("gb300");
    dep.gpus = dep.ep = 16;
    dep.dp_attention = true;
    dep.mxfp4_experts = true;
    const StepFactors& f = kFittedFactors;
    const double D = moe_split(k3m).dense_params;
    // 64 decodes: 4 on each rank. One 8192-token chunk: all of it on one rank.
    CHECK(close_rel(step_terms(k3m, dep, f, decode_work(64, 1000))[StepTerm::dense_weights].flops, 2 * D * 4,
                    1e-12));
    IterationWork one = decode_work(64, 1000), spread = one;
    one.add_chunk(0, 8192);
    const StepTerms t1 = step_terms(k3m, dep, f, one);
    CHECK(close_rel(t1[StepTerm::dense_weights].flops, 2 * D * (4 + 8192), 1e-12));
    // Sixteen chunks run side by side: the busiest rank holds one, as with a single chunk.
    for (int i = 0; i < 16; ++i) spread.add_chunk(0, 8192);
    const StepTerms t16 = step_terms(k3m, dep, f, spread);
    CHECK(t16[StepTerm::dense_weights].flops == t1[StepTerm::dense_weights].flops);
    CHECK(t16[StepTerm::attn_prefill].flops == t1[StepTerm::attn_prefill].flops);
    CHECK(t16[StepTerm::moe_experts].flops >
          15 * t1[StepTerm::moe_experts].flops);  // experts see every rank's
    // Seventeen chunks of 8192 and one of 100: the busiest rank has 17/16 of a chunk's tokens.
    spread.add_chunk(0, 8192);
    spread.add_chunk(0, 100);
    CHECK(close_rel(step_terms(k3m, dep, f, spread)[StepTerm::dense_weights].flops,
                    2 * D * (4 + (17 * 8192.0 + 100) / 16), 1e-12));
    // At dp = 1 every share is 1.
    const GroupShare g = busiest_group(1, 3, 300, 9e4, 200, 5e4);
    CHECK((g.decode == 1 && g.chunk_tokens == 1 && g.chunk_attention == 1 && g.chunks == 1));
    // The recount: every sequence on its own, then the busiest rank's share.
    const StepModel sm(k3m, dep, f);
    const BatchRoofline recount(sm);
    BatchRoofline::Pass p, next;
    IterationWork w;
    for (uint64_t ctx : {10u, 5000u, 9000u}) {
        w.add_decode(double(ctx));
        recount.add_decode(p, ctx, &next);
    }
    for (double n : {8192.0, 300.0}) {
        w.add_chunk(700, n);
        recount.add_chunk(p, 700, n);
    }
    const double s = sm.seconds(w);
    CHECK(std::abs(recount.seconds(p) - s) <= 1e-12 * s);
}

// The fleet's iteration time is module 15's step model of fleet_deployment(FleetConfig), and the
// request-by-request recount the fleet checks its clock against gives the same time, run steps included.
TEST_CASE("step model: the fleet's cost is the step model of its deployment, recounted request by request") {
    FleetConfig c;
    c.model = *model_preset("kimi-linear-48b");
    c.hardware = *hardware_preset("h100");
    c.gpus = 2;
    c.engine = CacheEngine::sglang;
    const Deployment d = fleet_deployment(c);
    CHECK(d.tp == 2);
    CHECK(d.ep == 1);
    CHECK(d.engine == Engine::sglang);
    CHECK(!d.mxfp4_experts);
    CHECK(fleet_step_engine(CacheEngine::ideal) == Engine::trtllm);
    FleetConfig k = c;
    k.model = *model_preset("kimi-k3");
    CHECK(fleet_deployment(k).mxfp4_experts);
    const CostModel cm(c);
    const BatchRoofline recount(cm.step_model());
    IterationWork w;
    BatchRoofline::Pass first, next;
    for (uint64_t ctx : {0u, 517u, 4096u, 70000u}) {
        w.add_decode(double(ctx));
        recount.add_decode(first, ctx, &next);
    }
    CHECK(cm.seconds(w) == step_seconds(c.model, d, kFittedFactors, w));
    for (double j : {0.0, 1.0, 37.0}) {
        IterationWork wj = w;
        wj.decode_context += j * double(w.decode);
        const double s = cm.seconds(wj);
        CHECK(std::abs(recount.step_seconds(first, next, j) - s) <= 1e-12 * s);
    }
    w.add_chunk(1024, 2048);
    recount.add_chunk(first, 1024, 2048);
    const double mixed = cm.seconds(w);
    CHECK(std::abs(recount.seconds(first) - mixed) <= 1e-12 * mixed);
    // The chunk adds at least the engine's eager prefill path, a cost per layer.
    const double per_layer = kFittedFactors.prefill_layer_s[size_t(d.engine)];
    CHECK(mixed > cm.seconds(decode_work(4, 0)) + per_layer * double(c.model.n_layers()));
}
