// Checkpoint codecs: how a stored state checkpoint is encoded. Plain functions over fp32 matrices
// (a KDA state is [K][V] per head, one row per key channel). fp32 is exact; bf16 and fp16 round to
// nearest even; int8 keeps one fp32 scale per row (max |x| / 127) and rounds half away from zero.
// Every codec states a per-element error bound that the tests and module 5 verify on data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/bf16.h"

namespace k3 {

enum class StateCodec : uint8_t { fp32, bf16, fp16, int8 };

const std::vector<std::string>& state_codec_ids();  // "fp32", "bf16", "fp16", "int8"
const char* state_codec_id(StateCodec c);
std::optional<StateCodec> parse_state_codec(std::string_view s);

// Bytes of a rows x cols fp32 matrix once encoded (int8: plus one fp32 scale per row).
uint64_t encoded_bytes(StateCodec c, uint64_t rows, uint64_t cols);
// out must hold encoded_bytes(c, rows, cols) bytes; little-endian on every build.
void encode_state(StateCodec c, const float* x, size_t rows, size_t cols, uint8_t* out);
void decode_state(StateCodec c, const uint8_t* in, size_t rows, size_t cols, float* out);

// The stated bound on |decode(encode(x)) - x| for one element x whose row has max |x| = row_max:
//   fp32: 0;  bf16: 2^-8 |x| + 2^-134;  fp16: 2^-11 |x| + 2^-25 for |x| <= 65504, beyond that the
//   value saturates to +-65504 (bound |x| - 65504);  int8: (row_max / 127) / 2 * (1 + 2^-13).
double codec_error_bound(StateCodec c, double x, double row_max);
// The same bound as text for tables.
const char* codec_bound_text(StateCodec c);

// Scalar conversions (exposed for tests).
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// Error of one codec measured on a matrix: the largest ratio error / stated bound (<= 1 when the
// bound holds), the largest absolute error and the relative RMS error against the fp64 values.
// flip_encoded_bit is a falsifier hook (k3cli audit-checks): the top mantissa bit of the first encoded
// element (int8: bit 6 of the first quantised value) is flipped before decoding, which moves it by far
// more than any codec's stated bound.
struct CodecError {
    double max_bound_ratio = 0, max_abs = 0, rel_rms = 0;
    uint64_t bytes = 0;
};
CodecError measure_codec(StateCodec c, const float* x, size_t rows, size_t cols,
                         bool flip_encoded_bit = false);

}  // namespace k3
