// The project's KDA kernels against the golden vectors of FLA's naive_recurrent_kda
// (tests/data/golden/kda, a copy of ../shared/golden/kda), the bounded-gate vectors of the project's fp64
// generator (tests/data/golden/kda_bounded), and the golden reader's handling of bad input.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/base/clock.h"

#include "core/kda/chunked.h"
#include "core/kda/gates.h"
#include "core/kda/golden.h"
#include "core/kda/recurrent.h"
#include "core/kda/reference.h"
#include "tests/unit/test_kda_util.h"

using namespace k3;
using namespace k3::kda;

static const char* kCases[] = {"t1_k16_v16", "t37_k32_v32_h2", "t64_k64_v64_init", "t100_k64_v128_b2"};

static std::string golden_dir(const char* name) { return std::string(K3_TEST_DATA) + "/golden/kda/" + name; }

// Runs `run(S, tokens, o)` on every batch of a case and compares outputs and final states.
template <class Run>
static ErrorStats check_case(const GoldenCase& c, Run run) {
    const Shape& s = c.shape;
    ErrorStats all;
    for (int b = 0; b < c.B; ++b) {
        FloatBuf S(s.state_floats(), 0.0f), o(size_t(c.T) * s.v_row());
        if (c.has_h0) std::memcpy(S.data(), c.h0_of(b), S.size() * 4);
        run(S.data(), c.tokens(b), o.data());
        all.add(compare(o.data(), c.o_of(b), o.size()));
        all.add(compare(S.data(), c.ht_of(b), S.size()));
    }
    return all;
}

TEST_CASE("kda golden: every case, every kernel, within 1e-4 * max(1, max|expected|)") {
    for (const char* name : kCases) {
        GoldenCase c;
        const std::string err = read_golden(golden_dir(name), c);
        INFO(name << ": " << err);
        REQUIRE(err.empty());
        const Shape s = c.shape;
        for (Impl impl : {Impl::scalar, Impl::simd}) {
            const ErrorStats rec = check_case(
                c, [&](float* S, const Tokens& x, float* o) { recurrent(s, S, x, c.scale, o, impl); });
            INFO("recurrent impl " << int(impl) << " max_abs " << rec.max_abs << " rel " << rec.rel_rms());
            CHECK(rec.within());
            CHECK(rec.rel_rms() < 1e-5);
            for (int C : {1, 16, 64}) {
                const ErrorStats ch = check_case(
                    c, [&](float* S, const Tokens& x, float* o) { chunked(s, S, x, c.scale, C, o, impl); });
                INFO("chunked C=" << C << " impl " << int(impl) << " max_abs " << ch.max_abs << " rel "
                                  << ch.rel_rms());
                CHECK(ch.within());
                CHECK(ch.rel_rms() < 1e-5);
            }
        }
        // The fp64 reference agrees with the fp32 golden run of FLA.
        ErrorStats ref;
        for (int b = 0; b < c.B; ++b) {
            std::vector<double> S(s.state_floats(), 0.0), o(size_t(c.T) * s.v_row());
            if (c.has_h0) S.assign(c.h0_of(b), c.h0_of(b) + S.size());
            ref::recurrent(s, S.data(), c.tokens(b), c.scale, o.data());
            const std::vector<float> of(o.begin(), o.end()), sf(S.begin(), S.end());
            ref.add(compare(of.data(), c.o_of(b), of.size()));
            ref.add(compare(sf.data(), c.ht_of(b), sf.size()));
        }
        CHECK(ref.within());
    }
}

TEST_CASE("kda golden: a kernel that decays the wrong dimension fails the tolerance") {
    // Guard that the golden comparison can fail: transpose the role of the decay (columns instead of
    // rows) by feeding a state that is the transpose of h0 and transposing back.
    GoldenCase c;
    REQUIRE(read_golden(golden_dir("t64_k64_v64_init"), c).empty());
    const Shape s = c.shape;
    const ErrorStats bad = check_case(c, [&](float* S, const Tokens& x, float* o) {
        FloatBuf St(s.state_floats());
        for (int h = 0; h < s.HV; ++h)
            for (int i = 0; i < s.K; ++i)
                for (int j = 0; j < s.V; ++j)
                    St[(size_t(h) * s.V + j) * s.K + i] = S[(size_t(h) * s.K + i) * s.V + j];
        recurrent(s, St.data(), x, c.scale, o);
        for (int h = 0; h < s.HV; ++h)
            for (int i = 0; i < s.K; ++i)
                for (int j = 0; j < s.V; ++j)
                    S[(size_t(h) * s.K + i) * s.V + j] = St[(size_t(h) * s.V + j) * s.K + i];
    });
    CHECK_FALSE(bad.within());
}

// ---- the bounded gate (tests/data/golden/kda_bounded, the project's fp64 generator) ------------------

static const char* kBoundedCases[] = {"t1_k16_v16", "t37_k32_v32_h2_grouped_b2", "t64_k64_v64_init",
                                      "t130_k32_v64"};

static std::string bounded_dir(const char* name) {
    return std::string(K3_TEST_DATA) + "/golden/kda_bounded/" + name;
}

// The fp32 gate within kGateRelTol (golden.h derives it) of the fp64 one, then both kernels fed that
// gate within the golden tolerance of outputs and final states computed in fp64 from the fp64 gate.
TEST_CASE("kda golden: the bounded gate and the kernels fed by it, against the fp64 vectors") {
    for (const char* name : kBoundedCases) {
        GoldenCase c;
        const std::string err = read_golden(bounded_dir(name), c);
        INFO(name << ": " << err);
        REQUIRE(err.empty());
        REQUIRE(c.has_gate());
        CHECK(c.gate_lower_bound == -5.0f);
        const std::vector<float> want_g = c.g;
        c.g = golden_gate(c);
        ErrorStats eg = compare(c.g.data(), want_g.data(), c.g.size());
        eg.rel_tol = kGateRelTol;
        MESSAGE(std::string(name) << ": gate max |diff| " << eg.max_abs << " (tolerance " << eg.tolerance()
                                  << ")");
        CHECK(eg.within());
        const Shape s = c.shape;
        double worst = 0;
        for (Impl impl : {Impl::scalar, Impl::simd}) {
            const ErrorStats rec = check_case(
                c, [&](float* S, const Tokens& x, float* o) { recurrent(s, S, x, c.scale, o, impl); });
            const ErrorStats ch = check_case(
                c, [&](float* S, const Tokens& x, float* o) { chunked(s, S, x, c.scale, 64, o, impl); });
            CHECK(rec.within());
            CHECK(ch.within());
            worst = std::max({worst, rec.max_abs, ch.max_abs});
        }
        MESSAGE(std::string(name) << ": kernels max |diff| " << worst);
    }
    // The check can fail: the softplus gate on the same inputs is another decay.
    GoldenCase c;
    REQUIRE(read_golden(bounded_dir("t64_k64_v64_init"), c).empty());
    for (int t = 0; t < c.B * c.T; ++t)
        kda_gate(c.z.data() + size_t(t) * c.shape.g_row(), c.dt_bias.data(), c.A_log.data(), c.shape.HV,
                 c.shape.K, c.g.data() + size_t(t) * c.shape.g_row());
    const Shape s = c.shape;
    CHECK_FALSE(check_case(c, [&](float* S, const Tokens& x, float* o) {
                    recurrent(s, S, x, c.scale, o, Impl::scalar);
                }).within());
}

// ---- sizes from meta.txt alone (what k3cli kda-check holds to the run limits before reading) -------

static double file_bytes(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? double(st.st_size) : 0.0;
}

TEST_CASE("kda golden reader: the sizes meta.txt declares are the sizes of the files read") {
    for (const std::string& dir : {golden_dir("t100_k64_v128_b2"), golden_dir("t64_k64_v64_init"),
                                   bounded_dir("t37_k32_v32_h2_grouped_b2"), bounded_dir("t130_k32_v64")}) {
        CAPTURE(dir);
        GoldenCase c;
        REQUIRE(read_golden_meta(dir, c).empty());
        CHECK(c.q.empty());  // nothing but meta.txt read yet
        double on_disk = 0, largest = 0;
        for (const char* f : {"q", "k", "v", "g", "beta", "h0", "o", "ht", "z", "A_log", "dt_bias"}) {
            on_disk += file_bytes(dir + "/" + f + ".f32");
            largest = std::max(largest, file_bytes(dir + "/" + f + ".f32"));
        }
        const GoldenBytes b = golden_bytes(c);
        CHECK(b.arrays == on_disk);
        CHECK(b.reading > on_disk + largest);
        REQUIRE(read_golden_arrays(c).empty());
        CHECK(c.q.size() * 4 == size_t(file_bytes(dir + "/q.f32")));
    }
}

// ---- bad input ------------------------------------------------------------------------------------

static void write_file(const std::string& path, const void* data, size_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f);
    if (n) std::fwrite(data, 1, n, f);
    std::fclose(f);
}

static void copy_case(const std::string& from, const std::string& to) {
    ::mkdir(to.c_str(), 0755);
    for (const char* f : {"meta.txt", "q.f32", "k.f32", "v.f32", "g.f32", "beta.f32", "o.f32", "ht.f32"}) {
        FILE* in = std::fopen((from + "/" + f).c_str(), "rb");
        REQUIRE(in);
        std::string d;
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) d.append(buf, n);
        std::fclose(in);
        write_file(to + "/" + f, d.data(), d.size());
    }
}

TEST_CASE("kda golden reader: bad folders give errors naming the file, never a crash") {
    GoldenCase c;
    CHECK(read_golden("no/such/dir", c).find("meta.txt") != std::string::npos);
    // A scratch copy in /tmp (the real file system under node as well: the tests link with NODERAWFS).
    const std::string dir = "/tmp/k3_kda_golden_bad_" + std::to_string(long(now_ms()) % 1000000000);
    copy_case(golden_dir("t37_k32_v32_h2"), dir);
    REQUIRE(read_golden(dir, c).empty());

    const std::string meta_ok =
        "B 1\nT 37\nH 2\nHV 2\nK 32\nV 32\nscale 0.1767766952966369\ninitial_state 0\nseed 12\n";
    auto with_meta = [&](const std::string& m) {
        write_file(dir + "/meta.txt", m.data(), m.size());
        return read_golden(dir, c);
    };
    CHECK(with_meta("B 1\nT 37\nH 2\nHV 2\nK 32\nV 32\nscale 0.17\n").find("initial_state") !=
          std::string::npos);
    CHECK(with_meta("B 1\nT 37\nH 2\nHV 2\nK 32\nV 32\nscale x\ninitial_state 0\n").find("line 7") !=
          std::string::npos);
    CHECK(with_meta("B 1\nT 38\nH 2\nHV 2\nK 32\nV 32\nscale 0.17\ninitial_state 0\n").find("q.f32") !=
          std::string::npos);
    CHECK(with_meta("B 1\nT 37\nH 2\nHV 3\nK 32\nV 32\nscale 0.17\ninitial_state 0\n").find("multiple") !=
          std::string::npos);
    CHECK(with_meta("B 1\nT 37\nH 2\nHV 2\nK 100000\nV 32\nscale 0.17\ninitial_state 0\n").find("K") !=
          std::string::npos);
    CHECK(with_meta("B 60000\nT 16000000\nH 2\nHV 2\nK 32\nV 32\nscale 0.17\ninitial_state 0\n")
              .find("limit") != std::string::npos);
    CHECK(with_meta("B 1\nT 37\nH 2\nHV 2\nK 32\nV 32\nscale 0.17\ninitial_state 1\n").find("h0.f32") !=
          std::string::npos);
    REQUIRE(with_meta(meta_ok).empty());

    // A truncated value file: the message names it with both sizes.
    write_file(dir + "/ht.f32", "\0\0\0\0", 4);
    const std::string e = read_golden(dir, c);
    CHECK(e.find("ht.f32") != std::string::npos);
    CHECK(e.find("4 bytes") != std::string::npos);
    CHECK(e.find("8,192") != std::string::npos);
    // A positive log-decay is refused.
    copy_case(golden_dir("t37_k32_v32_h2"), dir);
    std::vector<float> g(37 * 2 * 32, -0.5f);
    g[5] = 0.25f;
    write_file(dir + "/g.f32", g.data(), g.size() * 4);
    CHECK(read_golden(dir, c).find("g.f32: element 5") != std::string::npos);
    // A NaN in an input.
    g[5] = NAN;
    write_file(dir + "/g.f32", g.data(), g.size() * 4);
    CHECK(read_golden(dir, c).find("not finite") != std::string::npos);
    for (const char* f : {"meta.txt", "q.f32", "k.f32", "v.f32", "g.f32", "beta.f32", "o.f32", "ht.f32"})
        std::remove((dir + "/" + f).c_str());
    ::rmdir(dir.c_str());
}
