// fp64 references of the three variants (variants.h) and the closed form of the naive sum's error
// (reference/kda.md §4.3), for the tests and module 9.
#pragma once

#include <vector>

#include "core/cp/variants.h"

namespace k3::cp::ref {

// A segment map in fp64: M [HV][K][K], B [HV][K][V].
struct MapF64 {
    std::vector<double> M, B;
};

// T tokens from S (in place, fp64), outputs o [T][HV][V] (may be null). KDA: kda::ref::recurrent.
void run(Variant v, const Shape& s, double* S, const Tokens& x, double scale, double* o);

// The map of a segment in fp64, computed independently of the chunked algorithm: B = run(0) and,
// column by column, M = the end state of the recurrence with v = 0 started from the identity
// (for KDA: run on a K x K state; linear and diagonal: the product of the decays).
MapF64 map(Variant v, const Shape& s, const Tokens& x);

// An fp32 map promoted to fp64.
MapF64 promote(const Shape& s, const float* M, const float* B);

// S_true - (S_0 + sum_r B_r) for the slices' maps in order, fp64:
//     sum_r (M_{R-1} ... M_{r+1} - I) B_r  +  (M_{R-1} ... M_0 - I) S_0
// (reference/kda.md §4.3, whose sum leaves S_0 out: with S_0 = 0 the two agree). [HV][K][V].
std::vector<double> naive_sum_error(const Shape& s, const std::vector<MapF64>& maps, const double* S0);

}  // namespace k3::cp::ref
