// Bytes as the project reads and writes them: little-endian integers in byte buffers (state blobs,
// checkpoint codecs; every build target is little-endian, the format says so explicitly) and the
// bitwise comparison every exactness claim rests on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <vector>

namespace k3 {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The low `bytes` bytes of v at dst, least significant first.
inline void store_le(void* dst, uint64_t v, int bytes) {
    auto* p = static_cast<unsigned char*>(dst);
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline uint64_t load_le(const void* src, int bytes) {
    const auto* p = static_cast<const unsigned char*>(src);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}
inline void append_le(std::vector<std::byte>& b, uint64_t v, int bytes) {
    b.resize(b.size() + size_t(bytes));
    store_le(b.data() + b.size() - size_t(bytes), v, bytes);
}

// The same bits: n elements at a and b (NaNs compare by their bits, -0 differs from +0).
template <class T>
bool bitwise_equal(const T* a, const T* b, size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}
// Two contiguous ranges (vectors, spans) of the same element type: same length, same bits.
template <class A, class B>
bool bitwise_equal(const A& a, const B& b) {
    static_assert(std::is_same_v<std::remove_cv_t<std::remove_reference_t<decltype(*std::data(a))>>,
                                 std::remove_cv_t<std::remove_reference_t<decltype(*std::data(b))>>>);
    return std::size(a) == std::size(b) && bitwise_equal(std::data(a), std::data(b), std::size(a));
}

// Flips bit `bit` (0 = least significant of the first byte) of x's object representation: the one-bit
// corruption falsifiers inject into states and outputs (k3cli audit-checks).
template <class T>
void flip_bit(T& x, int bit) {
    static_assert(std::is_trivially_copyable_v<T>);
    unsigned char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    b[size_t(bit) / 8 % sizeof(T)] ^= static_cast<unsigned char>(1u << (bit % 8));
    std::memcpy(&x, b, sizeof(T));
}

}  // namespace k3
