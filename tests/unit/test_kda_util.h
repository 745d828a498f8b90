// Helpers shared by the KDA tests (tests/unit/test_kda*.cpp).
#pragma once

#include <cstring>
#include <vector>

#include "core/kda/golden.h"
#include "core/kda/inputs.h"
#include "core/kda/layout.h"

namespace k3::kda::test {

inline std::vector<double> to_double(const float* x, size_t n) { return std::vector<double>(x, x + n); }
template <class Buf>
std::vector<double> to_double(const Buf& b) {
    return std::vector<double>(b.begin(), b.end());
}

// Relative RMS of x against a reference.
template <class X, class R>
double rel_err(const X& x, const R& ref) {
    std::vector<float> xf(x.begin(), x.end());
    return compare(xf.data(), std::vector<double>(ref.begin(), ref.end()).data(), xf.size()).rel_rms();
}

}  // namespace k3::kda::test
