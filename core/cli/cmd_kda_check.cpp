// `k3cli kda-check DIR... [--chunk C] [--json]`: runs the project's recurrent and chunked KDA kernels
// (scalar and SIMD) on folders in the golden-vector format (tests/data/golden/kda/README.md) and prints
// the maximum absolute and relative RMS error of outputs and final states per folder and kernel.
// A folder of the bounded gate (tests/data/golden/kda_bounded) first checks the fp32 gate against its
// g.f32 (row "gate", within 1e-6 * max(1, max|g|): kGateRelTol in core/kda/golden.h), then feeds the
// kernels the gate it computed, so the whole path z -> g -> o, state is checked.
// Exit 0 when every kernel is within 1e-4 * max(1, max|expected|), 1 when one is not, 2 when a folder
// cannot be read (the message names the file).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/cli/commands.h"
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

int cmd_kda_check(const Args& args) {
    std::vector<std::string> dirs;
    bool json = false;
    int C = 64;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json") {
            json = true;
        } else if (a == "--chunk") {
            const auto v = i + 1 < args.size() ? parse_integer(args[i + 1]) : std::nullopt;
            if (!v || *v < 1 || *v > kMaxChunk) {
                std::fprintf(stderr, "k3cli kda-check: --chunk needs an integer in [1, %d]\n", kMaxChunk);
                return 2;
            }
            C = int(*v);
            ++i;
        } else if (!a.empty() && a[0] == '-') {
            std::fprintf(stderr, "k3cli kda-check: bad argument '%s'\n", a.c_str());
            return 2;
        } else {
            dirs.push_back(a);
        }
    }
    if (dirs.empty()) {
        std::fprintf(stderr, "k3cli kda-check: give one or more golden folders (meta.txt + .f32 files)\n");
        return 2;
    }
    std::vector<Impl> impls = {Impl::scalar};
    if (simd_enabled()) impls.push_back(Impl::simd);
    std::vector<Row> rows;
    bool unreadable = false;
    for (const auto& d : dirs) {
        GoldenCase c;
        const std::string err = read_golden(d, c);
        if (!err.empty()) {
            std::fprintf(stderr, "k3cli kda-check: %s: %s\n", d.c_str(), err.c_str());
            unreadable = true;
            continue;
        }
        if (c.has_gate()) rows.push_back({d, "gate (bounded, fp32)", check_gate(c)});
        for (Impl impl : impls) {
            const std::string suffix = impl == Impl::simd ? std::string("/") + simd_arch() : "/scalar";
            rows.push_back({d, "recurrent" + suffix, run_case(c, false, C, impl)});
            rows.push_back({d, "chunked C=" + std::to_string(C) + suffix, run_case(c, true, C, impl)});
        }
    }
    bool failed = false;
    for (const auto& r : rows) failed |= !r.err.within();
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
        w.end_array().field("passed", !failed && !unreadable).end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::printf("%-40s %-36s %12s %12s %12s  %s\n", "folder", "kernel", "max |diff|", "rel RMS",
                    "tolerance", "result");
        for (const auto& r : rows)
            std::printf("%-40s %-36s %12s %12s %12s  %s\n", r.folder.c_str(), r.kernel.c_str(),
                        format_sig(r.err.max_abs, 3).c_str(), format_sig(r.err.rel_rms(), 3).c_str(),
                        format_sig(r.err.tolerance(), 3).c_str(),
                        r.err.within() ? "ok" : (r.err.non_finite ? "FAIL (non-finite)" : "FAIL"));
    }
    return unreadable ? 2 : failed ? 1 : 0;
}

}  // namespace

K3_REGISTER_COMMAND(
    "kda-check", "DIR... [--chunk C] [--json]",
    "check the KDA kernels against golden vectors (meta.txt + .f32 files, see tests/data/golden/kda)",
    cmd_kda_check, 40);

}  // namespace k3::cli
