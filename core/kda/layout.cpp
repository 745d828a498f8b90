#include "core/kda/layout.h"

#include <cmath>

#include "core/kda/simd.h"

namespace k3::kda {

std::string Shape::problem() const {
    auto s = [](int x) { return std::to_string(x); };
    if (H < 1) return "H (" + s(H) + ") must be at least 1";
    if (HV < 1) return "HV (" + s(HV) + ") must be at least 1";
    if (HV % H != 0) return "HV (" + s(HV) + ") must be a multiple of H (" + s(H) + ")";
    if (K < 1 || K > kMaxHeadDim) return "K (" + s(K) + ") must be in [1, " + s(kMaxHeadDim) + "]";
    if (V < 1 || V > kMaxHeadDim) return "V (" + s(V) + ") must be in [1, " + s(kMaxHeadDim) + "]";
    return {};
}

float default_scale(int K) { return float(1.0 / std::sqrt(double(K))); }

bool simd_enabled() { return K3_SIMD != 0; }

const char* simd_arch() {
#if K3_SIMD
    return simd::arch::name();
#else
    return "scalar";
#endif
}

int simd_width() {
#if K3_SIMD
    return simd::W;
#else
    return 1;
#endif
}

}  // namespace k3::kda
