// Work and communication of context parallelism, counted by formula (multiply-adds of all value heads
// of one layer; a lone multiply or add counts as one). The KDA counts follow the cost comment of
// core/kda/chunked.h per (value head, chunk of n tokens):
//   prefill      n^2 (K + (K+V)/2)  pair matrices and forward substitution
//                + 3 n K V           state pass (W S, Qg S, KdT D)      + n^2 V / 2 (Aqk D, outputs)
//   segment map  the same phase A, the state pass on B (2 n K V, + n K V + n^2 V / 2 with outputs)
//                and on M (2 n K K, + n K K + n^2 K / 2 with output sensitivities)
// linear / diagonal per token: write K V (+ decay K V) (+ read K V with outputs).
// Compose (M2 M1, M2 B1 + B2) and apply (M S + B) use what each variant's M needs: dense K x K for
// KDA, a diagonal for the gate, nothing for M = I (reference/kda.md §4.1).
#pragma once

#include <cstdint>
#include <vector>

#include "core/kda/layout.h"

namespace k3::cp {

enum class Variant : uint8_t;
enum class Combiner : uint8_t;
enum class Fixup : uint8_t;

double run_work(Variant v, const kda::Shape& s, int T, int C);                // single-rank run, outputs
double map_work(Variant v, const kda::Shape& s, int T, int C, bool outputs);  // step 1 of a rank
double compose_work(Variant v, const kda::Shape& s);
double apply_work(Variant v, const kda::Shape& s);
double fixup_work(Variant v, const kda::Shape& s, int T, int C, Fixup f);  // step 3 of a rank

// Bytes of one rank's map [M | B] as sent (fp32): (map_floats_per_head + K V) x 4 x HV.
double map_bytes(Variant v, const kda::Shape& s);
double state_bytes(const kda::Shape& s);  // K V x 4 x HV

struct CpCost {
    double single_rank = 0;  // the single-rank run of all T tokens
    double local_critical = 0, local_total = 0;
    double combine_critical = 0, combine_total = 0;
    double fixup_critical = 0, fixup_total = 0;
    int rounds = 0;                 // messages one after another on the critical path
    double bytes_busiest_rank = 0;  // sent by the rank that sends most
    double bytes_total = 0;         // sent by all ranks
    double critical() const { return local_critical + combine_critical + fixup_critical; }
    double total() const { return local_total + combine_total + fixup_total; }
};

// Cost of context_parallel() with these slice lengths. The naive sum is costed as a reduction tree
// of the B's (ceil(log2 R) rounds of K V adds); serial as R - 1 hops of the state; scan as ceil(log2 R)
// Hillis-Steele rounds (rank r sends its composite to r + 2^k) and one final apply per rank.
CpCost cp_cost(Variant v, const kda::Shape& s, const std::vector<int>& slice_tokens, int C, Combiner c,
               Fixup f);

int ceil_log2(int n);  // 0 for n <= 1

}  // namespace k3::cp
