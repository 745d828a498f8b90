// CRC-32C (Castagnoli), the checksum of the state blob format. Table driven, portable.
#pragma once

#include <cstddef>
#include <cstdint>

namespace k3 {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace k3
