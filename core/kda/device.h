// The limits of the device the kernels run on, measured live on one core: arithmetic throughput at the
// build's SIMD width (separate multiplies and adds, which is all the bit-exact kernels may use, and
// fused multiply-adds where the build has them) and streaming bandwidth, read and read-modify-write,
// from a buffer that fits L1, one that fits L2, and 64 MiB, which no cache holds. The probes are plain
// loops a caller times (device_probe.cpp); `roofline_limit` turns the rates into the limit of a kernel
// with a given amount of arithmetic and traffic per unit of work (device_limits.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace k3::kda {

// ---------------------------------------------------------------------------------------------------------
// Probes: each returns the amount of work it did (flop or bytes), for the caller to divide by its time.

bool fma_enabled();  // the build has fused multiply-add kernels (native x86 with FMA3 or AVX-512)

// `iters` rounds of kMulAddChains independent chains x = x * m + a: a multiply feeding an add, rounded
// twice, the operation of every bit-exact kernel; 2 flop per chain, round and lane. Deterministic: the
// same bits in every build.
double probe_mul_add(long iters);
// A chain's step is a multiply and an add (5 cycles on Zen 5), so 4 operations per cycle take at least
// 10 chains; measured, the rate keeps rising up to 14-16. One register per chain, within the registers
// the build has: AVX-512 has 32 vector registers; AVX2, SSE and scalar x86-64 have 16 (14 chains and
// the two constants); V8 keeps 15 for WebAssembly code.
// Measured on the development machine (Zen 5), in Gflop/s: AVX2 111 with 14 chains, 61 with 16 (they
// spill); WebAssembly 52 with 12, 25 with 14. Independent multiply chains beside add chains, as before,
// need twice the registers: 38 with AVX2 and 42 in WebAssembly, far below the core's peak.
#if defined(__AVX512F__)
inline constexpr int kMulAddChains = 16;
#elif defined(__wasm__)
inline constexpr int kMulAddChains = 12;
#else
inline constexpr int kMulAddChains = 14;
#endif
// `iters` rounds of kFmaChains independent fused multiply-add chains: 2 flop per lane and instruction. 0
// (and no work) without FMA.
double probe_fma(long iters);
inline constexpr int kFmaChains = 12;  // and the two constants: 14 registers, which every FMA build has
// `passes` passes summing n floats of x (n a multiple of 64): bytes read.
double probe_read(const float* x, size_t n, int passes);
// `passes` passes of x[i] = c * x[i] over n floats (n a multiple of 64): bytes read plus bytes written.
double probe_rmw(float* x, size_t n, int passes, float c);
// `passes` passes of the decode step's work per state element over n floats (n a multiple of 64), without
// its order: every element is loaded once, goes through the step's 4 multiplies and 3 adds
// (p += ka x; y = a x + k u; o += q y) and is stored once, with no pass waiting on another. Not a
// kernel (its results mean nothing) but the ceiling of one: the fastest a step with this operation mix
// and the least traffic, one read and one write of the state, runs on this device. Returns flop, 7 per
// element and pass.
double probe_decode_mix(float* x, size_t n, int passes);
// The sum the read probe computed last (so that the compiler cannot drop its loads).
float probe_sink();

// One timed call of each probe: a few milliseconds natively, so that a browser's clock (coarsened to
// 0.1 ms without cross-origin isolation) still times it within a few percent.
inline constexpr long kProbeIters = 1L << 21;                   // arithmetic: about 540 Mflop
inline constexpr double kProbeCallBytes = 256.0 * 1024 * 1024;  // streaming: traffic of one call
inline int probe_passes(double buffer_bytes) {
    return buffer_bytes >= kProbeCallBytes ? 1 : int(kProbeCallBytes / buffer_bytes);
}

// ---------------------------------------------------------------------------------------------------------
// The measured limits and the roofline of a kernel.

// Where a kernel's traffic comes from. The first three are fixed sizes for every kernel;
// `working_set` is a buffer the size of the kernels' own working set (a layer's states) and `weights`
// one the size of a runnable model's weights: either may fall between two caches or into a cache
// shared with other cores. A level of size 0 is not measured.
enum class MemLevel { l1, l2, memory, working_set, weights };
inline constexpr size_t kMemLevels = 5;
// Bytes of the buffer the probes of L1, L2 and memory stream: 16 KiB fits every L1 of 32 KiB or more;
// 256 KiB fits every L2 of 512 KiB or more and no L1 we know of; 64 MiB is more than the caches of the
// machines we run on hold per core (module 1's states-in-memory decode cycles through as much).
inline constexpr double kL1ProbeBytes = 16.0 * 1024, kL2ProbeBytes = 256.0 * 1024;
inline constexpr double kMemoryProbeBytes = 64.0 * 1024 * 1024;
const char* level_name(MemLevel l);  // "L1", "L2", "memory", "working set", "weights"
const char* level_key(MemLevel l);   // "L1", "L2", "memory", "working_set", "weights" (report keys)

struct DeviceLimits {
    int lanes = 1;             // float lanes of the measured arithmetic
    double mul_add_flops = 0;  // flop/s, separate multiplies and adds
    double fma_flops = 0;      // flop/s with FMA; 0: the build has none
    std::array<double, kMemLevels> level_bytes = {kL1ProbeBytes, kL2ProbeBytes, kMemoryProbeBytes, 0, 0};
    std::array<double, kMemLevels> read_bytes{};  // bytes/s streaming reads (not measured for `state`)
    std::array<double, kMemLevels> rmw_bytes{};   // bytes/s read-modify-write (bytes read + written)
    bool measured() const { return mul_add_flops > 0; }
};

// What a kernel does per unit of work (a head-token, a token): arithmetic and memory traffic, the level
// the traffic comes from, and whether it may use FMA.
struct KernelWork {
    double flop = 0, bytes = 0;
    MemLevel level = MemLevel::memory;
    bool rmw = true;   // the traffic is read-modify-write (a state) rather than reads (weights, inputs)
    bool fma = false;  // the kernel fuses multiply-adds: its compute limit is the FMA throughput
    double intensity() const { return bytes > 0 ? flop / bytes : 0; }
};

struct KernelLimit {
    double units_per_s = 0;  // the roofline: min(compute, bandwidth) in units of work per second
    double compute = 0, bandwidth = 0;
    bool compute_binds = false;
    std::string binding;  // "multiply+add", "FMA", "L2 read-modify-write", ...
};
KernelLimit roofline_limit(const DeviceLimits& d, const KernelWork& w);

// The measured level whose buffer is nearest in size (by ratio) to a working set of `bytes`.
MemLevel level_for(const DeviceLimits& d, double bytes);

}  // namespace k3::kda
