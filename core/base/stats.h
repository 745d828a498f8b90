// Small statistics shared by the benchmarks and measured timings.
#pragma once

#include <algorithm>
#include <vector>

namespace k3 {

// The median of `v` (0 when empty): the timing figure benchmarks report over repeated rounds.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace k3
