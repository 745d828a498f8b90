// Context parallelism at the kernel level (core/cp): R ranks with uneven slices equal the single-rank
// run for the exact combiners and both fix-ups; R = 1 is bitwise; the naive sum's error equals the
// closed form of reference/kda.md §4.3; the work and byte counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/fmath.h"
#include "core/base/stats.h"
#include "core/cp/context_parallel.h"
#include "core/cp/reference.h"
#include "core/cp/work.h"
#include "core/kda/inputs.h"

using namespace k3;
using namespace k3::cp;

namespace {

const Shape kShape{2, 2, 16, 12};  // K != V catches transposed layouts
constexpr int kT = 203, kC = 16;

// Uneven slices, none on a multiple of the chunk, one of 2 tokens (shorter than the conv window).
Bounds bounds_for(int R) {
    switch (R) {
        case 1: return {0, kT};
        case 2: return {0, 77, kT};
        case 3: return {0, 50, 52, kT};
        case 7: return {0, 21, 23, 60, 99, 130, 170, kT};
    }
    return even_bounds(kT, R);
}

struct Single {
    FloatBuf o, S;
};

Single single_rank(Variant v, const kda::TokenData& x, const FloatBuf& S0) {
    Single r{FloatBuf(size_t(x.T) * kShape.v_row()), S0};
    run(v, kShape, r.S.data(), x.view(), kda::default_scale(kShape.K), kC, r.o.data());
    return r;
}

}  // namespace

TEST_CASE("cp: bounds are checked") {
    CHECK(check_bounds({0, 5, 10}, 10).empty());
    CHECK(check_bounds({0, 5, 5, 10}, 10).find("empty") != std::string::npos);
    CHECK(check_bounds({0, 5}, 10).find("last bound") != std::string::npos);
    CHECK(check_bounds({1, 10}, 10).find("first bound") != std::string::npos);
    CHECK(check_bounds({0}, 0).find("at least one") != std::string::npos);
    CHECK(even_bounds(10, 3) == Bounds{0, 4, 7, 10});
}

TEST_CASE("cp: one rank from a zero state has the single-rank bits") {
    const kda::TokenData x = kda::random_tokens(kShape, kT, 11);
    const FloatBuf zero(kShape.state_floats(), 0.0f);
    const float scale = kda::default_scale(kShape.K);
    for (Variant v : kVariants) {
        const Single ref = single_rank(v, x, zero);
        for (Combiner c : kCombiners)
            for (Fixup f : {Fixup::rerun, Fixup::linear}) {
                CAPTURE(variant_id(v));
                CAPTURE(combiner_id(c));
                CAPTURE(fixup_id(f));
                const CpResult r =
                    context_parallel(v, kShape, x.view(), {0, kT}, zero.data(), scale, kC, c, f);
                CHECK(bitwise_equal(r.o, ref.o));
                CHECK(bitwise_equal(r.S, ref.S));
            }
    }
}

TEST_CASE("cp: R in {1, 2, 3, 7} with uneven slices equals the single-rank run") {
    const kda::TokenData x = kda::random_tokens(kShape, kT, 12);
    const FloatBuf S0 = kda::random_state(kShape, 13);
    const float scale = kda::default_scale(kShape.K);
    for (Variant v : kVariants) {
        const Single ref = single_rank(v, x, S0);
        for (int R : {1, 2, 3, 7}) {
            const Bounds b = bounds_for(R);
            REQUIRE(check_bounds(b, kT).empty());
            for (Combiner c : {Combiner::serial, Combiner::scan}) {
                CpResult by[2];
                for (Fixup f : {Fixup::rerun, Fixup::linear}) {
                    CAPTURE(variant_id(v));
                    CAPTURE(R);
                    CAPTURE(combiner_id(c));
                    CAPTURE(fixup_id(f));
                    CpResult r = context_parallel(v, kShape, x.view(), b, S0.data(), scale, kC, c, f);
                    // fp32 rounding of a different summation order: stated tolerance 1e-5 relative RMS.
                    CHECK(rel_rms(r.o.data(), ref.o.data(), ref.o.size()) < 1e-5);
                    CHECK(rel_rms(r.S.data(), ref.S.data(), ref.S.size()) < 1e-5);
                    // The start state of rank 0 is S_0 itself, so its outputs are exact with the rerun.
                    if (f == Fixup::rerun)
                        CHECK(bitwise_equal(r.o.data(), ref.o.data(), size_t(b[1]) * kShape.v_row()));
                    by[int(f)] = std::move(r);
                }
                // The two fix-ups agree (reference/kda.md §7 invariant 12).
                CHECK(rel_rms(by[1].o.data(), by[0].o.data(), by[0].o.size()) < 1e-5);
                CHECK(rel_rms(by[1].S.data(), by[0].S.data(), by[0].S.size()) < 1e-5);
            }
        }
    }
}

TEST_CASE("cp: the naive sum's error equals the closed form of reference/kda.md §4.3") {
    const kda::TokenData x = kda::random_tokens(kShape, kT, 14);
    const float scale = kda::default_scale(kShape.K);
    for (bool zero_start : {true, false}) {
        const FloatBuf S0 =
            zero_start ? FloatBuf(kShape.state_floats(), 0.0f) : kda::random_state(kShape, 15);
        const std::vector<double> S0d(S0.begin(), S0.end());
        for (Variant v : kVariants) {
            CAPTURE(variant_id(v));
            CAPTURE(zero_start);
            const Bounds b = bounds_for(7);
            // fp64: the identity holds to rounding of the fp64 arithmetic.
            std::vector<double> S_true = S0d;
            ref::run(v, kShape, S_true.data(), x.view(), 1.0, nullptr);
            std::vector<ref::MapF64> maps;
            std::vector<double> naive = S0d;
            for (const Tokens& sl : split(kShape, x.view(), b)) {
                maps.push_back(ref::map(v, kShape, sl));
                for (size_t e = 0; e < naive.size(); ++e) naive[e] += maps.back().B[e];
            }
            const std::vector<double> closed = ref::naive_sum_error(kShape, maps, S0d.data());
            double diff = 0, size = 0;
            for (size_t e = 0; e < closed.size(); ++e) {
                diff = std::max(diff, std::fabs((S_true[e] - naive[e]) - closed[e]));
                size = std::max(size, std::fabs(closed[e]));
            }
            CHECK(diff < 1e-10);
            if (v == Variant::linear)
                CHECK(size == 0);  // M = I: states add up
            else
                CHECK(size > 0.1);  // decay (and for KDA erasure): O(1) error

            // fp32: the measured error of the naive combiner against the single-rank run matches the
            // closed form evaluated on the ranks' fp32 maps.
            const Single one = single_rank(v, x, S0);
            const CpResult r = context_parallel(v, kShape, x.view(), b, S0.data(), scale, kC,
                                                Combiner::naive_sum, Fixup::rerun);
            std::vector<ref::MapF64> maps32;
            for (const RankMap& m : local_maps(v, kShape, split(kShape, x.view(), b), scale, kC, false))
                maps32.push_back(ref::promote(kShape, m.M.data(), m.B.data()));
            const std::vector<double> closed32 = ref::naive_sum_error(kShape, maps32, S0d.data());
            double num = 0, den = 0, err = 0;
            for (size_t e = 0; e < closed32.size(); ++e) {
                const double measured = double(one.S[e]) - double(r.S[e]);
                num += (measured - closed32[e]) * (measured - closed32[e]);
                den += closed32[e] * closed32[e];
                err = std::max(err, std::fabs(measured));
            }
            if (v == Variant::linear)
                CHECK(err < 1e-4);  // rounding only
            else
                CHECK(std::sqrt(num / den) < 1e-4);
        }
    }
}

TEST_CASE("cp: the two-token case of §4.3 by hand") {
    // S_2 - (b1 k1 v1^T + b2 k2 v2^T) = (D2 - I) b1 k1 v1^T - b1 b2 (k2 . D2 k1) k2 v1^T, one head.
    const Shape s{1, 1, 5, 3};
    const kda::TokenData x = kda::random_tokens(s, 2, 16);
    std::vector<ref::MapF64> maps = {ref::map(Variant::kda, s, x.view().slice(s, 0, 1)),
                                     ref::map(Variant::kda, s, x.view().slice(s, 1, 1))};
    const std::vector<double> zero(s.state_floats(), 0.0);
    const std::vector<double> closed = ref::naive_sum_error(s, maps, zero.data());
    const double b1 = x.beta[0], b2 = x.beta[1];
    double kDk = 0;
    for (int i = 0; i < 5; ++i) kDk += double(x.k[5 + i]) * exp_f64(double(x.g[5 + i])) * double(x.k[i]);
    for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 3; ++j) {
            const double d2 = exp_f64(double(x.g[5 + i]));
            const double want = (d2 - 1) * b1 * x.k[i] * x.v[j] - b1 * b2 * kDk * x.k[5 + i] * x.v[j];
            CHECK(closed[size_t(i) * 3 + j] == doctest::Approx(want).epsilon(1e-12));
        }
}

TEST_CASE("cp: bytes exchanged and critical-path work") {
    const Shape kimi{32, 32, 128, 128};
    // reference/kda.md §4.2: K (K + V) x 4 bytes = 128 KiB per head, 4 MiB per layer per rank.
    CHECK(map_bytes(Variant::kda, kimi) == 4194304.0);
    CHECK(map_bytes(Variant::diagonal, kimi) == 32.0 * 4 * (128 + 128 * 128));
    CHECK(map_bytes(Variant::linear, kimi) == 32.0 * 4 * 128 * 128);
    CHECK(ceil_log2(1) == 0);
    CHECK(ceil_log2(7) == 3);
    CHECK(ceil_log2(8) == 3);
    const std::vector<int> slices = {21, 2, 37, 39, 31, 40, 33};
    const CpCost scan = cp_cost(Variant::kda, kShape, slices, kC, Combiner::scan, Fixup::rerun);
    const CpCost serial = cp_cost(Variant::kda, kShape, slices, kC, Combiner::serial, Fixup::rerun);
    CHECK(scan.rounds == 3);
    CHECK(serial.rounds == 6);
    CHECK(scan.bytes_busiest_rank == 3 * map_bytes(Variant::kda, kShape));
    CHECK(scan.bytes_total == (6 + 5 + 3) * map_bytes(Variant::kda, kShape));  // rounds with offsets 1, 2, 4
    CHECK(serial.bytes_total == 6 * 4.0 * kShape.state_floats());
    CHECK(scan.local_critical == map_work(Variant::kda, kShape, 40, kC, false));
    CHECK(scan.fixup_critical == run_work(Variant::kda, kShape, 40, kC));
    CHECK(scan.single_rank == run_work(Variant::kda, kShape, kT, kC));
    // KDA: composing K x K maps costs more than applying them; for M = I both are K V adds.
    CHECK(compose_work(Variant::kda, kShape) > apply_work(Variant::kda, kShape));
    CHECK(compose_work(Variant::linear, kShape) == apply_work(Variant::linear, kShape));
    // One chunk of 16 by hand: 2 heads x [n^2 (K + (K+V)/2) + 2 n K V + 2 n K K] and the prefill's
    // 2 x [n^2 (K + (K+V)/2) + 3 n K V + n^2 V / 2].
    CHECK(map_work(Variant::kda, kShape, 16, kC, false) ==
          2.0 * (256 * 30 + 2 * 16 * 16 * 12 + 2 * 16 * 16 * 16));
    CHECK(run_work(Variant::kda, kShape, 16, kC) == 2.0 * (256 * 30 + 3 * 16 * 16 * 12 + 256 * 6));
}

TEST_CASE("cp: work counts in one step equal the chunk-by-chunk sums") {
    // Whole chunks are counted at once; the sum chunk by chunk must give the same bits, also for
    // odd K + V (half-integer terms) and for a million-token slice of Kimi-Linear's geometry.
    const Shape odd{2, 2, 16, 13};
    const Shape kimi{32, 32, 128, 128};
    for (const auto& [s, T, C] :
         {std::tuple{odd, 203, 16}, std::tuple{kimi, 1 << 20, 64}, std::tuple{kimi, 1000003, 64}}) {
        for (Variant v : kVariants) {
            double run = 0, map = 0, mapo = 0;
            for (int t0 = 0; t0 < T; t0 += C) {
                const int n = std::min(C, T - t0);
                run += run_work(v, s, n, C);
                map += map_work(v, s, n, C, false);
                mapo += map_work(v, s, n, C, true);
            }
            CHECK(run_work(v, s, T, C) == run);
            CHECK(map_work(v, s, T, C, false) == map);
            CHECK(map_work(v, s, T, C, true) == mapo);
        }
    }
    // Even slices are costed once for all ranks: the same as uneven ones that happen to be equal.
    const CpCost even =
        cp_cost(Variant::kda, kimi, std::vector<int>(64, 4096), 64, Combiner::scan, Fixup::rerun);
    CHECK(even.local_total == 64 * map_work(Variant::kda, kimi, 4096, 64, false));
    CHECK(even.fixup_critical == run_work(Variant::kda, kimi, 4096, 64));
}
