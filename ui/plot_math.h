// The charts' pure part, apart from ImGui so that tests/unit/test_plot_math.cpp can check it: axis
// scales, fitting, zoom and pan, tick positions and their labels, and dashes along a polyline.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace k3::ui {

// ---- data ranges and axes -----------------------------------------------------------------------

// The finite values of one coordinate: their range, and the smallest positive one (where a log axis
// can start).
struct ValueRange {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, min_positive = lo;
    void add(double v) {
        if (!std::isfinite(v)) return;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        if (v > 0) min_positive = std::min(min_positive, v);
    }
    void add(const ValueRange& r) {
        lo = std::min(lo, r.lo);
        hi = std::max(hi, r.hi);
        min_positive = std::min(min_positive, r.min_positive);
    }
    bool empty() const { return !(lo <= hi); }
    bool operator==(const ValueRange&) const = default;
};

// One axis of a chart: the visible range and its scale.
struct PlotAxis {
    double lo = 0, hi = 1;
    bool log = false;
    // The coordinate the axis is linear in (log10 on a log axis) and back.
    double to_linear(double v) const { return log ? std::log10(v) : v; }
    double from_linear(double u) const { return log ? std::pow(10.0, u) : u; }
    // The value at fraction f of the axis (0 at lo, 1 at hi).
    double unmap(double f) const { return from_linear(to_linear(lo) + f * (to_linear(hi) - to_linear(lo))); }
    bool valid(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

// The range that shows `r` on `a`'s scale: from the smallest positive value on a log axis; with a
// margin of 4% on a linear one when `pad`; from 0 when `include_zero` (bars). An empty or single
// value range gets a width around it.
void fit_axis(PlotAxis& a, const ValueRange& r, bool include_zero, bool pad);

// `a` zoomed by `factor` (below 1 zooms in) around the point at fraction `at` of the axis, which
// stays where it is. Zooms on a log axis are even in decades. A zoom past what doubles resolve (or
// out to absurd ranges) leaves the axis as it was.
PlotAxis zoom_axis(PlotAxis a, double at, double factor);
// `a` moved by `shift` times its length (positive: toward higher values), in its own scale.
PlotAxis pan_axis(PlotAxis a, double shift);

// ---- ticks and labels ---------------------------------------------------------------------------

// Tick positions: linear "nice" steps (1, 2, 5 x 10^k) or decades (with 2 and 5 between when
// there are few decades); with `binary` on a log axis, powers of two (1 KiB, 1 MiB, ... for bytes).
std::vector<double> nice_ticks(double lo, double hi, int target, bool log_scale, bool binary = false);

// Compact tick text of a value in a unit ("64 MiB", "1M", "37 %"). With `step`, the distance to the
// next tick, enough digits that neighbouring ticks read differently (zoomed axes: "1.0002M").
std::string format_tick(double v, const std::string& unit, double step = 0);

// The smallest distance between neighbouring ticks (0 for fewer than two).
double tick_step(const std::vector<double>& ticks);

// ---- screen geometry ----------------------------------------------------------------------------

// A point in screen pixels, in doubles: a zoomed-in view puts far data points at 1e12 pixels and
// more, where floats (ImDrawList's) are off by thousands of pixels.
struct ScreenPoint {
    double x = 0, y = 0;
    bool operator==(const ScreenPoint&) const = default;
};

// Cuts the segment a-b to its part inside the box [lo, hi] (Liang-Barsky); false when none of it is.
// An end inside the box is left exactly as it was.
bool clip_segment(ScreenPoint& a, ScreenPoint& b, ScreenPoint lo, ScreenPoint hi);

// ---- dashes -------------------------------------------------------------------------------------

// Cuts the polyline p[0..n) into dashes `on` long with gaps `off` long, measured along the line, so
// that a dash runs on across vertices and dashes keep their length however the line is segmented.
// Calls emit(points, count) for each dash (count >= 2); `scratch` holds a dash's points meanwhile.
// P is any point type with float members x and y.
template <class P, class Emit>
void for_each_dash(const P* p, size_t n, float on, float off, std::vector<P>& scratch, Emit&& emit) {
    if (n < 2 || !(on > 0) || !(off > 0)) return;
    scratch.assign(1, p[0]);
    bool drawing = true;
    float left = on;  // of the current dash or gap
    for (size_t i = 1; i < n; ++i) {
        const P a = p[i - 1], b = p[i];
        const float len = std::hypot(b.x - a.x, b.y - a.y);
        if (!(len > 0)) continue;
        float at = 0;  // along this segment
        while (len - at > left) {
            at += left;
            const float f = at / len;
            P q = a;
            q.x = a.x + (b.x - a.x) * f;
            q.y = a.y + (b.y - a.y) * f;
            scratch.push_back(q);
            if (drawing) emit(scratch.data(), scratch.size());
            scratch.assign(1, q);
            drawing = !drawing;
            left = drawing ? on : off;
        }
        left -= len - at;
        if (drawing) scratch.push_back(b);
    }
    if (drawing && scratch.size() >= 2) emit(scratch.data(), scratch.size());
}

}  // namespace k3::ui
