// Module 15 `cost`: the figures, the concurrency sweep, the step's terms, the calibration and the checks.
#include <algorithm>
#include <cmath>

#include "core/base/bytes.h"
#include "core/base/numfmt.h"
#include "core/modules/cost/cost.h"

namespace k3 {

namespace {

double usd_per_second(const CostParams& p) { return p.price_per_gpu_hour * double(p.gpus) / 3600.0; }

void scalars(const CostParams& p, const CostResult& c, Report& r) {
    const CostPoint& a = c.at;
    const CostMemory& m = c.memory;
    const double prompts = double(p.rounds) * double(p.concurrency);
    const double out = prompts * double(p.output_tokens), in = prompts * double(p.input_tokens);
    const double decode_s = a.duration_s - a.prefill_share_s;  // the benchmark's GPU time, less prefill
    r.scalar("ttft_ms", "Time to first token", "ms", a.ttft_s * 1e3, true).help =
        "The median over the benchmark's requests: the wait for the prompts sent before, then the "
        "prompt's chunks (estimate).";
    r.scalar("tpot_ms", "Time per output token", "ms", a.tpot_s * 1e3, true).help =
        "The median over the benchmark's requests of (last token - first) / (tokens - 1): the decode "
        "steps and the other requests' prefills among them (estimate).";
    r.scalar("output_tokens_per_s", "Output throughput", "tokens/s", a.output_per_s, true);
    r.scalar("total_tokens_per_s", "Input + output throughput", "tokens/s", a.total_per_s);
    r.scalar("tokens_per_s_per_gpu", "Output tokens per second per GPU", "tokens/s", a.output_per_s / p.gpus,
             true);
    r.scalar("max_batch", "Largest batch that fits", "sequences", double(m.max_batch), true);
    r.scalar("usd_per_m_output_tokens", "USD per million output tokens", "USD",
             usd_per_second(p) * decode_s / out * 1e6, true)
        .help = "The decode steps' GPU time at the price per GPU-hour, over the output tokens.";
    r.scalar("usd_per_m_input_tokens", "USD per million input tokens", "USD",
             usd_per_second(p) * a.prefill_share_s / in * 1e6)
        .help = "The prefill chunks' GPU time beyond the decode steps they ride with, over the input tokens.";
    r.scalar("step_ms", "Decode step", "ms", a.step_s * 1e3);
    r.scalar("experts_touched", "Distinct experts per MoE layer in the step", "experts",
             c.decode_terms.experts_touched);
    r.scalar("weights_gib", "Weights per GPU", "GiB", m.weights / kGiB);
    r.scalar("kv_gib", "KV cache per GPU at the concurrency", "GiB",
             m.kv_per_sequence * m.sequences_per_rank / kGiB);
    r.scalar("state_gib", "Linear-layer states per GPU", "GiB",
             m.state_per_sequence * m.sequences_per_rank / kGiB);
    r.scalar("scratch_gib", "Speculative state scratch per GPU", "GiB",
             m.scratch_per_sequence * m.sequences_per_rank / kGiB);
    r.scalar("used_gib", "Memory used per GPU", "GiB", m.used(m.sequences_per_rank) / kGiB);
    r.scalar("capacity_gib", "Usable memory per GPU", "GiB", m.capacity / kGiB);
    int within = 0, fitted = 0;
    for (const CalibrationRow& row : c.calibration) {
        within += row.within;
        fitted += row.point->fitted;
    }
    r.scalar("calibration_points", "Published points", "points", double(c.calibration.size()));
    r.scalar("calibration_fitted", "Points used for fitting", "points", double(fitted));
    r.scalar("calibration_within", "Points within tolerance", "points", double(within), true);
}

void plots(const CostParams& p, const CostResult& c, Report& r) {
    Series tpot = make_series("TPOT", "TPOT against concurrency", "concurrency (requests)", "TPOT (ms)",
                              "requests", "ms");
    Series ttft = make_series("TTFT", "TTFT against concurrency", "concurrency (requests)", "TTFT (ms)",
                              "requests", "ms");
    Series thr = make_series("output tokens/s", "Throughput against concurrency", "concurrency (requests)",
                             "tokens/s", "requests", "tokens/s");
    Series tot = make_series("input + output tokens/s", "Throughput against concurrency",
                             "concurrency (requests)", "tokens/s", "requests", "tokens/s");
    for (Series* s : {&tpot, &ttft, &thr, &tot}) s->log_x = true;
    for (const CostPoint& a : c.sweep) {
        tpot.add(a.concurrency, a.tpot_s * 1e3);
        ttft.add(a.concurrency, a.ttft_s * 1e3);
        thr.add(a.concurrency, a.output_per_s);
        tot.add(a.concurrency, a.total_per_s);
    }
    if (c.sweep_cut > 0)
        r.notes.push_back("The sweep stops below " + std::to_string(c.sweep_cut) +
                          " requests: that benchmark (" + std::to_string(p.rounds) + " x " +
                          std::to_string(c.sweep_cut) + " prompts) is over the closed loop's work limit.");
    r.series = {tpot, ttft, thr, tot};
}

void terms_table(Report& r, const std::string& name, const StepTerms& s) {
    Table& t = r.add_table(make_table(
        name, {{"term", ""}, {"FLOPs", "FLOP"}, {"bytes", "B"}, {"seconds", "ms"}, {"bound", ""}}));
    for (int i = 0; i < kStepTerms; ++i) {
        const TermCost& x = s.term[size_t(i)];
        const bool comm = i == int(StepTerm::tp_allreduce) || i == int(StepTerm::ep_alltoall);
        const char* bound = i == int(StepTerm::overhead) ? "fixed"
                            : comm                       ? "link"
                            : x.compute_bound            ? "compute"
                                                         : "memory";
        t.add({std::string(step_term_name(StepTerm(i))), x.flops, x.bytes, x.seconds * 1e3,
               std::string(bound)});
    }
    t.add({std::string("step"), 0.0, 0.0, s.seconds() * 1e3, std::string("sum")});
}

void tables(const CostParams& p, const CostResult& c, Report& r) {
    const CostMemory& m = c.memory;
    Table& mem = r.add_table(make_table("Memory per GPU", {{"part", ""},
                                                           {"per sequence", "GiB"},
                                                           {"at the concurrency", "GiB"},
                                                           {"at the largest batch", "GiB"}}));
    const double n = m.sequences_per_rank, x = m.max_per_rank;
    mem.add({std::string("weights"), 0.0, m.weights / kGiB, m.weights / kGiB});
    mem.add({std::string("KV cache (input + output tokens)"), m.kv_per_sequence / kGiB,
             m.kv_per_sequence * n / kGiB, m.kv_per_sequence * x / kGiB});
    mem.add({std::string("linear-layer state"), m.state_per_sequence / kGiB, m.state_per_sequence * n / kGiB,
             m.state_per_sequence * x / kGiB});
    mem.add({std::string(p.spec_memory == SpecMemory::snapshots ? "speculative scratch (snapshot pages)"
                                                                : "speculative scratch (RecoverSSM records)"),
             m.scratch_per_sequence / kGiB, m.scratch_per_sequence * n / kGiB,
             m.scratch_per_sequence * x / kGiB});
    if (p.draft_len > 0) {
        // The other way of holding the speculative state, for comparison (not in the total).
        CostParams q = p;
        q.spec_memory =
            p.spec_memory == SpecMemory::snapshots ? SpecMemory::recoverssm : SpecMemory::snapshots;
        const double o = cost_memory(q, c.model).scratch_per_sequence;
        mem.add({std::string(q.spec_memory == SpecMemory::snapshots
                                 ? "(instead) snapshot pages, not counted"
                                 : "(instead) RecoverSSM records, not counted"),
                 o / kGiB, o * n / kGiB, o * x / kGiB});
    }
    mem.add({std::string("total"), m.per_sequence() / kGiB, m.used(m.sequences_per_rank) / kGiB,
             m.used(m.max_per_rank) / kGiB});
    mem.add({std::string("usable"), 0.0, m.capacity / kGiB, m.capacity / kGiB});
    terms_table(r, "Decode step terms (one rank)", c.decode_terms);
    terms_table(r, "Prefill step terms (one chunk, alone)", c.prefill_terms);
    Table& cal = r.add_table(make_table("Calibration", {{"point", ""},
                                                        {"what", ""},
                                                        {"model", ""},
                                                        {"measured", "ms"},
                                                        {"estimated", "ms"},
                                                        {"error", "%"},
                                                        {"tolerance", "%"},
                                                        {"role", ""},
                                                        {"within", ""},
                                                        {"source", ""},
                                                        {"assumption", ""}}));
    for (const CalibrationRow& row : c.calibration) {
        const CalibrationPoint& q = *row.point;
        cal.add({q.id, q.what, q.model, q.measured_s * 1e3, row.estimated_s * 1e3, row.error * 100,
                 q.tolerance * 100, std::string(point_role(q)), std::string(row.within ? "yes" : "no"),
                 q.source, q.assumption});
    }
}

}  // namespace

void report_cost_checks(const CostParams& p, const CostResult& c, Report& r);

void report_cost(const CostParams& p, const CostResult& c, Report& r) {
    scalars(p, c, r);
    plots(p, c, r);
    tables(p, c, r);
    report_cost_checks(p, c, r);
}

}  // namespace k3
