// Keeps the compiler from auto-vectorising the scalar kernels, so that "scalar" in the benchmarks and
// in module 1 means one float per instruction (otherwise g++ -O3 -march=native turns the plain loops
// into AVX-512 code and the comparison with the xsimd kernels says nothing). Results are unaffected:
// the loops are element-wise along the vectorised dimension either way.
//   g++:   #pragma GCC optimize("no-tree-vectorize") at the top of the scalar kernel files;
//   clang: K3_SCALAR_LOOP before each inner loop.
#pragma once

#if defined(__clang__)
#define K3_SCALAR_LOOP _Pragma("clang loop vectorize(disable) interleave(disable)")
#else
#define K3_SCALAR_LOOP
#endif
