#include "ui/plot_math.h"

#include <algorithm>
#include <cstdio>

#include "core/base/numfmt.h"

namespace k3::ui {

// ---- data ranges and axes -----------------------------------------------------------------------

void fit_axis(PlotAxis& a, const ValueRange& r, bool include_zero, bool pad) {
    double lo = a.log ? r.min_positive : r.lo, hi = r.hi;
    if (!(lo <= hi)) lo = hi = a.log ? 1 : 0;
    if (a.log) {
        if (hi <= lo) lo /= 2, hi *= 2;
        a.lo = lo;
        a.hi = hi;
        return;
    }
    if (include_zero) {
        lo = std::min(lo, 0.0);
        hi = std::max(hi, 0.0);
    }
    if (hi <= lo) {
        const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
        lo -= d;
        hi += d;
    } else if (!pad) {
        a.lo = lo;
        a.hi = hi;
        return;
    }
    const double margin = (hi - lo) * 0.04;
    a.lo = (include_zero && lo == 0) ? 0 : lo - margin;
    a.hi = hi + margin;
}

// A range [u0, u1] in an axis's linear coordinate that doubles can show with distinct ticks, and
// whose ends exist on the scale (10^u on a log axis).
static bool usable(const PlotAxis& a, double u0, double u1) {
    if (!(std::isfinite(u0) && std::isfinite(u1) && u1 > u0)) return false;
    const double mag = std::max({std::fabs(u0), std::fabs(u1), a.log ? 1.0 : 0.0});
    if (u1 - u0 < mag * 1e-9) return false;
    return a.log ? (u0 > -300 && u1 < 300) : mag < 1e300;
}

// `a` with the ends u0, u1 in its linear coordinate, or `a` itself when they are not usable.
static PlotAxis with_ends(const PlotAxis& a, double u0, double u1) {
    if (!usable(a, u0, u1)) return a;
    PlotAxis z = a;
    z.lo = a.from_linear(u0);
    z.hi = a.from_linear(u1);
    return z;
}

PlotAxis zoom_axis(PlotAxis a, double at, double factor) {
    const double u0 = a.to_linear(a.lo), u1 = a.to_linear(a.hi);
    const double pivot = u0 + at * (u1 - u0);
    return with_ends(a, pivot - (pivot - u0) * factor, pivot + (u1 - pivot) * factor);
}

PlotAxis pan_axis(PlotAxis a, double shift) {
    const double u0 = a.to_linear(a.lo), u1 = a.to_linear(a.hi);
    const double d = shift * (u1 - u0);
    return with_ends(a, u0 + d, u1 + d);
}

// ---- screen geometry ----------------------------------------------------------------------------

bool clip_segment(ScreenPoint& a, ScreenPoint& b, ScreenPoint lo, ScreenPoint hi) {
    const double dx = b.x - a.x, dy = b.y - a.y;
    const double p[4] = {-dx, dx, -dy, dy}, q[4] = {a.x - lo.x, hi.x - a.x, a.y - lo.y, hi.y - a.y};
    double t0 = 0, t1 = 1;
    for (int i = 0; i < 4; ++i) {
        if (p[i] == 0) {
            if (q[i] < 0) return false;  // parallel to this edge and outside it
            continue;
        }
        const double r = q[i] / p[i];
        if (p[i] < 0)
            t0 = std::max(t0, r);
        else
            t1 = std::min(t1, r);
        if (t0 > t1) return false;
    }
    const ScreenPoint a0 = a;
    if (t1 < 1) b = {a0.x + t1 * dx, a0.y + t1 * dy};
    if (t0 > 0) a = {a0.x + t0 * dx, a0.y + t0 * dy};
    return true;
}

// ---- ticks and labels ---------------------------------------------------------------------------

// Significant digits that tell v from v + step: 3 at least (the labels of an unzoomed axis).
static int tick_digits(double v, double step) {
    if (!(step > 0) || v == 0) return 3;
    const int d = int(std::floor(std::log10(std::fabs(v))) - std::floor(std::log10(step))) + 2;
    return std::clamp(d, 3, 15);
}

static std::string short_num(double v, double step) {
    if (v == 0) return "0";
    const double a = std::fabs(v);
    const int digits = tick_digits(v, step);
    if (a >= 1e15 || a < 1e-4) {
        char b[40];
        std::snprintf(b, sizeof b, "%.*g", step > 0 ? digits : 2, v);
        return b;
    }
    static const struct {
        double f;
        const char* s;
    } si[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    for (const auto& x : si)
        if (a >= x.f) return trim_zeros(format_sig(v / x.f, digits)) + x.s;
    return trim_zeros(format_sig(v, digits));
}

std::string format_tick(double v, const std::string& unit, double step) {
    if (unit == "B") {
        static const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double a = std::fabs(v), s = step;
        int i = 0;
        while (a >= 1024 && i < 5) a /= 1024, s /= 1024, ++i;
        return (v < 0 ? "-" : "") + trim_zeros(format_sig(a, tick_digits(a, s))) + " " + u[i];
    }
    if (unit == "fraction") return trim_zeros(format_sig(v * 100, tick_digits(v * 100, step * 100))) + "%";
    return short_num(v, step);
}

double tick_step(const std::vector<double>& ticks) {
    double step = 0;
    for (size_t i = 1; i < ticks.size(); ++i) {
        const double d = ticks[i] - ticks[i - 1];
        if (d > 0 && (step == 0 || d < step)) step = d;
    }
    return step;
}

static double nice_step(double raw) {
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// Powers of two, every 1, 2, 5, 10... exponents; fewer than two: linear binary steps.
static std::vector<double> binary_log_ticks(double lo, double hi, int target) {
    std::vector<double> t;
    const int e0 = int(std::ceil(std::log2(lo) - 1e-9)), e1 = int(std::floor(std::log2(hi) + 1e-9));
    int step = 1;
    for (int s : {1, 2, 5, 10, 20, 30, 40, 50}) {
        step = s;
        if ((e1 - e0) / s + 1 <= target) break;
    }
    // Prefer whole binary units (multiples of 10 in the exponent) when stepping by 10s.
    const int start = step % 10 == 0 ? int(std::ceil(e0 / 10.0)) * 10 : e0;
    for (int e = start; e <= e1; e += step) t.push_back(std::ldexp(1.0, e));
    if (t.size() >= 2) return t;
    return nice_ticks(lo, hi, target, false, true);
}

// Decades, with 2 and 5 between where there is room (two decades or less, or a zoomed-in range
// that crosses three); less than a decade: linear steps.
static std::vector<double> decade_ticks(double lo, double hi, int target) {
    std::vector<double> t;
    const int d0 = int(std::floor(std::log10(lo))), d1 = int(std::ceil(std::log10(hi)));
    const int decades = std::max(1, d1 - d0);
    const bool between = decades <= 2 || std::log10(hi / lo) * 3 <= target;
    const int every = std::max(1, (decades + target - 1) / target);
    for (int d = d0; d <= d1; ++d) {
        if ((d - d0) % every) continue;
        const double base = std::pow(10.0, d);
        if (base >= lo * (1 - 1e-9) && base <= hi * (1 + 1e-9)) t.push_back(base);
        if (between)
            for (double m : {2.0, 5.0})
                if (base * m >= lo && base * m <= hi) t.push_back(base * m);
    }
    std::sort(t.begin(), t.end());
    if (t.size() < 2) return nice_ticks(lo, hi, target, false);
    return t;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool log_scale, bool binary) {
    std::vector<double> t;
    if (!(hi > lo) || target < 1) return t;
    if (log_scale) return binary ? binary_log_ticks(lo, hi, target) : decade_ticks(lo, hi, target);
    double step = nice_step((hi - lo) / target);
    if (binary) {
        // Linear bytes: nice steps in the binary unit that fits the range (128 MiB, 512 MiB, 1 GiB...).
        double unit = 1;
        while (unit * 1024 <= (hi - lo) / target * 4 && unit < 1125899906842624.0) unit *= 1024;
        step = nice_step((hi - lo) / target / unit) * unit;
        const double p2 = std::ldexp(1.0, int(std::round(std::log2(step / unit)))) * unit;
        if (p2 >= step * 0.6 && p2 <= step * 1.6) step = p2;  // prefer powers of two: 256 MiB over 200 MiB
    }
    // Counted from an integer multiple of the step, so that far from 0 (a zoomed axis) the ticks stay
    // multiples of it instead of drifting by rounding.
    for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; k += 1) {
        const double v = k * step;
        t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
    }
    return t;
}

}  // namespace k3::ui
