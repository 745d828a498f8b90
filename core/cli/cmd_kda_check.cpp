// `k3cli kda-check DIR... [--chunk C] [--json]`: runs the project's recurrent and chunked KDA kernels
// (scalar and SIMD) on folders in the golden-vector format (tests/data/golden/kda/README.md) and prints
// the maximum absolute and relative RMS error of outputs and final states per folder and kernel.
// A folder of the bounded gate (tests/data/golden/kda_bounded) first checks the fp32 gate against its
// g.f32 (row "gate", within 1e-6 * max(1, max|g|): kGateRelTol in core/kda/golden.h), then feeds the
// kernels the gate it computed, so the whole path z -> g -> o, state is checked.
// Exit 0 when every kernel is within 1e-4 * max(1, max|expected|), 1 when one is not, 2 when a folder
// cannot be read (the message names the file) or checking it would exceed the project's run limits of
// 10 s and 1 GiB (estimated from meta.txt before any array is read; the message gives the estimate).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/cli/commands.h"
#include "core/experiments/experiment.h"
#include "core/kda/chunked.h"
#include "core/kda/golden.h"
#include "core/kda/recurrent.h"

namespace k3::cli {

namespace {

using namespace k3::kda;

struct Row {
    std::string folder, kernel;
    ErrorStats err;
};

ErrorStats run_case(const GoldenCase& c, bool chunk, int C, Impl impl) {
    const Shape& s = c.shape;
    ErrorStats all;
    FloatBuf S(s.state_floats()), o(size_t(c.T) * s.v_row());
    for (int b = 0; b < c.B; ++b) {
        if (c.has_h0)
            std::memcpy(S.data(), c.h0_of(b), S.size() * sizeof(float));
        else
            std::fill(S.begin(), S.end(), 0.0f);
        if (chunk)
            chunked(s, S.data(), c.tokens(b), c.scale, C, o.data(), impl);
        else
            recurrent(s, S.data(), c.tokens(b), c.scale, o.data(), impl);
        all.add(compare(o.data(), c.o_of(b), o.size()));
        all.add(compare(S.data(), c.ht_of(b), S.size()));
    }
    return all;
}

// A bounded-gate case: the fp32 gate against g.f32, then the case's g replaced by it (the kernels run on
// the gate the project computes).
ErrorStats check_gate(GoldenCase& c) {
    std::vector<float> g = golden_gate(c);
    ErrorStats e = compare(g.data(), c.g.data(), g.size());
    e.rel_tol = kGateRelTol;
    c.g = std::move(g);
    return e;
}

// kda-check holds every folder to the project's run limits (kRunSecondsLimit, kRunBytesLimit) before
// it reads any array, from the sizes its meta.txt declares.

struct Cost {
    double seconds = 0, bytes = 0;
};

// What checking case `c` (its meta.txt read) costs as run_case and check_gate spend it: CPU seconds of
// one core, natively, and the most memory held at once.
// Time, per token and value head: the recurrent kernel at 0.6 ns a multiply-add of its 4 K V
// (recurrent.h) plus 40 ns; the chunked one at 1.05 ns a multiply-add of its 3 K V state pass plus the
// pair work of chunked.h, n (1.5 K + V + 16) for chunks of n = min(C, T) tokens, at C / 128 ns each
// (at least 0.5): the scalar pair loops walk the [C][C] matrices by column, so a step costs more as C
// outgrows the caches. The SIMD kernels add an eighth, reading 3 ns a byte (1.9 measured on 337 MB).
// Measured as CPU time of the native build (AVX-512) on a shared 2-core EPYC: the eight bundled
// folders (tests/data/golden/kda, kda_bounded), each given 100 times, took 3.7 to 4.4 s against 4.6 s
// estimated; synthetic folders (K = V from 1 to 512, T up to 200,000, C from 1 to 1024) from 4 % more
// than estimated (9.8 s against 9.4 s for B = 4, T = 16,384, HV = 4, K = V = 64, C = 64; 8.8 s on a
// second run) to 3.5 times less (K = V = 1, C = 1024), the scalar kernels taking over 90 % of it.
Cost check_cost(const GoldenCase& c, int C, bool simd) {
    const Shape& s = c.shape;
    const double KV = double(s.K) * s.V, n = std::min(C, c.T), heads = double(c.B) * c.T * s.HV;
    const double recurrent_ns = 0.6 * 4 * KV + 40;
    const double chunked_ns = 1.05 * 3 * KV + n * (1.5 * s.K + s.V + 16) * std::max(C, 64) / 128.0;
    const GoldenBytes g = golden_bytes(c);
    Cost k;
    k.seconds = (heads * (recurrent_ns + chunked_ns) * (simd ? 1.125 : 1.0) + 3.0 * g.arrays) * 1e-9;
    // Beside the arrays: check_gate's new gate, then run_case's state, outputs and the chunked scratch.
    const double gate = c.has_gate() ? double(c.B) * c.T * double(s.g_row()) : 0.0;
    const double run = double(s.state_floats()) + double(c.T) * double(s.v_row()) +
                       double(chunked_scratch_floats(s, C)) + gate;
    k.bytes = std::max(g.reading, g.arrays + 4.0 * run);
    return k;
}

// Empty when a case is within the run limits, else why not, with the estimate and the limit.
std::string over_limits(const GoldenCase& c, int C, const Cost& k) {
    const Shape& s = c.shape;
    const std::string what = " for B*T*HV = " + format_grouped(double(c.B) * c.T * s.HV) +
                             " token-heads of " + std::to_string(s.K) + " x " + std::to_string(s.V) +
                             " states at C = " + std::to_string(C) + " (estimated from meta.txt)";
    if (k.bytes > kRunBytesLimit)
        return "checking would hold about " + format_bytes(k.bytes) + what + ", more than the run limit of " +
               format_bytes(kRunBytesLimit);
    if (k.seconds > kRunSecondsLimit)
        return "checking would take about " + format_sig(k.seconds, 2) + " s" + what +
               ", more than the run limit of " + format_number(kRunSecondsLimit) + " s";
    return {};
}

struct Options {
    std::vector<std::string> dirs;
    bool json = false;
    int C = 64;
};

// Fills `o`; returns 0, or 2 after printing what is wrong with the arguments.
int parse_args(const Args& args, Options& o) {
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json") {
            o.json = true;
        } else if (a == "--chunk") {
            const auto v = i + 1 < args.size() ? parse_integer(args[i + 1]) : std::nullopt;
            if (!v || *v < 1 || *v > kMaxChunk) {
                std::fprintf(stderr, "k3cli kda-check: --chunk needs an integer in [1, %d]\n", kMaxChunk);
                return 2;
            }
            o.C = int(*v);
            ++i;
        } else if (!a.empty() && a[0] == '-') {
            std::fprintf(stderr, "k3cli kda-check: bad argument '%s'\n", a.c_str());
            return 2;
        } else {
            o.dirs.push_back(a);
        }
    }
    if (o.dirs.empty()) {
        std::fprintf(stderr, "k3cli kda-check: give one or more golden folders (meta.txt + .f32 files)\n");
        return 2;
    }
    return 0;
}

// The folders' cases with meta.txt read, those over the run limits or unreadable left out with a message
// (`refused` set). Folders within the limits one by one but not together are all left out.
std::vector<GoldenCase> plan(const Options& o, bool simd, bool& refused) {
    std::vector<GoldenCase> cases;
    double seconds = 0;
    for (const auto& d : o.dirs) {
        GoldenCase c;
        std::string err = read_golden_meta(d, c);
        const Cost k = err.empty() ? check_cost(c, o.C, simd) : Cost{};
        if (err.empty()) err = over_limits(c, o.C, k);
        if (!err.empty()) {
            std::fprintf(stderr, "k3cli kda-check: %s: %s\n", d.c_str(), err.c_str());
            refused = true;
            continue;
        }
        seconds += k.seconds;
        cases.push_back(std::move(c));
    }
    if (seconds > kRunSecondsLimit) {
        std::fprintf(stderr,
                     "k3cli kda-check: the %zu folders together would take about %s s (estimated from their "
                     "meta.txt), more than the run limit of %s s; check them in smaller groups\n",
                     cases.size(), format_sig(seconds, 2).c_str(), format_number(kRunSecondsLimit).c_str());
        refused = true;
        cases.clear();
    }
    return cases;
}

void print_rows(const std::vector<Row>& rows, bool json, bool passed) {
    if (json) {
        JsonWriter w(true);
        w.begin_object()
            .field("build", K3_BUILD_NAME)
            .field("arch", simd_arch())
            .key("results")
            .begin_array();
        for (const auto& r : rows)
            w.begin_object()
                .field("folder", r.folder)
                .field("kernel", r.kernel)
                .field("max_abs", r.err.max_abs)
                .field("rel_rms", r.err.rel_rms())
                .field("tolerance", r.err.tolerance())
                .field("non_finite", double(r.err.non_finite))
                .field("passed", r.err.within())
                .end_object();
        w.end_array().field("passed", passed).end_object();
        std::printf("%s\n", w.str().c_str());
        return;
    }
    std::printf("%-40s %-36s %12s %12s %12s  %s\n", "folder", "kernel", "max |diff|", "rel RMS", "tolerance",
                "result");
    for (const auto& r : rows)
        std::printf("%-40s %-36s %12s %12s %12s  %s\n", r.folder.c_str(), r.kernel.c_str(),
                    format_sig(r.err.max_abs, 3).c_str(), format_sig(r.err.rel_rms(), 3).c_str(),
                    format_sig(r.err.tolerance(), 3).c_str(),
                    r.err.within() ? "ok" : (r.err.non_finite ? "FAIL (non-finite)" : "FAIL"));
}

int cmd_kda_check(const Args& args) {
    Options o;
    if (const int rc = parse_args(args, o)) return rc;
    std::vector<Impl> impls = {Impl::scalar};
    if (simd_enabled()) impls.push_back(Impl::simd);
    bool unreadable = false;
    std::vector<Row> rows;
    for (GoldenCase& meta : plan(o, simd_enabled(), unreadable)) {
        GoldenCase c = std::move(meta);  // its arrays go when the next folder is read
        const std::string err = read_golden_arrays(c);
        if (!err.empty()) {
            std::fprintf(stderr, "k3cli kda-check: %s: %s\n", c.dir.c_str(), err.c_str());
            unreadable = true;
            continue;
        }
        if (c.has_gate()) rows.push_back({c.dir, "gate (bounded, fp32)", check_gate(c)});
        for (Impl impl : impls) {
            const std::string suffix = impl == Impl::simd ? std::string("/") + simd_arch() : "/scalar";
            rows.push_back({c.dir, "recurrent" + suffix, run_case(c, false, o.C, impl)});
            rows.push_back(
                {c.dir, "chunked C=" + std::to_string(o.C) + suffix, run_case(c, true, o.C, impl)});
        }
    }
    bool failed = false;
    for (const auto& r : rows) failed |= !r.err.within();
    print_rows(rows, o.json, !failed && !unreadable);
    return unreadable ? 2 : failed ? 1 : 0;
}

}  // namespace

K3_REGISTER_COMMAND(
    "kda-check", "DIR... [--chunk C] [--json]",
    "check the KDA kernels against golden vectors (meta.txt + .f32 files, see tests/data/golden/kda)",
    cmd_kda_check, 40);

}  // namespace k3::cli
