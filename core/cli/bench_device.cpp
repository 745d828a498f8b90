// The device probes of core/kda/device.h as a benchmark stage: each probe runs in calls of a fixed size
// until its time is up, in interleaved rounds with the others, and its best call counts, as in module 1:
// a limit is what the device can do, and a shared machine only ever slows a call down. The rounds are
// split around the caller's kernels: a busy stretch during the first rounds alone then cannot lower a
// limit and so inflate the kernels' fractions of it (their rates are medians, which err low).
#include <algorithm>
#include <ctime>
#include <functional>
#include <string>

#include "core/base/clock.h"
#include "core/cli/bench.h"
#include "core/kda/layout.h"

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
// Milliseconds of CPU time of the node process (user + system).
EM_JS(double, k3_bench_cpu_ms, (), {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
});
#endif

namespace k3::cli {

double bench_cpu_ms() {
#ifdef __EMSCRIPTEN__
    return k3_bench_cpu_ms();
#else
    return double(std::clock()) * 1000.0 / CLOCKS_PER_SEC;
#endif
}

namespace {

using namespace k3::kda;

struct Probe {
    std::string name, unit;
    double bytes = 0;              // the buffer it streams (0: arithmetic)
    std::function<double()> call;  // one call; returns the flop or bytes it did
    std::vector<double> rates;
};

// Calls `call` at least twice and until `ms` have passed: the best call's amount per second, each call
// timed by the steady clock (the CPU-time clock ticks in microseconds, too coarse for one call; a call
// a busy machine slows down is simply not the best).
double best_rate_over(const std::function<double()>& call, double ms) {
    const Stopwatch total;
    double best = 0;
    for (int calls = 0; calls < 2 || total.ms() < ms; ++calls) {
        const Stopwatch sw;
        const double amount = call();
        const double t = sw.ms();
        if (t > 0) best = std::max(best, amount / (t * 1e-3));
    }
    return best;
}

// A buffer of `bytes` (whole 4 KiB pages) and the probes that stream it.
void add_stream_probes(std::vector<Probe>& probes, std::vector<FloatBuf>& bufs, const std::string& level,
                       double bytes) {
    bufs.emplace_back(size_t(bytes / 4096 + 0.5) * 1024, 1.0f);
    FloatBuf* b = &bufs.back();
    const int passes = probe_passes(bytes);
    probes.push_back({"device/read/" + level, "bytes/s", bytes,
                      [b, passes] { return probe_read(b->data(), b->size(), passes); }});
    probes.push_back({"device/rmw/" + level, "bytes/s", bytes,
                      [b, passes] { return probe_rmw(b->data(), b->size(), passes, 1.0f); }});
}

}  // namespace

DeviceLimits measure_device(BenchContext& ctx, double working_set_bytes, double weights_bytes,
                            const std::function<void()>& between) {
    std::vector<Probe> probes;
    probes.push_back({"device/mul_add", "flop/s", 0, [] { return probe_mul_add(kProbeIters); }});
    if (fma_enabled()) probes.push_back({"device/fma", "flop/s", 0, [] { return probe_fma(kProbeIters); }});
    std::vector<FloatBuf> bufs;
    bufs.reserve(kMemLevels);  // the probes hold pointers to the buffers
    DeviceLimits d;
    d.lanes = simd_width();
    d.level_bytes[size_t(MemLevel::working_set)] = working_set_bytes;
    d.level_bytes[size_t(MemLevel::weights)] = weights_bytes;
    for (size_t l = 0; l < kMemLevels; ++l)
        if (d.level_bytes[l] > 0) add_stream_probes(probes, bufs, level_key(MemLevel(l)), d.level_bytes[l]);
    const double ms = ctx.quick ? 5 : 40;
    auto measure = [ms](Probe& p, bool warm_up) {
        const double r = best_rate_over(p.call, ms);
        if (!warm_up) p.rates.push_back(r);
    };
    measure_interleaved(probes, ctx.quick ? 1 : 3, measure);
    between();
    measure_rounds(probes, ctx.quick ? 1 : 2, measure);  // warmed up before the kernels
    for (const Probe& p : probes) {
        const double v = *std::max_element(p.rates.begin(), p.rates.end());
        BenchResult r{p.name, {{"lanes", d.lanes}}, {{"clock", "wall, best call"}}, v, p.unit};
        if (p.bytes > 0) r.params.push_back({"buffer_bytes", p.bytes});
        ctx.add(r);
        if (p.name == "device/mul_add") d.mul_add_flops = v;
        if (p.name == "device/fma") d.fma_flops = v;
        for (size_t l = 0; l < kMemLevels; ++l) {
            if (p.name == std::string("device/read/") + level_key(MemLevel(l))) d.read_bytes[l] = v;
            if (p.name == std::string("device/rmw/") + level_key(MemLevel(l))) d.rmw_bytes[l] = v;
        }
    }
    return d;
}

void add_limit(BenchResult& r, const DeviceLimits& d, const KernelWork& w, double rate) {
    const KernelLimit k = roofline_limit(d, w);
    r.params.push_back({"limit", k.units_per_s});
    r.params.push_back({"fraction_of_limit", k.units_per_s > 0 ? rate / k.units_per_s : 0});
    r.params.push_back({"flop_per_byte", w.intensity()});
    r.text_params.push_back({"binding", k.binding});
}

}  // namespace k3::cli
