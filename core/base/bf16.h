// bf16 <-> fp32, shared by the model's weights and the checkpoint codecs. Rounding is to nearest,
// ties to even; a NaN stays a NaN (quiet).
#pragma once

#include <cstdint>
#include <cstring>

namespace k3 {

inline uint16_t f32_to_bf16(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
    return uint16_t((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t h) {
    const uint32_t b = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

}  // namespace k3
