// Benchmarks behind `k3cli bench NAME [--json]`. A benchmark registers itself from its own file:
//     K3_REGISTER_BENCH("kda", "KDA kernels: scalar vs SIMD, decode and prefill", bench_kda);
// and appends results; the command prints them in this schema:
//   {"bench": NAME, "build": "native" | "wasm-simd" | "wasm-scalar", "arch": "...",
//    "results": [{"name": "...", "params": {...}, "value": number, "unit": "..."}]}
// Report ratios measured side by side in one run; absolute times on shared machines are noisy.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/kda/device.h"

namespace k3::cli {

struct BenchResult {
    std::string name;
    std::vector<std::pair<std::string, double>> params;  // numeric parameters
    std::vector<std::pair<std::string, std::string>> text_params;
    double value = 0;
    std::string unit;
};

struct BenchContext {
    std::vector<BenchResult> results;
    std::string arch;    // SIMD architecture name; set by the benchmark if it knows better
    bool quick = false;  // --quick: fewer repetitions (used by the tests to smoke-test benches)
    void add(BenchResult r) { results.push_back(std::move(r)); }
};

using BenchFn = void (*)(BenchContext&);

// `rounds` rounds in which each variant takes its turn: slow drifts of a shared machine then touch every
// variant alike. `measure(v, warm_up)` makes one call of `v` and, unless it is the warm-up, records it.
template <class Variant, class Measure>
void measure_rounds(std::vector<Variant>& vars, int rounds, Measure measure) {
    for (int round = 0; round < rounds; ++round)
        for (auto& v : vars) measure(v, false);
}
// One warm-up call of every variant, then measure_rounds.
template <class Variant, class Measure>
void measure_interleaved(std::vector<Variant>& vars, int rounds, Measure measure) {
    for (auto& v : vars) measure(v, true);
    measure_rounds(vars, rounds, measure);
}

// Milliseconds of CPU time of the process (clock() natively, process.cpuUsage() under node): on a
// shared machine a busy neighbour then does not distort comparisons of runs minutes apart.
double bench_cpu_ms();

// The device's limits measured in this run (bench_device.cpp): multiply+add and FMA throughput, read
// and read-modify-write bandwidth of L1, L2 and memory, and of buffers of `working_set_bytes` (the layer
// state of the kernels) and `weights_bytes` (a model's weights), each unless 0, measured before and
// after `between` (the caller's kernel rounds). Appends each figure as a result ("device/...") and
// returns them, for the kernels' fractions of their limits.
kda::DeviceLimits measure_device(BenchContext& ctx, double working_set_bytes, double weights_bytes,
                                 const std::function<void()>& between);
// The roofline limit of a kernel measured at `rate` units/s, appended to its result as params
// "limit" and "fraction_of_limit" and the text param "binding".
void add_limit(BenchResult& r, const kda::DeviceLimits& d, const kda::KernelWork& w, double rate);

struct BenchRegistrar {
    BenchRegistrar(const char* name, const char* help, BenchFn fn);
};

#define K3_REGISTER_BENCH(name, help, fn) \
    static const ::k3::cli::BenchRegistrar k3_bench_registrar_##fn(name, help, fn)

}  // namespace k3::cli
