// Context parallelism over R simulated ranks (reference/kda.md §4.2). Rank r holds the contiguous
// token slice [bounds[r], bounds[r + 1]) of one sequence (uneven slices allowed, empty ones not):
//
//   1. local   every rank computes its slice's affine map (M_r, B_r) from a zero state, with its
//              zero-start outputs O0_r and output sensitivities E_r (variants.h).
//   2. combine every rank gets its start state S_in(r):
//              naive_sum  S_in(r) = S_0 + sum_{j<r} B_j, final S_0 + sum_j B_j: an all-reduce "+".
//                         WRONG except for M = I; kept to show the error (reference/kda.md §4,
//                         naive_sum_error in reference.h).
//              serial     state passing: S_in(r+1) = M_r S_in(r) + B_r, rank after rank (R - 1 hops).
//              scan       inclusive prefix of the maps, P_r = map_r ∘ ... ∘ map_0, by Hillis-Steele in
//                         ceil(log2 R) rounds of composition, then S_in(r+1) = P_r(S_0).
//   3. fix-up  rerun   run the slice again from S_in(r) (what FLA does: its phase B with S_in);
//              linear  O_r = O0_r + E_r S_in(r), S_out = M_r S_in(r) + B_r (reference/kda.md §4.2 (b)).
// The final state is the last rank's S_out (naive_sum: the sum, as an all-reduce would leave it).
//
// Arithmetic: step 1 gives the bits of the single-rank run on each slice from zero; the fix-ups and
// the combination round differently from one pass over the whole sequence (and chunks restart at
// every slice start), so results agree with the single-rank run to fp32 rounding, not bit for bit,
// except with R = 1 and S_0 = 0 where every path is the single-rank arithmetic.
#pragma once

#include <string>
#include <vector>

#include "core/cp/variants.h"
#include "core/cp/work.h"

namespace k3::cp {

enum class Combiner : uint8_t { naive_sum, serial, scan };
inline constexpr Combiner kCombiners[] = {Combiner::naive_sum, Combiner::serial, Combiner::scan};
const char* combiner_id(Combiner c);     // "naive_sum", "serial", "scan"
const char* combiner_title(Combiner c);  // "naive sum of zero-start states (wrong)", ...

enum class Fixup : uint8_t { rerun, linear };
const char* fixup_id(Fixup f);  // "rerun", "linear"

// Slice boundaries: bounds[0] = 0 < bounds[1] < ... < bounds[R] = T.
using Bounds = std::vector<int>;
// Empty when bounds describe R >= 1 non-empty slices of T tokens, else what is wrong.
std::string check_bounds(const Bounds& b, int T);
// R slices of T tokens as even as possible (the first T % R slices one token longer).
Bounds even_bounds(int T, int R);
// R seeded uneven slices: boundaries jittered by up to 30 % of T / R around the even ones, none on a
// multiple of `chunk` (so chunks restart off the single-rank grid), and with R >= 3 slice 1 exactly
// `short_len` tokens long (a rank shorter than the conv window). Falls back to even_bounds when T is
// too short for that (T < 4 R + short_len).
Bounds uneven_bounds(int T, int R, int chunk, int short_len, uint64_t seed);

// Step 1 of one rank.
struct RankMap {
    int t0 = 0, T = 0;
    FloatBuf M, B;  // [HV][K][K], [HV][K][V]
    FloatBuf o0;    // [T][HV][V]  zero-start outputs      } only with `outputs`: the linear fix-up
    FloatBuf eo;    // [T][HV][K]  output sensitivities    } needs them, the rerun does not
};
// Step 1 for every rank (independent: each could run on its own device).
std::vector<RankMap> local_maps(Variant v, const Shape& s, const std::vector<Tokens>& slices, float scale,
                                int C, bool outputs, Impl impl = Impl::simd);

struct CpResult {
    FloatBuf o;                  // [T][HV][V], every rank's outputs in order
    FloatBuf S;                  // final state [HV][K][V]
    std::vector<FloatBuf> S_in;  // start state of every rank
    // Step 2's messages as the simulation passes them, counted from the buffers' sizes (fp32): what each
    // rank sends (naive_sum: its running sum to the next rank; serial: the state it computed for the
    // next; scan: its composite [M | B] in each round it has a receiver). To check cp_cost against.
    std::vector<double> bytes_sent;
};

// Steps 2 and 3 from the local maps. slices[r] are the ranks' inputs (used by the rerun fix-up).
CpResult combine(Variant v, const Shape& s, const std::vector<Tokens>& slices,
                 const std::vector<RankMap>& maps, const float* S0, float scale, int C, Combiner c, Fixup f,
                 Impl impl = Impl::simd);

// Everything for one contiguous sequence x split at `bounds` (checked by the caller).
CpResult context_parallel(Variant v, const Shape& s, const Tokens& x, const Bounds& bounds, const float* S0,
                          float scale, int C, Combiner c, Fixup f, Impl impl = Impl::simd);

// The slices of x at bounds.
std::vector<Tokens> split(const Shape& s, const Tokens& x, const Bounds& bounds);

}  // namespace k3::cp
