// Reader of KDA golden-vector folders (the format of tests/data/golden/kda/README.md): meta.txt with "name
// value" lines (B, T, H, HV, K, V, scale, initial_state, seed) and little-endian float32 files q, k
// [B][T][H][K], v [B][T][HV][V], g [B][T][HV][K], beta [B][T][HV], h0 (optional) and ht [B][HV][K][V], o
// [B][T][HV][V]. A case of the bounded gate (tests/data/golden/kda_bounded/README.md) also has
// "gate_lower_bound" in meta.txt and the gate's inputs z [B][T][HV][K], A_log [HV], dt_bias [HV][K]; its
// g.f32 is then the expected gate. Everything read is bounds-checked: a wrong size, a missing file, a bad
// meta line or a non-finite value is reported with the file (and line or element) it concerns; nothing
// throws.
#pragma once

#include <string>
#include <vector>

#include "core/kda/layout.h"

namespace k3::kda {

struct GoldenCase {
    std::string dir;
    int B = 0, T = 0;
    Shape shape;
    float scale = 0;
    bool has_h0 = false;
    float gate_lower_bound = 0;  // below 0: a bounded-gate case with z, A_log, dt_bias
    std::vector<float> q, k, v, g, beta, h0, o, ht;
    std::vector<float> z, A_log, dt_bias;

    bool has_gate() const { return gate_lower_bound < 0; }

    // Batch b as a token view and its slices of h0 / o / ht.
    Tokens tokens(int b) const;
    const float* h0_of(int b) const {
        return has_h0 ? h0.data() + size_t(b) * shape.state_floats() : nullptr;
    }
    const float* o_of(int b) const { return o.data() + size_t(b) * size_t(T) * shape.v_row(); }
    const float* ht_of(int b) const { return ht.data() + size_t(b) * shape.state_floats(); }
};

// Largest case accepted (bytes of all arrays together), so that a corrupt meta.txt cannot make the
// reader allocate without bound.
inline constexpr double kGoldenMaxBytes = 1024.0 * 1024.0 * 1024.0;

// Returns an empty string on success, else the error ("q.f32: 1024 bytes, expected 2048 (B*T*H*K = 512
// floats)"). The same as read_golden_meta, then read_golden_arrays.
std::string read_golden(const std::string& dir, GoldenCase& out);
// meta.txt alone, checked (dimensions, scale, kGoldenMaxBytes): what a caller needs to size the work
// before it reads the arrays (k3cli kda-check refuses a case over the run limits without reading it).
std::string read_golden_meta(const std::string& dir, GoldenCase& out);
// The .f32 files of a case whose meta read_golden_meta has filled in (from out.dir).
std::string read_golden_arrays(GoldenCase& out);

// Bytes of a case as its meta.txt declares them: `arrays`, all its arrays together, and `reading`, the
// most read_golden holds at once (the arrays and one file's bytes on their way into floats).
struct GoldenBytes {
    double arrays = 0, reading = 0;
};
GoldenBytes golden_bytes(const GoldenCase& c);

// Error of `got` against `want`: max |diff|, relative RMS ||want - got|| / ||want|| and max |want| (for
// the tolerance 1e-4 * max(1, max|want|) of the golden README). Accumulated in double; `add` merges
// the statistics of several arrays (outputs and final state, say) as if they were one.
struct ErrorStats {
    double max_abs = 0, max_ref = 0, ss_diff = 0, ss_ref = 0;
    size_t count = 0, non_finite = 0;
    double rel_tol = 1e-4;  // the tolerance is rel_tol * max(1, max|want|)
    double rel_rms() const;
    double tolerance() const { return rel_tol * (max_ref > 1 ? max_ref : 1.0); }
    bool within() const { return non_finite == 0 && max_abs <= tolerance(); }
    ErrorStats& add(const ErrorStats& o);
};
ErrorStats compare(const float* got, const float* want, size_t n);
ErrorStats compare(const float* got, const double* want, size_t n);

// The tolerance of a bounded gate computed in fp32 (kda_gate_bounded) against the fp64 gate rounded to
// fp32: 1e-6 * max(1, max|g|). The fp32 argument u = exp(A_log) (z + dt_bias) has three roundings, which
// move g by |lb| sigmoid(u) (1 - sigmoid(u)) 3 |u| eps <= |lb| 0.224 * 3 eps; sigmoid_f32 and the product
// add about 4 |g| eps, the stored fp32 half an ulp: |dg| <= 5.2 |lb| eps = 1.6e-6 for lb = -5, under the
// tolerance of 5e-6 (eps = 2^-24).
inline constexpr double kGateRelTol = 1e-6;

// g of every token of a bounded-gate case with the fp32 kernel, [B][T][HV][K].
std::vector<float> golden_gate(const GoldenCase& c);

}  // namespace k3::kda
