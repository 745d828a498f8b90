// The roofline of device.h: a kernel's limit on this device is the lower of what its arithmetic allows
// at the measured throughput and what its traffic allows at the measured bandwidth of its level.
#include <algorithm>
#include <cmath>

#include "core/kda/device.h"

namespace k3::kda {

const char* level_name(MemLevel l) {
    switch (l) {
        case MemLevel::l1: return "L1";
        case MemLevel::l2: return "L2";
        case MemLevel::memory: return "memory";
        case MemLevel::working_set: return "working set";
        case MemLevel::weights: return "weights";
    }
    return "?";
}

const char* level_key(MemLevel l) { return l == MemLevel::working_set ? "working_set" : level_name(l); }

KernelLimit roofline_limit(const DeviceLimits& d, const KernelWork& w) {
    KernelLimit k;
    const bool fused = w.fma && d.fma_flops > 0;
    const double flops = fused ? d.fma_flops : d.mul_add_flops;
    const size_t l = size_t(w.level);
    const double bw = w.rmw ? d.rmw_bytes[l] : d.read_bytes[l];
    k.compute = w.flop > 0 && flops > 0 ? flops / w.flop : 0;
    k.bandwidth = w.bytes > 0 && bw > 0 ? bw / w.bytes : 0;
    k.compute_binds = k.bandwidth <= 0 || (k.compute > 0 && k.compute <= k.bandwidth);
    k.units_per_s = k.compute_binds ? k.compute : k.bandwidth;
    k.binding = k.compute_binds ? (fused ? "FMA" : "multiply+add")
                                : std::string(level_name(w.level)) + (w.rmw ? " read-modify-write" : " read");
    return k;
}

MemLevel level_for(const DeviceLimits& d, double bytes) {
    size_t best = size_t(MemLevel::memory);
    double gap = 1e300;
    for (size_t l = 0; l < kMemLevels; ++l) {
        if (d.level_bytes[l] <= 0 || d.rmw_bytes[l] <= 0) continue;
        const double g = std::fabs(std::log(d.level_bytes[l] / std::max(bytes, 1.0)));
        if (g < gap) gap = g, best = l;
    }
    return MemLevel(best);
}

}  // namespace k3::kda
