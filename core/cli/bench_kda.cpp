// `k3cli bench kda`: head-tokens/s of the scalar and SIMD recurrent and chunked KDA kernels, K = V = 128,
// H in {4, 16}: decode (one recurrent step per token over a long run, the state carried on) and prefill
// (T = 4096 tokens: chunked with C = 16, 32, 64, and token by token for comparison). Decode is measured
// twice: with one layer state that stays in cache (the kernel's compute bound) and cycling through
// 64 MiB of layer states (a model's 20 KDA layers times a batch of sequences: every step reads and
// writes its state from memory, as in serving). Variants are
// measured in interleaved rounds and the median of the rounds is reported, so that ratios come from
// one run on one machine state; the ratios the README's benchmark targets talk about are appended.
// Times are process CPU time (clock() natively, process.cpuUsage() under node), not wall time: on a
// shared machine a busy neighbour then does not distort the comparison of builds measured minutes
// apart. On an idle machine the two agree; every result carries "clock": "cpu".
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "core/base/clock.h"
#include "core/base/stats.h"
#include "core/cli/bench.h"
#include "core/kda/chunked.h"
#include "core/kda/device.h"
#include "core/kda/inputs.h"
#include "core/kda/kernel_work.h"
#include "core/kda/recurrent.h"

namespace k3::cli {

namespace {

using namespace k3::kda;

struct Layer {
    Shape s;
    TokenData x;
    FloatBuf S0, S, o;
    FloatBuf many;  // layer states totalling kManyBytes, for decode with the state in memory
    int n_many = 0;
};

constexpr double kManyBytes = 64.0 * 1024 * 1024;

struct KdaVariant {
    std::string name;  // "decode/recurrent/simd", "prefill/chunked/scalar", ...
    int H = 0, T = 0, C = 0;
    std::function<double()> run;  // one measured call; returns the head-tokens it processed
    std::vector<double> rates;    // head-tokens/s, one per round
};

const char* impl_name(Impl i) { return i == Impl::fma ? "fma" : i == Impl::simd ? "simd" : "scalar"; }

// The layers of both head counts, H = 4 and 16: Tpre random tokens, a start state S0, the state S
// the runs work on, and the many copies of S0 for decode with the state in memory.
std::map<int, Layer> make_layers(int Tpre) {
    std::map<int, Layer> layers;
    for (int H : {4, 16}) {
        Layer& L = layers[H];
        L.s = Shape{H, H, 128, 128};
        L.x = random_tokens(L.s, Tpre, 1000 + uint64_t(H));
        L.S0 = random_state(L.s, 2000 + uint64_t(H), 0.1f);
        L.S = L.S0;
        L.o.assign(size_t(Tpre) * L.s.v_row(), 0.0f);
        L.n_many = int(kManyBytes / (double(L.s.state_floats()) * 4.0));
        L.many.resize(size_t(L.n_many) * L.s.state_floats());
        for (int m = 0; m < L.n_many; ++m)
            std::memcpy(L.many.data() + size_t(m) * L.s.state_floats(), L.S0.data(), L.S0.size() * 4);
    }
    return layers;
}

// Decode: steps over a cycle of 64 distinct tokens until the time is up; the state carries on. With
// SIMD also the same steps each on the next of n_many states, so that every step goes to memory.
void add_decode(std::vector<KdaVariant>& vars, Layer* L, int H, Impl impl, float scale, double decode_ms) {
    vars.push_back({std::string("decode/recurrent/") + impl_name(impl), H, 1, 0, [L, impl, scale, decode_ms] {
                        const Deadline dl(decode_ms);
                        long n = 0;
                        do {
                            for (int r = 0; r < 8; ++r, ++n) {
                                const Tokens t = L->x.view().slice(L->s, int(n % 64), 1);
                                recurrent_step(L->s, L->S.data(), t.q, t.k, t.v, t.g, t.beta, scale,
                                               L->o.data(), impl);
                            }
                        } while (!dl.passed());
                        return double(n) * L->s.HV;
                    }});
    if (impl != Impl::scalar)  // the same steps, each on the next of n_many states
        vars.push_back({std::string("decode/recurrent/") + impl_name(impl) + "/state-in-memory", H, 1, 0,
                        [L, impl, scale, decode_ms] {
                            const Deadline dl(decode_ms);
                            long n = 0;
                            do {
                                for (int r = 0; r < 8; ++r, ++n) {
                                    const Tokens t = L->x.view().slice(L->s, int(n % 64), 1);
                                    float* S = L->many.data() + size_t(n % L->n_many) * L->s.state_floats();
                                    recurrent_step(L->s, S, t.q, t.k, t.v, t.g, t.beta, scale, L->o.data(),
                                                   impl);
                                }
                            } while (!dl.passed());
                            return double(n) * L->s.HV;
                        }});
}

// The ceiling of the decode step on this device (probe_decode_mix, device.h): its operation mix and
// least traffic with none of its order, over the same states as the step, in cache and in memory. Its
// rate in head-tokens/s says how much of a decode step's gap to the limit the device leaves no kernel.
void add_decode_ceiling(std::vector<KdaVariant>& vars, Layer* L, int H, double decode_ms) {
    for (bool in_memory : {false, true})
        vars.push_back({std::string("decode/ceiling/mix") + (in_memory ? "/state-in-memory" : ""), H, 1, 0,
                        [L, in_memory, decode_ms] {
                            // The probe multiplies by 1 and adds 0: the states stay as they are.
                            FloatBuf& x = in_memory ? L->many : L->S;
                            const Deadline dl(decode_ms);
                            double flop = 0;
                            do flop += probe_decode_mix(x.data(), x.size(), 1);
                            while (!dl.passed());
                            return flop / decode_step_work(L->s, MemLevel::memory).flop;
                        }});
}

// Prefill of Tpre tokens from the same start state: chunked (every C with SIMD, C = 64 with the slow
// scalar kernel), and token by token.
void add_prefill(std::vector<KdaVariant>& vars, Layer* L, int H, Impl impl, float scale, int Tpre) {
    for (int C : impl != Impl::scalar ? std::vector<int>{16, 32, 64} : std::vector<int>{64})
        vars.push_back({std::string("prefill/chunked/") + impl_name(impl), H, Tpre, C, [L, impl, scale, C] {
                            std::memcpy(L->S.data(), L->S0.data(), L->S0.size() * 4);
                            chunked(L->s, L->S.data(), L->x.view(), scale, C, L->o.data(), impl);
                            return double(L->x.T) * L->s.HV;
                        }});
    vars.push_back({std::string("prefill/recurrent/") + impl_name(impl), H, Tpre, 1, [L, impl, scale] {
                        std::memcpy(L->S.data(), L->S0.data(), L->S0.size() * 4);
                        recurrent(L->s, L->S.data(), L->x.view(), scale, L->o.data(), impl);
                        return double(L->x.T) * L->s.HV;
                    }});
}

// One warm-up of every variant (pages in buffers, settles the clock), then `rounds` rounds in which
// every variant takes its turn, timed in CPU time.
// One call; the warm-up pages in buffers and settles the clock.
void measure_kda_call(KdaVariant& v, bool warm_up) {
    const double t0 = bench_cpu_ms();
    const double ht = v.run();
    if (!warm_up) v.rates.push_back(ht / ((bench_cpu_ms() - t0) * 1e-3));
}

bool has(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// What the variant does per head-token, and where its state comes from: a layer state of H heads
// (the device's level nearest its size) or, cycling through 64 MiB of them, memory.
KernelWork work_of(const KdaVariant& v, const DeviceLimits& d) {
    const Shape s{v.H, v.H, 128, 128};
    const MemLevel state =
        has(v.name, "state-in-memory") ? MemLevel::memory : level_for(d, double(s.state_floats()) * 4.0);
    KernelWork w = v.name.rfind("decode", 0) == 0 ? decode_step_work(s, state)
                   : v.C > 1                      ? chunked_work(s, v.C, state)
                                                  : recurrent_work(s, state);
    w.fma = has(v.name, "/fma");
    return w;
}

// One result per variant: its median head-tokens/s, the parameters that tell it apart, and the
// device's limit for it with the fraction reached.
void add_rates(BenchContext& ctx, const std::vector<KdaVariant>& vars, int rounds, const DeviceLimits& d) {
    for (const auto& v : vars) {
        BenchResult r{v.name,
                      {{"H", v.H}, {"K", 128}, {"V", 128}},
                      {{"clock", "cpu"}},
                      median(v.rates),
                      "head-tokens/s"};
        if (v.T > 1) r.params.push_back({"T", v.T});
        if (v.name.find("state-in-memory") != std::string::npos)
            r.params.push_back({"states_mib", kManyBytes / 1048576});
        if (v.name.rfind("prefill/chunked", 0) == 0) r.params.push_back({"C", v.C});
        r.params.push_back({"rounds", rounds});
        add_limit(r, d, work_of(v, d), r.value);
        ctx.add(r);
    }
}

// The median rate of a variant, 0 if it did not run.
double rate_of(const std::vector<KdaVariant>& vars, const std::string& name, int H, int C) {
    for (const auto& v : vars)
        if (v.name == name && v.H == H && v.C == C) return median(v.rates);
    return 0;
}

// The ratios the README's benchmark targets talk about, per H, with the best kernel there is.
void add_ratios(BenchContext& ctx, const std::vector<KdaVariant>& vars) {
    auto find = [&](const std::string& name, int H, int C) { return rate_of(vars, name, H, C); };
    for (int H : {4, 16}) {
        const std::string best = simd_enabled() ? "simd" : "scalar";
        auto ratio = [&](const std::string& name, double num, double den) {
            ctx.add({name, {{"H", H}, {"K", 128}, {"V", 128}}, {}, den > 0 ? num / den : 0, "ratio"});
        };
        if (simd_enabled()) {
            ratio("ratio/decode_simd_over_scalar", find("decode/recurrent/simd", H, 0),
                  find("decode/recurrent/scalar", H, 0));
            ratio("ratio/prefill_chunked64_simd_over_scalar", find("prefill/chunked/simd", H, 64),
                  find("prefill/chunked/scalar", H, 64));
        }
        double best_chunked = 0;
        for (int C : {16, 32, 64})
            best_chunked = std::max(best_chunked, find("prefill/chunked/" + best, H, C));
        ratio("ratio/prefill_chunked_best_over_decode", best_chunked, find("decode/recurrent/" + best, H, 0));
        ratio("ratio/prefill_chunked64_over_decode", find("prefill/chunked/" + best, H, 64),
              find("decode/recurrent/" + best, H, 0));
        if (simd_enabled())
            ratio("ratio/prefill_chunked_best_over_decode_state_in_memory", best_chunked,
                  find("decode/recurrent/simd/state-in-memory", H, 0));
        if (fma_enabled()) {  // what bit-exactness costs: the FMA variants over the exact kernels
            double best_fma = 0;
            for (int C : {16, 32, 64}) best_fma = std::max(best_fma, find("prefill/chunked/fma", H, C));
            ratio("ratio/decode_fma_over_simd", find("decode/recurrent/fma", H, 0),
                  find("decode/recurrent/simd", H, 0));
            ratio("ratio/decode_state_in_memory_fma_over_simd",
                  find("decode/recurrent/fma/state-in-memory", H, 0),
                  find("decode/recurrent/simd/state-in-memory", H, 0));
            ratio("ratio/prefill_chunked_best_fma_over_simd", best_fma, best_chunked);
        }
    }
}

void bench_kda(BenchContext& ctx) {
    ctx.arch = simd_arch();
    const bool quick = ctx.quick;
    const int Tpre = quick ? 256 : 4096;
    const int rounds = quick ? 1 : 3;
    const double decode_ms = quick ? 15 : 300;  // per decode measurement
    std::vector<Impl> impls = {Impl::scalar};
    if (simd_enabled()) impls.push_back(Impl::simd);
    if (fma_enabled()) impls.push_back(Impl::fma);  // not bit-exact: what bit-exactness costs
    const float scale = default_scale(128);

    std::map<int, Layer> layers = make_layers(Tpre);
    std::vector<KdaVariant> vars;
    for (int H : {4, 16})
        for (Impl impl : impls) {
            add_decode(vars, &layers[H], H, impl, scale, decode_ms);
            add_prefill(vars, &layers[H], H, impl, scale, Tpre);
        }
    for (int H : {4, 16}) add_decode_ceiling(vars, &layers[H], H, decode_ms);
    // The device around the kernels, with a state-sized buffer of the larger layer (the smaller one,
    // 256 KiB, is the L2 probe's buffer).
    const DeviceLimits device = measure_device(ctx, double(layers[16].s.state_floats()) * 4.0, 0,
                                               [&] { measure_interleaved(vars, rounds, measure_kda_call); });
    add_rates(ctx, vars, rounds, device);
    add_ratios(ctx, vars);
}

}  // namespace

K3_REGISTER_BENCH("kda", "KDA kernels: scalar vs SIMD, decode and prefill, head-tokens/s", bench_kda);

}  // namespace k3::cli
