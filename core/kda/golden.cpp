#include "core/kda/golden.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/base/numfmt.h"
#include "core/kda/gates.h"

namespace k3::kda {

Tokens GoldenCase::tokens(int b) const {
    const size_t t = size_t(b) * size_t(T);
    return {q.data() + t * shape.qk_row(), k.data() + t * shape.qk_row(),      v.data() + t * shape.v_row(),
            g.data() + t * shape.g_row(),  beta.data() + t * size_t(shape.HV), T};
}

namespace {

constexpr size_t kSlurpChunk = 65536;  // bytes fread takes at a time

// Whole file into memory, at most max_bytes + 1 bytes (enough to see that it is too long).
// Returns false with `err` set when the file cannot be opened.
bool slurp(const std::string& path, size_t max_bytes, std::string& data, std::string& err) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        err = "cannot open";
        return false;
    }
    data.clear();
    char buf[kSlurpChunk];
    // Room for all that can be read up front: growing by doubling would hold up to twice the file.
    data.reserve(max_bytes + sizeof buf);
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
        data.append(buf, n);
        if (data.size() > max_bytes) break;
    }
    const bool bad = std::ferror(f) != 0;
    std::fclose(f);
    if (bad) {
        err = "read error";
        return false;
    }
    return true;
}

std::string read_f32(const std::string& dir, const char* name, size_t count, const std::string& shape_text,
                     std::vector<float>& out) {
    std::string data, err;
    const std::string file = std::string(name) + ".f32";
    if (!slurp(dir + "/" + file, count * 4, data, err)) return file + ": " + err;
    if (data.size() != count * 4)
        return file + ": " + (data.size() > count * 4 ? "more than " : "") +
               format_grouped(double(data.size())) + " bytes, expected " + format_grouped(double(count * 4)) +
               " (" + shape_text + " = " + format_grouped(double(count)) + " float32)";
    out.resize(count);
    for (size_t e = 0; e < count; ++e) {
        const auto* p = reinterpret_cast<const unsigned char*>(data.data() + 4 * e);
        const uint32_t u = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
        float f;
        std::memcpy(&f, &u, 4);
        if (!std::isfinite(f)) return file + ": element " + std::to_string(e) + " is not finite";
        out[e] = f;
    }
    return {};
}

// The .f32 files of a case in the order they are read: name, floats (in double: a corrupt meta.txt
// can declare more than size_t holds), shape for messages, and the array it fills.
struct ArrayFile {
    const char* name;
    double count;
    const char* shape;
    std::vector<float> GoldenCase::*array;
};

std::vector<ArrayFile> array_files(const GoldenCase& c) {
    const Shape& s = c.shape;
    const double bt = double(c.B) * c.T, st = double(c.B) * double(s.state_floats());
    std::vector<ArrayFile> f = {{"q", bt * double(s.qk_row()), "B*T*H*K", &GoldenCase::q},
                                {"k", bt * double(s.qk_row()), "B*T*H*K", &GoldenCase::k},
                                {"v", bt * double(s.v_row()), "B*T*HV*V", &GoldenCase::v},
                                {"g", bt * double(s.g_row()), "B*T*HV*K", &GoldenCase::g},
                                {"beta", bt * s.HV, "B*T*HV", &GoldenCase::beta}};
    if (c.has_h0) f.push_back({"h0", st, "B*HV*K*V", &GoldenCase::h0});
    f.push_back({"o", bt * double(s.v_row()), "B*T*HV*V", &GoldenCase::o});
    f.push_back({"ht", st, "B*HV*K*V", &GoldenCase::ht});
    if (c.has_gate()) {  // z [B][T][HV][K], A_log [HV], dt_bias [HV][K]
        f.push_back({"z", bt * double(s.g_row()), "B*T*HV*K", &GoldenCase::z});
        f.push_back({"A_log", double(s.HV), "HV", &GoldenCase::A_log});
        f.push_back({"dt_bias", double(s.g_row()), "HV*K", &GoldenCase::dt_bias});
    }
    return f;
}

}  // namespace

GoldenBytes golden_bytes(const GoldenCase& c) {
    GoldenBytes b;
    double largest = 0;
    for (const ArrayFile& f : array_files(c)) {
        b.arrays += 4.0 * f.count;
        largest = std::fmax(largest, 4.0 * f.count);
    }
    b.reading = b.arrays + largest + kSlurpChunk;
    return b;
}

std::string read_golden_meta(const std::string& dir, GoldenCase& c) {
    c = GoldenCase{};
    c.dir = dir;
    std::string meta, err;
    if (!slurp(dir + "/meta.txt", 1 << 16, meta, err))
        return "meta.txt: " + err + " (is " + dir + " a golden folder?)";
    if (meta.size() > (1 << 16)) return "meta.txt: longer than 64 KiB";
    std::map<std::string, double> kv;
    size_t pos = 0;
    int line = 0;
    while (pos < meta.size()) {
        size_t end = meta.find('\n', pos);
        if (end == std::string::npos) end = meta.size();
        std::string text = meta.substr(pos, end - pos);
        pos = end + 1;
        ++line;
        if (!text.empty() && text.back() == '\r') text.pop_back();
        const size_t a = text.find_first_not_of(" \t");
        if (a == std::string::npos) continue;
        const size_t sp = text.find_first_of(" \t", a);
        const std::string key = text.substr(a, sp == std::string::npos ? std::string::npos : sp - a);
        const std::string val = sp == std::string::npos ? "" : text.substr(sp);
        const auto x = parse_real(val);
        if (!x) return "meta.txt line " + std::to_string(line) + ": bad value for '" + shown_text(key) + "'";
        kv[key] = *x;
    }
    for (const char* key : {"B", "T", "H", "HV", "K", "V", "scale", "initial_state"})
        if (!kv.count(key)) return std::string("meta.txt: missing '") + key + "'";
    auto dim = [&](const char* key, double lo, double hi, int& out) -> std::string {
        const double x = kv[key];
        if (!(x >= lo && x <= hi) || x != std::floor(x))
            return std::string("meta.txt: ") + key + " = " + format_number(x) + " is not an integer in [" +
                   format_number(lo) + ", " + format_number(hi) + "]";
        out = int(x);
        return {};
    };
    std::string e;
    if (!(e = dim("B", 1, 1 << 16, c.B)).empty() || !(e = dim("T", 1, 1 << 24, c.T)).empty() ||
        !(e = dim("H", 1, 1 << 16, c.shape.H)).empty() || !(e = dim("HV", 1, 1 << 16, c.shape.HV)).empty() ||
        !(e = dim("K", 1, kMaxHeadDim, c.shape.K)).empty() ||
        !(e = dim("V", 1, kMaxHeadDim, c.shape.V)).empty())
        return e;
    if (!(e = c.shape.problem()).empty()) return "meta.txt: " + e;
    int init = 0;
    if (!(e = dim("initial_state", 0, 1, init)).empty()) return e;
    c.has_h0 = init == 1;
    c.scale = float(kv["scale"]);
    if (!(c.scale > 0) || !std::isfinite(c.scale)) return "meta.txt: scale must be a positive number";
    if (kv.count("gate_lower_bound")) {
        c.gate_lower_bound = float(kv["gate_lower_bound"]);
        if (!(c.gate_lower_bound < 0) || !(c.gate_lower_bound > -1000))
            return "meta.txt: gate_lower_bound must be a negative number above -1000";
    }
    const double total = golden_bytes(c).arrays;
    if (total > kGoldenMaxBytes)
        return "meta.txt: the case would need " + format_bytes(total) + ", more than the limit of " +
               format_bytes(kGoldenMaxBytes);
    return {};
}

std::string read_golden_arrays(GoldenCase& c) {
    std::string e;
    for (const ArrayFile& f : array_files(c))
        if (!(e = read_f32(c.dir, f.name, size_t(f.count), f.shape, c.*f.array)).empty()) return e;
    for (size_t x = 0; x < c.g.size(); ++x)
        if (c.g[x] > 0)
            return "g.f32: element " + std::to_string(x) + " is " + format_number(c.g[x]) +
                   "; a log-decay must be <= 0";
    return {};
}

std::string read_golden(const std::string& dir, GoldenCase& c) {
    const std::string e = read_golden_meta(dir, c);
    return e.empty() ? read_golden_arrays(c) : e;
}

std::vector<float> golden_gate(const GoldenCase& c) {
    std::vector<float> g(c.z.size());
    const Shape& s = c.shape;
    for (size_t t = 0; c.has_gate() && t < size_t(c.B) * size_t(c.T); ++t)
        kda_gate_bounded(c.z.data() + t * s.g_row(), c.dt_bias.data(), c.A_log.data(), s.HV, s.K,
                         c.gate_lower_bound, g.data() + t * s.g_row());
    return g;
}

double ErrorStats::rel_rms() const {
    if (ss_ref > 0) return std::sqrt(ss_diff / ss_ref);
    return ss_diff > 0 ? INFINITY : 0.0;
}

ErrorStats& ErrorStats::add(const ErrorStats& o) {
    max_abs = std::fmax(max_abs, o.max_abs);
    max_ref = std::fmax(max_ref, o.max_ref);
    ss_diff += o.ss_diff;
    ss_ref += o.ss_ref;
    count += o.count;
    non_finite += o.non_finite;
    return *this;
}

template <class T>
static ErrorStats compare_impl(const float* got, const T* want, size_t n) {
    ErrorStats st;
    st.count = n;
    for (size_t e = 0; e < n; ++e) {
        const double w = double(want[e]), x = double(got[e]);
        if (!std::isfinite(x)) {
            ++st.non_finite;
            continue;
        }
        const double d = std::fabs(w - x);
        st.max_abs = std::fmax(st.max_abs, d);
        st.max_ref = std::fmax(st.max_ref, std::fabs(w));
        st.ss_diff += d * d;
        st.ss_ref += w * w;
    }
    return st;
}

ErrorStats compare(const float* got, const float* want, size_t n) { return compare_impl(got, want, n); }
ErrorStats compare(const float* got, const double* want, size_t n) { return compare_impl(got, want, n); }

}  // namespace k3::kda
