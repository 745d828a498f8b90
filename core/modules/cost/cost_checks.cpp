// Module 15 `cost`: the checks (calibration within tolerance, the terms' monotonicity, the weights-read
// floor, the largest batch fitting) and the notes.
#include <algorithm>
#include <cmath>

#include "core/base/bytes.h"
#include "core/base/numfmt.h"
#include "core/modules/cost/cost.h"

namespace k3 {

namespace {

std::string ms(double s) { return format_sig(s * 1e3, 4) + " ms"; }

// The points of one role and kind (the fitted ones; the validation TPOTs and throughput steps;
// the validation TTFTs) within their tolerance. Cross-check points are not among them (notes).
enum class PointSet : uint8_t { fitted, validation_tpot, validation_ttft };

bool in_set(const CalibrationPoint& q, PointSet set) {
    if (q.cross_check) return false;
    if (set == PointSet::fitted) return q.fitted;
    if (q.fitted) return false;
    return (q.kind == PointKind::ttft) == (set == PointSet::validation_ttft);
}

void calibration_check(const CostResult& c, Report& r, PointSet set) {
    int n = 0, in = 0;
    std::string misses, worst;
    double worst_e = -1;
    for (const CalibrationRow& row : c.calibration) {
        const CalibrationPoint& q = *row.point;
        if (!in_set(q, set)) continue;
        ++n;
        in += row.within;
        if (!row.within) misses += (misses.empty() ? "" : ", ") + q.id;
        if (std::fabs(row.error) > worst_e) {
            worst_e = std::fabs(row.error);
            worst = q.id + " " + format_sig(row.error * 100, 3) + " %";
        }
    }
    const std::string detail = std::to_string(in) + " of " + std::to_string(n) + " within; largest error " +
                               worst + (misses.empty() ? "" : "; outside: " + misses);
    const bool ok = in == n && n > 0;
    if (set == PointSet::fitted)
        r.check("fitted_points_within", "The fitted points within their tolerance (25 % TPOT, 35 % TTFT)", ok,
                detail);
    else if (set == PointSet::validation_tpot)
        r.check("validation_tpot_within", "The validation TPOT and throughput-step points within 25 %", ok,
                detail);
    else
        r.check("validation_ttft_within", "The validation TTFT points within 35 %", ok, detail);
}

void monotone_checks(const CostParams& p, const CostResult& c, Report& r) {
    const double ctx = double(p.input_tokens) + double(p.output_tokens) / 2, B = double(p.concurrency);
    CostParams q = p;
    q.gpu.mem_bytes_per_s *= 1.5;
    const Deployment dq = cost_deployment(q);
    const double a = c.decode_terms.seconds();
    const double b = cost_step(p, c.model, dq, c.factors, B, ctx, 0, 0).seconds();
    const std::string cal_bw = check_bandwidth_monotone(c.factors);
    r.check("bandwidth_monotone", "More HBM bandwidth is never slower (this deployment and every TPOT point)",
            b <= a && cal_bw.empty(),
            "decode step " + ms(a) + ", at 1.5 x the bandwidth " + ms(b) +
                (cal_bw.empty() ? "; every calibration TPOT point likewise" : "; " + cal_bw));
    const double l = cost_step(p, c.model, c.deploy, c.factors, B, 2 * ctx, 0, 0).seconds();
    const std::string cal_ctx = check_context_monotone(c.factors);
    r.check("context_monotone",
            "More context is never faster at decode (this deployment and every TPOT point)",
            l >= a && cal_ctx.empty(),
            "decode step " + ms(a) + " at " + format_grouped(ctx) + " tokens, " + ms(l) + " at twice that" +
                (cal_ctx.empty() ? "; every calibration TPOT point likewise" : "; " + cal_ctx));
    CostParams g = p;
    g.gpus *= 2;
    if (!p.dp_attention) g.tp *= 2;
    if (p.ep > 1) g.ep *= 2;
    const double w1 = c.memory.weights, w2 = cost_memory(g, c.model).weights;
    const std::string cal_g = check_gpus_weight_bytes(c.factors);
    r.check("gpus_weight_bytes", "More GPUs never hold more weight bytes per GPU", w2 <= w1 && cal_g.empty(),
            format_sig(w1 / kGiB, 4) + " GiB per GPU on " + std::to_string(p.gpus) + " GPUs, " +
                format_sig(w2 / kGiB, 4) + " GiB on " + std::to_string(g.gpus) +
                (cal_g.empty() ? "; the step model's weight bytes likewise over 1-16 H100" : "; " + cal_g));
}

void floor_check(const CostParams& p, const CostResult& c, Report& r) {
    const ModelConfig& m = c.model;
    const Deployment& d = c.deploy;
    const MoeSplit s = moe_split(m);
    const double ta = d.dp_attention ? 1.0 : double(d.tp), share = d.ep > 1 ? double(d.ep) : double(d.gpus);
    const double experts = double(s.moe_layers) * double(m.moe.top_k) * s.expert_params *
                           (d.mxfp4_experts ? 0.53125 : 2.0) / share;
    const double floor = (2.0 * s.dense_params / ta + experts) / p.gpu.mem_bytes_per_s;
    CostParams one = p;
    one.draft_len = 0;
    const double step = cost_step(one, m, d, c.factors, 1, double(p.input_tokens), 0, 0).seconds();
    const std::string cal = check_weights_floor(c.factors);
    r.check("weights_floor", "The batch-1 decode step is not below the weights-read floor",
            step >= floor && cal.empty(),
            "batch-1 step " + ms(step) + ", floor (dense and k experts per layer at peak bandwidth) " +
                ms(floor) + (cal.empty() ? "; every calibration TPOT deployment likewise" : "; " + cal));
}

void memory_check(const CostParams& p, const CostResult& c, Report& r) {
    const CostMemory& m = c.memory;
    const int dp = c.deploy.dp_attention ? c.deploy.gpus : c.deploy.gpus / c.deploy.tp;
    const int per_rank = m.max_batch / std::max(dp, 1);
    const double at = m.used(per_rank), next = m.used(per_rank + 1);
    const double sum = m.weights + double(m.sequences_per_rank) *
                                       (m.kv_per_sequence + m.state_per_sequence + m.scratch_per_sequence);
    r.check("max_batch_fits",
            "The largest batch fits in the usable memory and one more sequence per rank does not",
            at <= m.capacity && next > m.capacity && m.used(m.sequences_per_rank) == sum,
            std::to_string(m.max_batch) + " sequences (" + std::to_string(per_rank) + " per rank) use " +
                format_sig(at / kGiB, 5) + " GiB of " + format_sig(m.capacity / kGiB, 5) + " GiB; one more " +
                format_sig(next / kGiB, 5) + " GiB; at the concurrency weights + KV + states + scratch = " +
                format_sig(sum / kGiB, 5) + " GiB");
}

void notes(const CostParams& p, const CostResult& c, Report& r) {
    std::string misses, cross;
    for (const CalibrationRow& row : c.calibration) {
        if (row.within) continue;
        std::string& list = row.point->cross_check ? cross : misses;
        list += (list.empty() ? "" : ", ") + row.point->id + " (" + format_sig(row.error * 100, 3) + " %)";
    }
    r.notes.push_back(misses.empty() ? "Every point of the issue's set (reference/calibration.md and "
                                       "TensorRT-LLM's K3 guide) is within its tolerance: the target is met."
                                     : "The issue's target (every point within tolerance) is not met: " +
                                           misses + " lie outside (the text says why).");
    if (!cross.empty())
        r.notes.push_back("Cross-check points outside their tolerance: " + cross +
                          " (SGLang's Kimi-K3 cookbook on B300; the text says why).");
    r.notes.push_back(
        "Estimates from the step-time model with its fitted factors (core/fleet/calibration.h), "
        "not measurements. " +
        std::string(c.deploy.mxfp4_experts ? "Routed experts in MXFP4 (the published checkpoint)."
                                           : "Weights in BF16."));
    if (p.draft_len > 0)
        r.notes.push_back(
            "Speculative decoding: the draft model's own cost is not counted; a verify step of " +
            std::to_string(1 + p.draft_len) + " tokens per request yields " +
            format_sig(p.acceptance_len, 3) + " tokens.");
}

}  // namespace

void report_cost_checks(const CostParams& p, const CostResult& c, Report& r) {
    calibration_check(c, r, PointSet::fitted);
    calibration_check(c, r, PointSet::validation_tpot);
    calibration_check(c, r, PointSet::validation_ttft);
    monotone_checks(p, c, r);
    floor_check(p, c, r);
    memory_check(p, c, r);
    notes(p, c, r);
}

}  // namespace k3
