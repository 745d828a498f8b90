// The charts' pure part (ui/plot_math.h): fitting, zoom and pan, ticks and labels on zoomed axes,
// segment clipping, dashes.
#include <doctest/doctest.h>

#include <set>

#include "ui/plot_math.h"

using namespace k3::ui;

namespace {

ValueRange range_of(std::initializer_list<double> v) {
    ValueRange r;
    for (double x : v) r.add(x);
    return r;
}

struct Pt {
    float x, y;
};

double length(const std::vector<Pt>& p) {
    double l = 0;
    for (size_t i = 1; i < p.size(); ++i) l += std::hypot(p[i].x - p[i - 1].x, p[i].y - p[i - 1].y);
    return l;
}

// The dashes of a polyline, each as its points.
std::vector<std::vector<Pt>> dashes(const std::vector<Pt>& line, float on, float off) {
    std::vector<std::vector<Pt>> out;
    std::vector<Pt> scratch;
    for_each_dash(line.data(), line.size(), on, off, scratch,
                  [&](const Pt* d, size_t n) { out.emplace_back(d, d + n); });
    return out;
}

}  // namespace

TEST_CASE("ValueRange: finite values only, the smallest positive one apart") {
    const ValueRange r = range_of({3, -2, 0, 0.5, NAN, INFINITY});
    CHECK(r.lo == -2);
    CHECK(r.hi == 3);
    CHECK(r.min_positive == 0.5);
    CHECK(ValueRange().empty());
    CHECK(range_of({NAN}).empty());
}

TEST_CASE("fit_axis: margins, zero for bars, log from the smallest positive value") {
    PlotAxis a;
    fit_axis(a, range_of({10, 110}), false, true);
    CHECK(a.lo == doctest::Approx(6));
    CHECK(a.hi == doctest::Approx(114));
    fit_axis(a, range_of({10, 110}), false, false);
    CHECK(a.lo == 10);
    CHECK(a.hi == 110);
    fit_axis(a, range_of({10, 110}), true, true);
    CHECK(a.lo == 0);
    CHECK(a.hi == doctest::Approx(114.4));
    a.log = true;
    fit_axis(a, range_of({-1, 0, 4, 4096}), false, true);
    CHECK(a.lo == 4);
    CHECK(a.hi == 4096);
    // A single value gets a width around it.
    fit_axis(a, range_of({8}), false, true);
    CHECK(a.lo == 4);
    CHECK(a.hi == 16);
    a.log = false;
    fit_axis(a, range_of({5}), false, false);
    CHECK(a.lo < 5);
    CHECK(a.hi > 5);
}

TEST_CASE("zoom_axis: the point under the mouse stays, the length scales; log zooms in decades") {
    PlotAxis a{0, 100, false};
    const PlotAxis z = zoom_axis(a, 0.25, 0.5);
    CHECK(z.hi - z.lo == doctest::Approx(50));
    CHECK(z.unmap(0.25) == doctest::Approx(25));
    const PlotAxis back = zoom_axis(z, 0.25, 2.0);
    CHECK(back.lo == doctest::Approx(0));
    CHECK(back.hi == doctest::Approx(100));

    PlotAxis l{1, 1e6, true};
    const PlotAxis lz = zoom_axis(l, 0.5, 0.5);  // around 1000: 10^1.5 .. 10^4.5
    CHECK(std::log10(lz.lo) == doctest::Approx(1.5));
    CHECK(std::log10(lz.hi) == doctest::Approx(4.5));
    CHECK(lz.log);
}

TEST_CASE("zoom_axis: zooming on and on stops where doubles stop telling ticks apart") {
    for (const PlotAxis start :
         {PlotAxis{1e6, 2e6, false}, PlotAxis{-1e-12, 1e-12, false}, PlotAxis{1, 1e9, true}}) {
        PlotAxis a = start;
        for (int i = 0; i < 2000; ++i) a = zoom_axis(a, 0.3, 0.8);
        CHECK(a.hi > a.lo);
        CHECK(std::isfinite(a.lo));
        CHECK(std::isfinite(a.hi));
        for (int i = 0; i < 5000; ++i) a = zoom_axis(a, 0.3, 1.25);  // and out
        CHECK(std::isfinite(a.lo));
        CHECK(std::isfinite(a.hi));
        CHECK((!a.log || a.lo > 0));
    }
}

TEST_CASE("pan_axis: by a fraction of the length, in decades on a log axis") {
    const PlotAxis p = pan_axis(PlotAxis{10, 20, false}, 0.5);
    CHECK(p.lo == 15);
    CHECK(p.hi == 25);
    const PlotAxis l = pan_axis(PlotAxis{10, 1000, true}, -0.5);
    CHECK(l.lo == doctest::Approx(1));
    CHECK(l.hi == doctest::Approx(100));
}

TEST_CASE("nice_ticks and format_tick: the labels of a zoomed axis read differently") {
    const std::vector<double> t = nice_ticks(1000000, 1000010, 5, false);
    REQUIRE(t.size() >= 3);
    const double step = tick_step(t);
    CHECK(step == 2);
    std::set<std::string> labels;
    for (double v : t) {
        CHECK(v >= 1000000);
        CHECK(v <= 1000010);
        CHECK(std::fmod(v, step) == 0);  // multiples of the step, far from 0
        labels.insert(format_tick(v, "", step));
    }
    CHECK(labels.size() == t.size());
    CHECK(format_tick(1000002, "", 2) == "1.000002M");
    // A binary step (1 MiB = 0.000977 GiB) takes a digit more than a decimal one would.
    CHECK(format_tick(1.5 * 1073741824.0 + 1048576, "B", 1048576) == "1.50098 GiB");
    CHECK(format_tick(0.3715, "fraction", 0.0005) == "37.15%");
}

TEST_CASE("format_tick without a step: the compact labels of a whole axis") {
    CHECK(format_tick(64.0 * 1048576, "B") == "64 MiB");
    CHECK(format_tick(0.37, "fraction") == "37%");
    CHECK(format_tick(1e6, "") == "1M");
    CHECK(format_tick(1250, "") == "1.25k");
    // With a step as wide as the value's own digits, the same text.
    CHECK(format_tick(1250, "", 250) == "1.25k");
    CHECK(format_tick(40000, "", 20000) == "40k");
}

TEST_CASE("nice_ticks on log axes: decades, with 2 and 5 when zoomed in to few decades") {
    CHECK(nice_ticks(1, 1e6, 8, true) == std::vector<double>{1, 10, 100, 1e3, 1e4, 1e5, 1e6});
    const std::vector<double> z = nice_ticks(300, 30000, 9, true);
    CHECK(z == std::vector<double>{500, 1000, 2000, 5000, 10000, 20000});
    // Less than a decade: linear steps.
    const std::vector<double> n = nice_ticks(200, 300, 5, true);
    CHECK(n.front() >= 200);
    CHECK(n.back() <= 300);
    CHECK(n.size() >= 3);
}

TEST_CASE("clip_segment: the part inside the box, ends inside untouched, far points exact") {
    const ScreenPoint lo{0, 0}, hi{100, 50};
    ScreenPoint a{10, 10}, b{90, 40};
    CHECK(clip_segment(a, b, lo, hi));
    CHECK(a == ScreenPoint{10, 10});
    CHECK(b == ScreenPoint{90, 40});
    a = {-100, 25}, b = {200, 25};
    CHECK(clip_segment(a, b, lo, hi));
    CHECK(a.x == doctest::Approx(0));
    CHECK(b.x == doctest::Approx(100));
    a = {-10, -10}, b = {-5, 60};
    CHECK_FALSE(clip_segment(a, b, lo, hi));
    // A point 10^12 pixels away (a deep zoom): the cut lands on the box to well under a pixel.
    a = {-1e12, -1e12 + 25}, b = {50, 75};  // slope 1
    CHECK(clip_segment(a, b, lo, hi));
    CHECK(a.x == doctest::Approx(0).epsilon(1e-6));
    CHECK(a.y == doctest::Approx(25).epsilon(1e-6));
    CHECK(b.x == doctest::Approx(25).epsilon(1e-6));
    CHECK(b.y == doctest::Approx(50).epsilon(1e-6));
}

TEST_CASE("for_each_dash: dashes of one length along the line, however it is segmented") {
    const std::vector<Pt> straight = {{0, 0}, {100, 0}};
    const auto d = dashes(straight, 6, 4);
    REQUIRE(d.size() == 10);  // 0-6, 10-16, ..., 90-96
    for (const auto& dash : d) CHECK(length(dash) == doctest::Approx(6));
    CHECK(d[1].front().x == doctest::Approx(10));

    // The same line in 1000 pieces, and an L-shaped line: the dashes run on across vertices.
    std::vector<Pt> fine;
    for (int i = 0; i <= 1000; ++i) fine.push_back({float(i) * 0.1f, 0});
    const auto f = dashes(fine, 6, 4);
    REQUIRE(f.size() == d.size());
    for (size_t i = 0; i < f.size(); ++i) {
        CHECK(length(f[i]) == doctest::Approx(6).epsilon(1e-3));
        CHECK(f[i].front().x == doctest::Approx(d[i].front().x).epsilon(1e-3));
    }
    const auto corner = dashes({{0, 0}, {12, 0}, {12, 20}}, 6, 4);
    REQUIRE(corner.size() == 4);  // 0-6, 10-16 (turning the corner at 12), 20-26, 30-32 (the end)
    CHECK(corner[1].size() == 3);
    CHECK(length(corner[1]) == doctest::Approx(6));
    CHECK(length(corner[2]) == doctest::Approx(6));
    CHECK(length(corner[3]) == doctest::Approx(2));
    CHECK(dashes({{5, 5}}, 6, 4).empty());
}
