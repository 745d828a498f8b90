// Work per head-token of the KDA kernels (kernel_work.h).
#include "core/kda/kernel_work.h"

#include <algorithm>

namespace k3::kda {

double chunk_unit_madds(const Shape& s, int n, bool map) {
    const double K = s.K, V = s.V, c = n;
    return c * c * (K + (K + V) / 2) + 3 * c * K * (V + (map ? K : 0)) + c * c * V / 2;
}

KernelWork decode_step_work(const Shape& s, MemLevel level) {
    const double K = s.K, V = s.V;
    return {.flop = 7 * K * V + 2 * V + K, .bytes = 8 * K * V, .level = level, .rmw = true};
}

KernelWork recurrent_work(const Shape& s, MemLevel level) {
    KernelWork w = decode_step_work(s, level);
    w.bytes = 2 * w.bytes / kRecurrentTokenBlock;
    return w;
}

KernelWork chunked_work(const Shape& s, int C, MemLevel level) {
    const int n = std::max(1, std::min(C, kMaxChunk));
    return {
        .flop = 2 * chunk_unit_madds(s, n) / n, .bytes = 8.0 * s.K * s.V / n, .level = level, .rmw = true};
}

}  // namespace k3::kda
