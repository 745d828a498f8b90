// Module 1 `kda`: errors, work and bits as figures, the chunk-size sweep, the table of the four fp32
// runs, the exactness checks, and the throughput (wall clock: the report's `timing` only).
#include <algorithm>
#include <cstdio>

#include "core/base/numfmt.h"
#include "core/modules/kda/kda.h"

namespace k3 {

// The names of the timed kernels, in TimedKernel order (the bars' categories).
static const char* const kTimedKernelNames[kTimedKernels] = {
    "decode step (SIMD)",   "decode, states in memory (SIMD)",
    "recurrent (SIMD)",     "chunked (SIMD)",
    "decode step (scalar)", "recurrent (scalar)",
    "chunked (scalar)",     "decode step (FMA)",
    "chunked (FMA)",
};
// Their keys in the report's timing figures.
static const char* const kTimedKernelKeys[kTimedKernels] = {
    "decode",           "decode_state_in_memory", "recurrent",  "chunked",     "decode_scalar",
    "recurrent_scalar", "chunked_scalar",         "decode_fma", "chunked_fma",
};

bool is_fma_kernel(TimedKernel k) { return k == TimedKernel::decode_fma || k == TimedKernel::chunked_fma; }
bool kernel_was_timed(const KdaResult& m, TimedKernel k) { return !is_fma_kernel(k) || m.fma; }
const char* timed_kernel_name(TimedKernel k) { return kTimedKernelNames[size_t(k)]; }
const char* timed_kernel_key(TimedKernel k) { return kTimedKernelKeys[size_t(k)]; }

namespace {

using kda::ErrorStats;

void error_scalars(const KdaResult& m, Report& r) {
    const ErrorStats &rec = m.recurrent[1], &ch = m.chunked[1];
    r.scalar("rel_err_recurrent", "Recurrent kernel vs fp64 (relative RMS)", "", rec.rel_rms(), true).help =
        "||fp64 - fp32|| / ||fp64|| over all outputs and the final state of the fp32 recurrent kernel.";
    r.scalar("rel_err_chunked", "Chunked kernel vs fp64 (relative RMS)", "", ch.rel_rms(), true).help =
        "The same for the chunked (WY) kernel with chunk size " + std::to_string(m.chunk) + ".";
    r.scalar("max_abs_err_recurrent", "Recurrent vs fp64, max |diff|", "", rec.max_abs);
    r.scalar("max_abs_err_chunked", "Chunked vs fp64, max |diff|", "", ch.max_abs);
    r.scalar("max_abs_chunked_vs_recurrent", "max |chunked - recurrent| (fp32)", "",
             m.chunked_vs_recurrent.max_abs, true);
}

void work_scalars(const KdaResult& m, Report& r) {
    const double K = m.shape.K, V = m.shape.V, n = std::min(m.chunk, m.tokens);
    r.scalar("state_bytes_per_layer", "State per layer (fp32)", "B", double(m.shape.state_floats()) * 4.0);
    // A lone multiply counts as one multiply-add (as in core/cp/work.h).
    const double rec_madds = 4.0 * K * V + K;  // decay, predict, write, read; q scaled
    const double ch_madds = (n * (K + 0.5 * (K + V)) + 3.0 * K * V + 0.5 * n * V);
    r.scalar("madds_per_head_token_recurrent", "Work per head-token, recurrent", "multiply-adds", rec_madds)
        .help =
        "K V multiplies for the decay, then predict, write and read, K V multiply-adds each "
        "(3 K V), and K multiplies to scale q; a lone multiply counts as one.";
    r.scalar("madds_per_head_token_chunked", "Work per head-token, chunked", "multiply-adds", ch_madds);
}

void digest(const KdaResult& m, Report& r) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", unsigned(m.bits_digest));
    r.notes.push_back(std::string("Bits digest (CRC-32C of every fp32 output and state of this run): ") +
                      hex + ". The same in every build for the same parameters.");
    r.scalar("bits_digest", "CRC-32C of the fp32 results", "", double(m.bits_digest));
}

void sweep_series(const KdaResult& m, Report& r) {
    auto against_chunk = [](std::string name, std::string y_label) {
        Series s = make_series(std::move(name), "Error against chunk size", "chunk size C (tokens)",
                               std::move(y_label), "tokens", "");
        s.log_x = s.log_y = true;
        return s;
    };
    Series err = against_chunk("chunked (fp32) vs fp64", "relative RMS error");
    Series diff = against_chunk("max |chunked - recurrent| (fp32)", "max abs difference");
    for (size_t i = 0; i < m.sweep_rel_err.size(); ++i) {
        err.add(m.sweep_chunks[i], m.sweep_rel_err[i]);
        diff.add(m.sweep_chunks[i], m.sweep_max_diff[i]);
    }
    r.add_series(err);
    r.add_series(diff);
}

void kernel_table(const KdaResult& m, Report& r) {
    Table& t = r.add_table(make_table("fp32 kernels against the fp64 reference", {{"kernel", ""},
                                                                                  {"implementation", ""},
                                                                                  {"max |diff|", ""},
                                                                                  {"relative RMS", ""},
                                                                                  {"within 1e-5", ""}}));
    auto within = [](const ErrorStats& e) { return std::string(e.rel_rms() < kKdaRelTarget ? "yes" : "no"); };
    const char* impl_name[2] = {"scalar", "SIMD"};  // the architecture is build-specific: timing texts
    for (int v = 0; v < 2; ++v) {
        const ErrorStats &a = m.recurrent[v], &b = m.chunked[v];
        t.add({std::string("recurrent"), std::string(impl_name[v]), a.max_abs, a.rel_rms(), within(a)});
        t.add({"chunked C=" + std::to_string(m.chunk), std::string(impl_name[v]), b.max_abs, b.rel_rms(),
               within(b)});
    }
}

// The chunked kernel is held to the same target at every chunk size of the sweep (C = 1, the recurrence,
// up to the whole run), which also bounds it against the recurrent kernel: both within the target of
// fp64, they are within twice it of each other (so no looser check of the two against each other).
void accuracy_checks(const KdaResult& m, Report& r) {
    const ErrorStats &rec = m.recurrent[1], &ch = m.chunked[1];
    const ErrorStats &rec_scalar = m.recurrent[0], &ch_scalar = m.chunked[0];
    r.check("recurrent_close_to_fp64", "fp32 recurrent kernels within 1e-5 relative RMS of fp64",
            rec.rel_rms() < kKdaRelTarget && rec_scalar.rel_rms() < kKdaRelTarget && rec.non_finite == 0,
            "SIMD " + format_sig(rec.rel_rms(), 3) + ", scalar " + format_sig(rec_scalar.rel_rms(), 3));
    size_t worst = 0;
    bool sweep_ok = !m.sweep_rel_err.empty();
    for (size_t i = 0; i < m.sweep_rel_err.size(); ++i) {
        sweep_ok = sweep_ok && m.sweep_rel_err[i] < kKdaRelTarget;
        if (!(m.sweep_rel_err[i] <= m.sweep_rel_err[worst])) worst = i;  // a NaN is the worst
    }
    const std::string worst_text =
        m.sweep_rel_err.empty()
            ? "no sweep"
            : format_sig(m.sweep_rel_err[worst], 3) + " at C = " + std::to_string(m.sweep_chunks[worst]);
    r.check(
        "chunked_close_to_fp64",
        "fp32 chunked kernels within 1e-5 relative RMS of fp64, at every chunk size of the sweep",
        ch.rel_rms() < kKdaRelTarget && ch_scalar.rel_rms() < kKdaRelTarget && ch.non_finite == 0 && sweep_ok,
        "SIMD " + format_sig(ch.rel_rms(), 3) + ", scalar " + format_sig(ch_scalar.rel_rms(), 3) +
            " (C = " + std::to_string(m.chunk) + "); sweep C = 1 ... " +
            std::to_string(m.sweep_chunks.empty() ? 0 : m.sweep_chunks.back()) + ": worst " + worst_text +
            "; max |chunked - recurrent| " + format_sig(m.chunked_vs_recurrent.max_abs, 3) +
            "; gates down to " + format_sig(m.gate_min, 4) + " per token, " +
            format_sig(double(m.gate_min) * std::min(m.chunk, m.tokens), 4) + " cumulative within a chunk");
}

void split_check(const KdaResult& m, Report& r) {
    const ErrorStats& e = m.split_vs_fp64;
    const std::string grid = m.chunk > 1 ? "off the chunk grid of C = " + std::to_string(m.chunk)
                                         : "C = 1: every token is a chunk";
    r.check("split_prefill_off_grid_close_to_fp64",
            "Prefill split in two calls off the chunk grid: within 1e-5 relative RMS of fp64",
            e.non_finite == 0 && e.rel_rms() < kKdaRelTarget,
            std::to_string(m.split_at) + " + " + std::to_string(m.tokens - m.split_at) + " tokens (" + grid +
                "; only the carried state links the two calls): " + format_sig(e.rel_rms(), 3) +
                ", one call " + format_sig(m.chunked[1].rel_rms(), 3));
}

void exactness_checks(const KdaResult& m, Report& r) {
    const std::string T = std::to_string(m.tokens);
    // Only a build with SIMD kernels has two kernels to compare: a scalar build (K3_SIMD=0) reports no
    // such check (under timing, so that the reports of all builds stay comparable).
    if (m.simd)
        r.build_check(
            "scalar_simd_same_bits", "Scalar and SIMD kernels give the same bits", m.scalar_simd_same_bits,
            "outputs and final states of the recurrent and the chunked kernel compared bit for bit, " +
                m.simd_arch + " against scalar");
    r.check("decode_steps_reproduce_prefill", "Decode steps reproduce the recurrent prefill bit for bit",
            m.decode_same_bits, T + " single-token steps vs one call over " + T + " tokens");
    if (m.split_at > 0) split_check(m, r);
    const ErrorStats& e = m.affine_vs_fp64;
    r.check("affine_map_gives_final_state", "Affine segment map: M S0 + B equals the final state",
            e.within() && e.rel_rms() < kKdaRelTarget,
            "relative RMS vs fp64 " + format_sig(e.rel_rms(), 3) + " (reference/kda.md §4.1)");
}

void timing_scalars(const KdaResult& m, Report& r) {
    using K = TimedKernel;
    const KdaThroughput& t = m.throughput;
    const char* unit = "head-tokens/s";
    r.timing_scalar("head_tokens_per_s_recurrent", "Recurrent (SIMD), prefill", unit,
                    t.of(K::recurrent_simd));
    r.timing_scalar("head_tokens_per_s_chunked", "Chunked (SIMD), C = " + std::to_string(m.chunk), unit,
                    t.of(K::chunked_simd));
    r.timing_scalar("head_tokens_per_s_decode", "Decode step (SIMD), one token per call", unit,
                    t.of(K::decode_simd));
    r.timing_scalar("head_tokens_per_s_decode_state_in_memory", "Decode step (SIMD), states from memory",
                    unit, t.of(K::decode_states_in_memory))
        .help = "Each step on the next of 64 MiB of layer states, so the state comes from memory, not cache.";
    r.timing_scalar("head_tokens_per_s_recurrent_scalar", "Recurrent (scalar)", unit,
                    t.of(K::recurrent_scalar));
    r.timing_scalar("head_tokens_per_s_chunked_scalar", "Chunked (scalar)", unit, t.of(K::chunked_scalar));
    r.timing_scalar("head_tokens_per_s_decode_scalar", "Decode step (scalar)", unit, t.of(K::decode_scalar));
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    r.timing_scalar("simd_speedup_recurrent", "SIMD / scalar, recurrent", "ratio",
                    ratio(t.of(K::recurrent_simd), t.of(K::recurrent_scalar)));
    r.timing_scalar("simd_speedup_chunked", "SIMD / scalar, chunked", "ratio",
                    ratio(t.of(K::chunked_simd), t.of(K::chunked_scalar)));
    r.timing_scalar("chunked_over_decode", "Chunked prefill / decode step", "ratio",
                    ratio(t.of(K::chunked_simd), t.of(K::decode_simd)));
    size_t best = 0;
    for (size_t i = 1; i < t.chunk_rate.size(); ++i)
        if (t.chunk_rate[i] > t.chunk_rate[best]) best = i;
    if (!t.chunks.empty())
        r.timing_scalar("best_chunk_tokens", "Fastest chunk size on this device (chunked, SIMD)", "tokens",
                        t.chunks[best]);
    r.timing_scalar("chunked_over_decode_state_in_memory", "Chunked prefill / decode with states from memory",
                    "ratio", ratio(t.of(K::chunked_simd), t.of(K::decode_states_in_memory)));
}

void timing_series(const KdaResult& m, Report& r) {
    const KdaThroughput& t = m.throughput;
    Series bars =
        make_series("throughput", "Throughput per kernel", "kernel", "head-tokens/s", "", "head-tokens/s");
    bars.style = SeriesStyle::bars;
    for (size_t k = 0; k < kTimedKernels; ++k) {
        if (!kernel_was_timed(m, TimedKernel(k))) continue;
        bars.add(double(bars.x.size()), t.rate[k]);
        bars.x_names.push_back(kTimedKernelNames[k]);
    }
    Series chunked = make_series("chunked (SIMD)", "Throughput against chunk size", "chunk size C (tokens)",
                                 "head-tokens/s", "tokens", "head-tokens/s");
    chunked.log_x = true;
    Series decode = chunked;
    decode.name = "decode step (SIMD), for comparison";
    for (size_t i = 0; i < t.chunks.size(); ++i) {
        chunked.add(t.chunks[i], t.chunk_rate[i]);
        decode.add(t.chunks[i], t.of(TimedKernel::decode_simd));
    }
    r.timing.series = {bars, chunked, decode};
}

void timing(const KdaResult& m, Report& r) {
    r.timing_text("simd_arch", "SIMD architecture", m.simd ? m.simd_arch : "scalar (K3_SIMD=0)");
    timing_scalars(m, r);
    timing_series(m, r);
    if (!m.simd)
        r.timing_text("simd_note", "Note",
                      "this build has no SIMD kernels (K3_SIMD=0): the SIMD figures are the scalar kernels");
}

void notes(const KdaResult& m, Report& r) {
    const kda::Shape& s = m.shape;
    r.notes.push_back(
        "Shape: " + std::to_string(s.H) + " q/k heads, " + std::to_string(s.HV) + " value heads, K = " +
        std::to_string(s.K) + ", V = " + std::to_string(s.V) + ", " + std::to_string(m.tokens) +
        " tokens; state layout [HV][K][V] fp32; scale = K^-0.5 applied to q inside the kernels.");
    r.notes.push_back("Throughput is measured on the first " + std::to_string(m.timed_tokens_simd) +
                      " tokens (SIMD) and " + std::to_string(m.timed_tokens_scalar) +
                      " tokens (scalar), best of repeated calls after a warm-up call. \"Scalar\" kernels are "
                      "compiled with auto-vectorisation disabled, so they show one float per instruction.");
}

}  // namespace

void report_kda(const KdaResult& m, Report& r) {
    error_scalars(m, r);
    work_scalars(m, r);
    digest(m, r);
    sweep_series(m, r);
    kernel_table(m, r);
    accuracy_checks(m, r);
    exactness_checks(m, r);
    timing(m, r);
    report_kda_roofline(m, r);
    notes(m, r);
}

}  // namespace k3
