#include "core/cache/state_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/bytes.h"

namespace k3 {

const std::vector<std::string>& state_codec_ids() {
    static const std::vector<std::string> ids = {"fp32", "bf16", "fp16", "int8"};
    return ids;
}

const char* state_codec_id(StateCodec c) { return state_codec_ids()[size_t(c)].c_str(); }

std::optional<StateCodec> parse_state_codec(std::string_view s) {
    const auto& ids = state_codec_ids();
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == s) return StateCodec(i);
    return std::nullopt;
}

uint64_t encoded_bytes(StateCodec c, uint64_t rows, uint64_t cols) {
    switch (c) {
        case StateCodec::fp32: return rows * cols * 4;
        case StateCodec::bf16:
        case StateCodec::fp16: return rows * cols * 2;
        case StateCodec::int8: return rows * cols + rows * 4;
    }
    return 0;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
static float float_of(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t x = bits_of(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return sign | 0x7e00u;  // NaN
    if (x < 0x38800000u) {                       // below 2^-14: fp16 subnormal or zero
        if (x <= 0x33000000u) return sign;       // <= 2^-25 rounds to zero (2^-25 is a tie, to even)
        const uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;  // 14..24
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return uint16_t(sign | q);
    }
    const uint32_t r = x - 0x38000000u;  // rebias the exponent from 127 to 15
    uint32_t q = r >> 13;
    const uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
    if (q >= 0x7c00u) q = 0x7bffu;  // saturate at 65504 instead of overflowing to infinity
    return uint16_t(sign | q);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float v = float(m) * 0x1p-24f;  // exact
        return sign ? -v : v;
    }
    if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
    return float_of(sign | ((e + 112) << 23) | (m << 13));
}

static void put16(uint8_t* p, uint16_t v) { store_le(p, v, 2); }
static uint16_t get16(const uint8_t* p) { return uint16_t(load_le(p, 2)); }
static void put32(uint8_t* p, uint32_t v) { store_le(p, v, 4); }
static uint32_t get32(const uint8_t* p) { return uint32_t(load_le(p, 4)); }

static float row_max_abs(const float* x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}

void encode_state(StateCodec c, const float* x, size_t rows, size_t cols, uint8_t* out) {
    const size_t n = rows * cols;
    switch (c) {
        case StateCodec::fp32:
            for (size_t i = 0; i < n; ++i) put32(out + 4 * i, bits_of(x[i]));
            break;
        case StateCodec::bf16:
            for (size_t i = 0; i < n; ++i) put16(out + 2 * i, f32_to_bf16(x[i]));
            break;
        case StateCodec::fp16:
            for (size_t i = 0; i < n; ++i) put16(out + 2 * i, f32_to_f16(x[i]));
            break;
        case StateCodec::int8: {
            uint8_t* q = out + 4 * rows;
            for (size_t r = 0; r < rows; ++r) {
                const float* row = x + r * cols;
                const float m = row_max_abs(row, cols);
                const float scale = m / 127.0f;
                put32(out + 4 * r, bits_of(scale));
                const float inv = m > 0 ? 127.0f / m : 0.0f;
                for (size_t i = 0; i < cols; ++i) {
                    float v = row[i] * inv;
                    if (!(v == v)) v = 0;  // NaN (or an infinite row): nothing meaningful to keep
                    v = std::min(std::max(v, -127.0f), 127.0f);
                    const int k = int(v >= 0 ? v + 0.5f : v - 0.5f);  // half away from zero
                    q[r * cols + i] = uint8_t(int8_t(k));
                }
            }
            break;
        }
    }
}

void decode_state(StateCodec c, const uint8_t* in, size_t rows, size_t cols, float* out) {
    const size_t n = rows * cols;
    switch (c) {
        case StateCodec::fp32:
            for (size_t i = 0; i < n; ++i) out[i] = float_of(get32(in + 4 * i));
            break;
        case StateCodec::bf16:
            for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(get16(in + 2 * i));
            break;
        case StateCodec::fp16:
            for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(get16(in + 2 * i));
            break;
        case StateCodec::int8: {
            const uint8_t* q = in + 4 * rows;
            for (size_t r = 0; r < rows; ++r) {
                const float scale = float_of(get32(in + 4 * r));
                for (size_t i = 0; i < cols; ++i) out[r * cols + i] = float(int8_t(q[r * cols + i])) * scale;
            }
            break;
        }
    }
}

double codec_error_bound(StateCodec c, double x, double row_max) {
    const double a = std::fabs(x);
    switch (c) {
        case StateCodec::fp32: return 0;
        case StateCodec::bf16: return 0x1p-8 * a + 0x1p-134;
        case StateCodec::fp16: return a <= 65504.0 ? 0x1p-11 * a + 0x1p-25 : a - 65504.0;
        case StateCodec::int8: return row_max / 127.0 * 0.5 * (1.0 + 0x1p-13);
    }
    return 0;
}

const char* codec_bound_text(StateCodec c) {
    switch (c) {
        case StateCodec::fp32: return "exact";
        case StateCodec::bf16: return "2^-8 |x| + 2^-134";
        case StateCodec::fp16: return "2^-11 |x| + 2^-25 (|x| <= 65504; saturates beyond)";
        case StateCodec::int8: return "max|row| / 254 x (1 + 2^-13)";
    }
    return "";
}

// measure_codec's falsifier hook (state_codec.h).
static void flip_first_element_bit(StateCodec c, size_t rows, uint8_t* encoded) {
    switch (c) {
        case StateCodec::fp32: encoded[2] ^= 0x40; break;         // bit 22: the top mantissa bit
        case StateCodec::bf16: encoded[0] ^= 0x40; break;         // bit 6
        case StateCodec::fp16: encoded[1] ^= 0x02; break;         // bit 9
        case StateCodec::int8: encoded[4 * rows] ^= 0x40; break;  // after the row scales
    }
}

CodecError measure_codec(StateCodec c, const float* x, size_t rows, size_t cols, bool flip_encoded_bit) {
    CodecError e;
    e.bytes = encoded_bytes(c, rows, cols);
    std::vector<uint8_t> buf(e.bytes);
    std::vector<float> back(rows * cols);
    encode_state(c, x, rows, cols, buf.data());
    if (flip_encoded_bit && rows * cols > 0) flip_first_element_bit(c, rows, buf.data());
    decode_state(c, buf.data(), rows, cols, back.data());
    double se = 0, sx = 0;
    for (size_t r = 0; r < rows; ++r) {
        const double m = row_max_abs(x + r * cols, cols);
        for (size_t i = 0; i < cols; ++i) {
            const double v = x[r * cols + i], d = std::fabs(double(back[r * cols + i]) - v);
            const double b = codec_error_bound(c, v, m);
            e.max_abs = std::max(e.max_abs, d);
            e.max_bound_ratio = std::max(e.max_bound_ratio, b > 0 ? d / b : (d > 0 ? INFINITY : 0.0));
            se += d * d;
            sx += v * v;
        }
    }
    e.rel_rms = sx > 0 ? std::sqrt(se / sx) : 0;
    return e;
}

}  // namespace k3
