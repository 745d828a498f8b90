#include "core/cp/work.h"

#include <algorithm>

#include "core/cp/context_parallel.h"

namespace k3::cp {

int ceil_log2(int n) {
    int r = 0;
    while ((1 << r) < n) ++r;
    return r;
}

namespace {

// Sum over the chunks of T tokens of f(n), n the chunk length: T / C full chunks and the remainder.
// The f values are multiples of 1/2 far below 2^52, so the product is the sum chunk by chunk, exactly.
template <class F>
double over_chunks(int T, int C, F f) {
    return double(T / C) * f(double(C)) + (T % C ? f(double(T % C)) : 0.0);
}

}  // namespace

double run_work(Variant v, const Shape& s, int T, int C) {
    const double K = s.K, V = s.V, HV = s.HV;
    if (v == Variant::kda)
        return HV * over_chunks(T, std::max(1, C), [&](double n) {
                   return n * n * (K + (K + V) / 2) + 3 * n * K * V + n * n * V / 2;
               });
    return HV * double(T) * K * V * (v == Variant::diagonal ? 3 : 2);
}

double map_work(Variant v, const Shape& s, int T, int C, bool outputs) {
    const double K = s.K, V = s.V, HV = s.HV;
    if (v == Variant::kda)
        return HV * over_chunks(T, std::max(1, C), [&](double n) {
                   const double b = 2 * n * K * V + (outputs ? n * K * V + n * n * V / 2 : 0);
                   const double m = 2 * n * K * K + (outputs ? n * K * K + n * n * K / 2 : 0);
                   return n * n * (K + (K + V) / 2) + b + m;
               });
    const double per_token = K * V * (v == Variant::diagonal ? 2 : 1) + (outputs ? K * V + K : 0);
    return HV * double(T) * per_token;
}

double compose_work(Variant v, const Shape& s) {
    const double K = s.K, V = s.V, HV = s.HV;
    switch (v) {
        case Variant::linear: return HV * K * V;              // B2 + B1
        case Variant::diagonal: return HV * (K + 2 * K * V);  // d2 d1, d2 ⊙ B1 + B2
        case Variant::kda: return HV * (K * K * K + K * K * V + K * V);
    }
    return 0;
}

double apply_work(Variant v, const Shape& s) {
    const double K = s.K, V = s.V, HV = s.HV;
    switch (v) {
        case Variant::linear: return HV * K * V;
        case Variant::diagonal: return HV * 2 * K * V;
        case Variant::kda: return HV * (K * K * V + K * V);
    }
    return 0;
}

double fixup_work(Variant v, const Shape& s, int T, int C, Fixup f) {
    if (f == Fixup::rerun) return run_work(v, s, T, C);
    // O = O0 + E S_in per token, and S_out = M S_in + B.
    return double(s.HV) * double(T) * (double(s.K) * s.V + s.V) + apply_work(v, s);
}

double state_bytes(const Shape& s) { return 4.0 * double(s.state_floats()); }

double map_bytes(Variant v, const Shape& s) {
    return 4.0 * double(s.HV) * (double(map_floats_per_head(v, s)) + double(s.head_state()));
}

CpCost cp_cost(Variant v, const Shape& s, const std::vector<int>& slice_tokens, int C, Combiner c, Fixup f) {
    CpCost k;
    const int R = int(slice_tokens.size());
    int T = 0;
    for (int n : slice_tokens) T += n;
    k.single_rank = run_work(v, s, T, C);
    const bool outputs = f == Fixup::linear;
    double lw = 0, fw = 0;
    for (size_t i = 0; i < slice_tokens.size(); ++i) {
        const int n = slice_tokens[i];
        if (i == 0 || n != slice_tokens[i - 1])  // even slices: one evaluation for all ranks
            lw = map_work(v, s, n, C, outputs), fw = fixup_work(v, s, n, C, f);
        k.local_critical = std::max(k.local_critical, lw);
        k.local_total += lw;
        k.fixup_critical = std::max(k.fixup_critical, fw);
        k.fixup_total += fw;
    }
    const double sum = double(s.state_floats());  // K V adds per head
    const int L = ceil_log2(R);
    switch (c) {
        case Combiner::naive_sum:
            k.rounds = L;
            k.combine_critical = L * sum;
            k.combine_total = (R - 1) * sum;
            k.bytes_busiest_rank = R > 1 ? state_bytes(s) : 0;
            k.bytes_total = (R - 1) * state_bytes(s);
            break;
        case Combiner::serial:
            k.rounds = R - 1;
            k.combine_critical = k.combine_total = (R - 1) * apply_work(v, s);
            k.bytes_busiest_rank = R > 1 ? state_bytes(s) : 0;
            k.bytes_total = (R - 1) * state_bytes(s);
            break;
        case Combiner::scan: {
            k.rounds = L;
            double composes = 0;
            for (int step = 1; step < R; step *= 2) composes += R - step;
            k.combine_critical = L * compose_work(v, s) + (R > 1 ? apply_work(v, s) : 0);
            k.combine_total = composes * compose_work(v, s) + (R - 1) * apply_work(v, s);
            k.bytes_busiest_rank = L * map_bytes(v, s);  // rank 0 sends in every round
            k.bytes_total = composes * map_bytes(v, s);
            break;
        }
    }
    return k;
}

}  // namespace k3::cp
