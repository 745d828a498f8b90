// Module 1 `kda`: what a run costs before it starts (Module::estimate), counted from the passes the run
// makes over its T x HV head-tokens (kda_run.cpp): the fp64 reference and the scalar kernels, the SIMD
// kernels, the chunk-size sweep, the decode, split and affine checks, and the timed calls.
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/kda/chunked.h"
#include "core/kda/device.h"
#include "core/modules/kda/kda.h"

namespace k3 {

namespace {

// Native costs, fitted (least squares on relative error) to `/usr/bin/time -f '%U %S'` of `k3cli run
// kda` at 46 shapes: T = 1 ... 65,536, HV = 1 ... 512, K and V = 4 ... 256 apart and together, C = 1 ...
// 1,024 (native, AVX-512, a shared 2-core machine). The fit is within 0.45 ... 1.4 times every measured
// run (the largest C and the narrowest K or V are under it), so the margin takes 2.5 times it.
constexpr double kSimdOpSeconds = 0.037e-9;    // a multiply-add of a SIMD kernel
constexpr double kScalarOpSeconds = 0.57e-9;   // one of a scalar kernel or of the fp64 reference
constexpr double kHeadTokenSeconds = 13e-6;    // per head-token and pass set: inputs, gates, checks
constexpr double kRowSeconds = 6e-9;           // per head-token and element of its K + V rows
constexpr double kKeySquareSeconds = 1.6e-9;   // per head-token and element of the affine map's K x K
constexpr double kTimedKernelSeconds = 12e-3;  // a timed kernel's floor: an untimed call, then 6 ms
constexpr double kMargin = 2.5;
// The runnable model (measured as above, k3-tiny and small): making its weights and timing its prefill
// and decode, per parameter, and what it holds (bf16 weights, their fp32 norms and the run's buffers).
constexpr double kModelParamSeconds = 50e-9, kModelParamBytes = 4.5;

// Multiply-adds per head-token of the recurrence (4 K V, core/kda/recurrent.h) and of the chunked
// kernel at chunk size c (core/kda/chunked.h: 3 K V, and c (1.5 K + V) for the pair matrices, plus 16
// per pair for their set-up as kda-check counts it; the pair loops slow down as the [c][c] matrices
// outgrow the caches).
double recurrent_ops(const kda::Shape& s) { return 4.0 * s.K * s.V; }
double chunked_ops(const kda::Shape& s, int c, int T) {
    const double n = std::min(c, T);
    return 3.0 * s.K * s.V + n * (1.5 * s.K + s.V + 16) * std::max(n, 64.0) / 128.0;
}

struct KdaWork {
    double head_tokens = 0, simd_ops = 0, scalar_ops = 0, timed_kernels = 0;
};

KdaWork kda_work(const KdaParams& p) {
    const kda::Shape s = kda_shape(p);
    const KdaPlan plan = kda_plan(p);
    const int T = p.tokens, C = p.chunk;
    const double HT = double(T) * s.HV, rec = recurrent_ops(s), chunk = chunked_ops(s, C, T);
    KdaWork w;
    w.head_tokens = HT;
    // Over all tokens: the recurrent and chunked kernels (twice with FMA), the decode and split
    // checks, the sweep.
    const double variants = kda::fma_enabled() ? 2 : 1;
    w.simd_ops = HT * (2 * rec + 2 * chunk + (variants - 1) * (rec + chunk));
    for (int c : plan.sweep_chunks) w.simd_ops += HT * chunked_ops(s, c, T);
    // The timed calls: an untimed one and at least three timed ones on the timed prefix.
    double timed = variants * (2 * rec + chunk);
    for (int c : plan.timed_chunks) timed += chunked_ops(s, c, T);
    w.simd_ops += 4.0 * plan.timed_tokens_simd * s.HV * timed;
    // The fp64 reference (as a scalar pass), the scalar kernels, their timed calls.
    w.scalar_ops = HT * (2 * rec + chunk) + 4.0 * plan.timed_tokens_scalar * s.HV * (2 * rec + chunk);
    // The timed kernels and the device probes (each timed like one): arithmetic, FMA, and read and
    // read-modify-write of every level.
    w.timed_kernels = double(kTimedKernels + plan.timed_chunks.size() + 2 + 2 * kda::kMemLevels);
    return w;
}

// Bytes the run holds at its peak: inputs, fp64 reference outputs and state, ten fp32 output arrays
// and states (eight did not cover T = 16,384), two of the chunked kernel's scratch (one did not cover
// C = 1,024), the states the in-memory decode cycles through, the device probes' buffers (L1, L2 and a
// state), and the process (16 MiB; 7 measured).
double kda_bytes(const KdaParams& p) {
    const kda::Shape s = kda_shape(p);
    const double T = p.tokens;
    const double in = T * (2.0 * double(s.qk_row()) + double(s.v_row()) + double(s.g_row()) + s.HV);
    const double out = T * double(s.v_row()), st = double(s.state_floats());
    const double scratch = double(kda::chunked_scratch_floats(s, p.chunk));
    const double many = std::max(kKdaManyStateBytes, 4.0 * st);
    const double probes = kda::kL1ProbeBytes + kda::kL2ProbeBytes + 4.0 * st + 4096;
    return 16.0 * 1024 * 1024 + 4.0 * in + 8.0 * (out + st) +
           4.0 * (10.0 * out + 10.0 * st + double(s.HV) * s.K * s.K) + 8.0 * scratch + many + probes;
}

}  // namespace

RunEstimate kda_estimate(const KdaParams& p) {
    const kda::Shape s = kda_shape(p);
    const KdaWork w = kda_work(p);
    const double seconds =
        kSimdOpSeconds * w.simd_ops + kScalarOpSeconds * w.scalar_ops +
        w.head_tokens *
            (kHeadTokenSeconds + kRowSeconds * (s.K + s.V) + kKeySquareSeconds * double(s.K) * s.K) +
        kTimedKernelSeconds * w.timed_kernels + kModelParamSeconds * kda_model_parameters(p.model);
    return {.seconds = kMargin * seconds,
            .bytes = kda_bytes(p) + kModelParamBytes * kda_model_parameters(p.model),
            .counted = format_si(w.head_tokens) + " head-tokens: " + format_si(w.simd_ops) +
                       " multiply-adds in the SIMD kernels, " + format_si(w.scalar_ops) +
                       " in the scalar ones and the fp64 reference",
            .on = &p.tokens};
}

}  // namespace k3
