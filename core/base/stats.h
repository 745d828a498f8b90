// Small statistics shared by the benchmarks and measured timings.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace k3 {

// The median of `v` (0 when empty): the timing figure benchmarks report over repeated rounds.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Relative RMS error of x against ref (absolute RMS when ref is all zeros), in double.
template <class X, class R>
double rel_rms(const X* x, const R* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = double(x[i]) - double(ref[i]);
        num += d * d;
        den += double(ref[i]) * double(ref[i]);
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace k3
