// Module 1 `kda`: the kernels against the device they ran on. The device's limits measured in the run
// (core/kda/device.h), each timed kernel's arithmetic intensity and the limit that binds it, the
// roofline chart, and the FMA variants beside the exact kernels: what bit-exactness costs here. All of
// it is measured, so all of it goes under `timing` (and the FMA check is a build check: only builds
// with FMA have it).
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/kda/kernel_work.h"
#include "core/model/token_work.h"
#include "core/modules/kda/kda.h"

namespace k3 {

namespace {

using namespace k3::kda;

// What one head-token of a timed kernel does, and where its state comes from: a buffer of the layer
// state's size (measured as such), or memory for the decode that cycles through 64 MiB of states.
KernelWork work_of(const KdaResult& m, TimedKernel k) {
    using K = TimedKernel;
    const Shape& s = m.shape;
    const int C = std::max(1, std::min(m.chunk, m.timed_tokens_simd));
    switch (k) {
        case K::decode_simd:
        case K::decode_scalar: return decode_step_work(s, MemLevel::working_set);
        case K::decode_states_in_memory: return decode_step_work(s, MemLevel::memory);
        case K::recurrent_simd:
        case K::recurrent_scalar: return recurrent_work(s, MemLevel::working_set);
        case K::chunked_simd:
        case K::chunked_scalar: return chunked_work(s, C, MemLevel::working_set);
        case K::decode_fma: return fused(decode_step_work(s, MemLevel::working_set));
        case K::chunked_fma: return fused(chunked_work(s, C, MemLevel::working_set));
    }
    return {};
}

// The levels as the report names them: the two sized by this run say what they are the size of.
std::string level_label(MemLevel l) {
    if (l == MemLevel::working_set) return "the layer state's size";
    if (l == MemLevel::weights) return "the model's weights' size";
    return level_name(l);
}

void device_scalars(const DeviceLimits& d, Report& r) {
    const std::string lanes = std::to_string(d.lanes) + (d.lanes == 1 ? " float" : " floats");
    r.timing_scalar("device_mul_add_flops", "This core: multiply + add (" + lanes + ")", "flop/s",
                    d.mul_add_flops)
        .help =
        "Independent chains of a multiply feeding an add (x = x m + a, rounded twice) at the build's "
        "vector width: the peak of the bit-exact kernels, which never fuse a multiply and an add.";
    if (d.fma_flops > 0)
        r.timing_scalar("device_fma_flops", "This core: fused multiply-add (" + lanes + ")", "flop/s",
                        d.fma_flops)
            .help = "Independent FMA chains (2 flop each): the peak of the FMA variants.";
    for (size_t l = 0; l < kMemLevels; ++l) {
        const MemLevel level = MemLevel(l);
        if (d.level_bytes[l] <= 0) continue;
        const std::string key = level_key(level);
        const std::string name = level_label(level);
        const std::string size = format_bytes(d.level_bytes[l]);
        r.timing_scalar("device_read_" + key, "This core: " + name + " read, " + size, "B/s",
                        d.read_bytes[l]);
        r.timing_scalar("device_rmw_" + key, "This core: " + name + " read-modify-write, " + size, "B/s",
                        d.rmw_bytes[l])
            .help = "Bytes read plus bytes written per second, streaming a buffer of " + size + " in place.";
    }
}

// One row per timed kernel: its rate, intensity, limit, what binds it and the fraction it reaches.
void limits_table(const KdaResult& m, Report& r) {
    Table& t = r.timing.tables.emplace_back(
        make_table("Kernels against this device's limits", {{"kernel", ""},
                                                            {"head-tokens/s", "head-tokens/s"},
                                                            {"flop per byte", ""},
                                                            {"limit", "head-tokens/s"},
                                                            {"bound by", ""},
                                                            {"of the limit", "fraction"}}));
    for (size_t i = 0; i < kTimedKernels; ++i) {
        const TimedKernel k = TimedKernel(i);
        if (!kernel_was_timed(m, k)) continue;
        const KernelWork w = work_of(m, k);
        const KernelLimit lim = roofline_limit(m.device, w);
        const double rate = m.throughput.of(k), frac = lim.units_per_s > 0 ? rate / lim.units_per_s : 0;
        t.add({std::string(timed_kernel_name(k)), rate, w.intensity(), lim.units_per_s, lim.binding, frac});
        r.timing_scalar(std::string("fraction_of_limit_") + timed_kernel_key(k),
                        std::string(timed_kernel_name(k)) + ": of its limit (" + lim.binding + ")",
                        "fraction", frac);
    }
}

// A token of the runnable model's prefill or decode, its weights streamed from a buffer of their size.
KernelWork model_work(const KdaResult& m, bool prefill) {
    const KdaModelRates& mr = m.model;
    const MemLevel level = m.device.level_bytes[size_t(MemLevel::weights)] > 0
                               ? MemLevel::weights
                               : level_for(m.device, mr.decode_work.weight_bytes);
    return prefill ? model::prefill_token_work(mr.prefill_work, kKdaModelPrefill, level)
                   : model::decode_token_work(mr.decode_work, level);
}

// The runnable model's prefill and decode against the same limits: the whole model, projections,
// KDA and MLA together, per token.
void model_figures(const KdaResult& m, Report& r) {
    const KdaModelRates& mr = m.model;
    if (mr.preset.empty()) return;
    if (!mr.error.empty()) {
        r.timing_text("model_error", "Runnable model", mr.preset + " could not run: " + mr.error);
        return;
    }
    Table& t = r.timing.tables.emplace_back(make_table(
        "The runnable model " + mr.preset + " against this device's limits", {{"step", ""},
                                                                              {"tokens/s", "tokens/s"},
                                                                              {"flop per byte", ""},
                                                                              {"limit", "tokens/s"},
                                                                              {"bound by", ""},
                                                                              {"of the limit", "fraction"}}));
    const struct {
        const char* key;
        std::string name;
        double rate;
        KernelWork work;
    } steps[] = {
        {"prefill", "prefill, " + std::to_string(kKdaModelPrefill) + " tokens", mr.prefill,
         model_work(m, true)},
        {"decode", "decode, context " + std::to_string(kKdaModelContext), mr.decode, model_work(m, false)},
    };
    for (const auto& st : steps) {
        const KernelLimit lim = roofline_limit(m.device, st.work);
        const double frac = lim.units_per_s > 0 ? st.rate / lim.units_per_s : 0;
        t.add({st.name, st.rate, st.work.intensity(), lim.units_per_s, lim.binding, frac});
        r.timing_scalar(std::string("model_") + st.key + "_tokens_per_s",
                        mr.preset + " " + st.name + " (whole model)", "tokens/s", st.rate);
        r.timing_scalar(std::string("fraction_of_limit_model_") + st.key,
                        mr.preset + " " + st.key + ": of its limit (" + lim.binding + ")", "fraction", frac);
    }
}

// The roofline: flop/s against flop per byte, log-log. Each memory level is a line that rises with the
// intensity until it meets the multiply+add ceiling; each SIMD kernel is a point.
void roofline_series(const KdaResult& m, Report& r) {
    const DeviceLimits& d = m.device;
    auto series = [](std::string name, SeriesStyle style) {
        Series s = make_series(std::move(name), "Roofline of this device (one core)", "flop per byte",
                               "flop/s", "", "flop/s");
        s.log_x = s.log_y = true;
        s.style = style;
        return s;
    };
    const double lo = 1.0 / 16, hi = 512;
    Series compute = series("multiply + add peak", SeriesStyle::line);
    compute.add(lo, d.mul_add_flops).add(hi, d.mul_add_flops);
    r.timing.series.push_back(compute);
    if (d.fma_flops > 0) {
        Series fma = series("FMA peak", SeriesStyle::line);
        fma.add(lo, d.fma_flops).add(hi, d.fma_flops);
        r.timing.series.push_back(fma);
    }
    for (size_t l = 0; l < kMemLevels; ++l) {
        // The states are read and written in place; the weights are only read.
        const bool read = MemLevel(l) == MemLevel::weights;
        const double bw = read ? d.read_bytes[l] : d.rmw_bytes[l];
        // L1 is left out of the chart (none of these kernels streams from it; the figures list it).
        if (bw <= 0 || d.level_bytes[l] <= 0 || MemLevel(l) == MemLevel::l1) continue;
        Series s = series(level_label(MemLevel(l)) + (read ? " read, " : " read-modify-write, ") +
                              format_bytes(d.level_bytes[l]),
                          SeriesStyle::line);
        const double ridge = std::clamp(d.mul_add_flops / bw, lo, hi);
        s.add(lo, bw * lo).add(ridge, bw * ridge).add(hi, bw * ridge);
        r.timing.series.push_back(s);
    }
    // The kernels as three series of named points: the exact SIMD kernels, the FMA variants, the model.
    Series exact = series("exact kernels (SIMD)", SeriesStyle::points);
    Series fused_kernels = series("FMA variants (not bit-exact)", SeriesStyle::points);
    for (TimedKernel k :
         {TimedKernel::decode_simd, TimedKernel::decode_states_in_memory, TimedKernel::recurrent_simd,
          TimedKernel::chunked_simd, TimedKernel::decode_fma, TimedKernel::chunked_fma}) {
        if (!kernel_was_timed(m, k)) continue;
        const KernelWork w = work_of(m, k);
        Series& to = is_fma_kernel(k) ? fused_kernels : exact;
        to.add(w.intensity(), m.throughput.of(k) * w.flop);
        to.x_names.push_back(timed_kernel_name(k));
    }
    r.timing.series.push_back(exact);
    if (!fused_kernels.x.empty()) r.timing.series.push_back(fused_kernels);
    const KdaModelRates& mr = m.model;
    if (!mr.preset.empty() && mr.error.empty()) {
        Series model = series(mr.preset + " (whole model)", SeriesStyle::points);
        for (bool prefill : {true, false}) {
            const KernelWork w = model_work(m, prefill);
            model.add(w.intensity(), (prefill ? mr.prefill : mr.decode) * w.flop);
            model.x_names.push_back(mr.preset + (prefill ? " prefill" : " decode"));
        }
        r.timing.series.push_back(model);
    }
}

// The FMA variants: within the same tolerance of fp64 as the exact kernels, their distance from the
// exact results, and their speed against the exact kernels' on this device.
void fma_figures(const KdaResult& m, Report& r) {
    if (!m.fma) return;
    const ErrorStats &rec = m.fma_recurrent, &ch = m.fma_chunked;
    r.build_check("fma_close_to_fp64", "FMA variants (not bit-exact) within 1e-5 relative RMS of fp64",
                  rec.non_finite == 0 && ch.non_finite == 0 && rec.rel_rms() < kKdaRelTarget &&
                      ch.rel_rms() < kKdaRelTarget,
                  "recurrent " + format_sig(rec.rel_rms(), 3) + ", chunked " + format_sig(ch.rel_rms(), 3) +
                      " (exact SIMD kernels: " + format_sig(m.recurrent[1].rel_rms(), 3) + ", " +
                      format_sig(m.chunked[1].rel_rms(), 3) + "); max |FMA - exact| " +
                      format_sig(m.fma_max_diff, 3));
    r.timing_scalar("fma_max_diff", "FMA variants: max |FMA - exact|", "", m.fma_max_diff);
    const KdaThroughput& t = m.throughput;
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    using K = TimedKernel;
    r.timing_scalar("fma_over_exact_decode", "FMA / exact, decode step (what bit-exactness costs)", "ratio",
                    ratio(t.of(K::decode_fma), t.of(K::decode_simd)));
    r.timing_scalar("fma_over_exact_chunked", "FMA / exact, chunked (what bit-exactness costs)", "ratio",
                    ratio(t.of(K::chunked_fma), t.of(K::chunked_simd)));
}

}  // namespace

void report_kda_roofline(const KdaResult& m, Report& r) {
    if (!m.device.measured()) return;
    device_scalars(m.device, r);
    limits_table(m, r);
    model_figures(m, r);
    roofline_series(m, r);
    fma_figures(m, r);
}

}  // namespace k3
