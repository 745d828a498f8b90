#include "core/boundaries/grid.h"

#include <algorithm>
#include <cmath>

#include "core/base/fmath.h"

namespace k3::boundaries {

std::vector<double> linear_axis(double lo, double hi, int n) {
    if (n <= 1) return {lo};
    std::vector<double> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[size_t(i)] = lo + (hi - lo) * double(i) / double(n - 1);
    v.back() = hi;
    return v;
}

std::vector<double> log_axis(double lo, double hi, int n) {
    if (n <= 1) return {lo};
    const double a = log_f64(lo), b = log_f64(hi);
    std::vector<double> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[size_t(i)] = exp_f64(a + (b - a) * double(i) / double(n - 1));
    v.front() = lo;
    v.back() = hi;
    return v;
}

std::vector<double> integer_log_axis(double lo, double hi, int n) {
    std::vector<double> v = log_axis(lo, hi, n);
    for (double& x : v) x = std::floor(x + 0.5);
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

namespace {

bool pays(double y) { return y >= 0; }

template <class Mid>
std::optional<SignChange> scan_then_bisect(const std::function<double(double)>& f,
                                           const std::vector<double>& xs, Mid mid) {
    if (xs.empty()) return std::nullopt;
    const bool first = pays(f(xs[0]));
    for (size_t i = 1; i < xs.size(); ++i) {
        if (pays(f(xs[i])) == first) continue;
        double a = xs[i - 1], b = xs[i];  // f(a) on the first side, f(b) on the new one
        for (int k = 0; k < 200; ++k) {
            const std::optional<double> m = mid(a, b);
            if (!m) break;
            (pays(f(*m)) == first ? a : b) = *m;
        }
        return SignChange{b, !first};
    }
    return std::nullopt;
}

}  // namespace

std::optional<SignChange> first_sign_change(const std::function<double(double)>& f, double lo, double hi,
                                            bool log, int samples) {
    const std::vector<double> xs = log ? log_axis(lo, hi, samples) : linear_axis(lo, hi, samples);
    return scan_then_bisect(f, xs, [log](double a, double b) -> std::optional<double> {
        if (b - a <= 1e-9 * std::max(std::abs(a), std::abs(b))) return std::nullopt;
        return log ? std::sqrt(a * b) : (a + b) / 2;
    });
}

std::optional<SignChange> first_sign_change_int(const std::function<double(double)>& f, double lo, double hi,
                                                int samples) {
    const std::vector<double> xs = integer_log_axis(lo, hi, samples);
    return scan_then_bisect(f, xs, [](double a, double b) -> std::optional<double> {
        if (b - a <= 1) return std::nullopt;
        return std::floor((a + b) / 2);
    });
}

bool has_both_signs(const std::vector<double>& z, double level) {
    bool above = false, below = false;
    for (double v : z) {
        if (std::isnan(v)) continue;
        (v >= level ? above : below) = true;
    }
    return above && below;
}

double wins_everywhere_from(const std::vector<double>& x, const std::vector<double>& z, double level) {
    double from = NAN;
    const size_t rows = x.empty() ? 0 : z.size() / x.size();
    for (size_t ix = x.size(); ix-- > 0;) {
        bool all = true;
        for (size_t iy = 0; iy < rows; ++iy) all = all && z[iy * x.size() + ix] > level;
        if (!all) break;
        from = x[ix];
    }
    return from;
}

}  // namespace k3::boundaries
