// Shapes and memory layouts of the KDA core (reference/kda.md §0, §2; docs/architecture.md, Numerics).
//
// One layer, one sequence. All arrays are row-major float32, contiguous:
//   state  S     [HV][K][V]   row i of a head's K x V matrix = key channel i (FLA's default layout)
//   q, k         [T][H][K]    already L2-normalised; `scale` (K^-0.5) is applied to q inside the kernels
//   v            [T][HV][V]
//   g            [T][HV][K]   log-decay, every entry <= 0 (alpha = exp(g) in [0, 1])
//   beta         [T][HV]      delta-rule step size in (0, 1)
//   o            [T][HV][V]
// Grouped value heads: value head h reads q/k head h / (HV / H); HV is a multiple of H.
#pragma once

// Native builds for a target with fused multiply-add (x86-64-v3, AVX-512) compile the FMA variants.
#if K3_SIMD && (defined(__FMA__) || defined(__AVX512F__))
#define K3_FMA 1
#else
#define K3_FMA 0
#endif

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace k3::kda {

// Largest head dimension the kernels accept (their per-head scratch lives on the stack).
inline constexpr int kMaxHeadDim = 512;
// Largest chunk size of the chunked kernel (its per-chunk work is O(C^2 (K + V)), its scratch O(C (K + V))).
inline constexpr int kMaxChunk = 1024;

struct Shape {
    int H = 1;   // query/key heads
    int HV = 1;  // value heads = state matrices; a multiple of H
    int K = 64;  // key head dim (state rows)
    int V = 64;  // value head dim (state columns)

    int group() const { return HV / H; }
    size_t head_state() const { return size_t(K) * size_t(V); }        // floats per value head
    size_t state_floats() const { return size_t(HV) * head_state(); }  // floats per layer
    size_t qk_row() const { return size_t(H) * size_t(K); }            // floats per token of q or k
    size_t v_row() const { return size_t(HV) * size_t(V); }            // floats per token of v or o
    size_t g_row() const { return size_t(HV) * size_t(K); }            // floats per token of g
    // Empty when valid, else what is wrong ("HV (6) must be a multiple of H (4)").
    std::string problem() const;
    bool operator==(const Shape& o) const { return H == o.H && HV == o.HV && K == o.K && V == o.V; }
};

// A view of T tokens of per-token inputs (shapes in the header comment). Not owning.
struct Tokens {
    const float* q = nullptr;
    const float* k = nullptr;
    const float* v = nullptr;
    const float* g = nullptr;
    const float* beta = nullptr;
    int T = 0;

    // Tokens [t0, t0 + n) of this view.
    Tokens slice(const Shape& s, int t0, int n) const {
        return {q + size_t(t0) * s.qk_row(), k + size_t(t0) * s.qk_row(),      v + size_t(t0) * s.v_row(),
                g + size_t(t0) * s.g_row(),  beta + size_t(t0) * size_t(s.HV), n};
    }
};

// K^-0.5 rounded to float, the scale every implementation applies to q.
float default_scale(int K);

// Which implementation of a kernel to run. `simd` is the xsimd kernel when the build has it
// (K3_SIMD=1) and the scalar kernel otherwise; both give the same bits. `fma` is the FMA variant of the
// recurrent and chunked kernels, NOT bit-exact (recurrent.h), in native builds whose target has FMA
// (K3_FMA, fma_enabled() in device.h); elsewhere it runs the `simd` kernel.
enum class Impl { scalar, simd, fma };

bool simd_enabled();      // the build has xsimd kernels (K3_SIMD=1)
const char* simd_arch();  // xsimd's default_arch name ("avx512bw", "avx2", "wasm"); "scalar" without SIMD
int simd_width();         // float lanes of the SIMD kernels (1 without SIMD)

// float storage aligned to 64 bytes (a cache line, an AVX-512 register) for states and scratch.
template <class T>
struct AlignedAlloc {
    using value_type = T;
    AlignedAlloc() = default;
    template <class U>
    AlignedAlloc(const AlignedAlloc<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    template <class U>
    bool operator==(const AlignedAlloc<U>&) const {
        return true;
    }
};
using FloatBuf = std::vector<float, AlignedAlloc<float>>;

}  // namespace k3::kda
