// Axes of the break-even maps and where a cost function changes sign along one of them.
#pragma once

#include <functional>
#include <optional>
#include <vector>

namespace k3::boundaries {

// Whether index i is the middle point of an axis (where the falsifiers shift or drop a cell).
inline bool is_middle(size_t i, const std::vector<double>& axis) { return i == axis.size() / 2; }

// n points from lo to hi (both included): evenly spaced, or evenly spaced in log (lo > 0). n = 1: {lo}.
std::vector<double> linear_axis(double lo, double hi, int n);
std::vector<double> log_axis(double lo, double hi, int n);
// log_axis rounded to integers, duplicates removed (token counts, ranks).
std::vector<double> integer_log_axis(double lo, double hi, int n);

// Where f changes sign between lo and hi: f is sampled at `samples` points (log spaced when `log`), and
// the first bracket where the sign (f >= 0 or f < 0) differs from the sign at lo is bisected down to a
// relative width of 1e-9. `pays_above` tells which side is >= 0: true when f(lo) < 0.
struct SignChange {
    double x = 0;  // the boundary (the first point on the new side, within the bisection width)
    bool pays_above = true;
};
std::optional<SignChange> first_sign_change(const std::function<double(double)>& f, double lo, double hi,
                                            bool log, int samples = 200);
// The same over integers: the first integer on the new side (exact).
std::optional<SignChange> first_sign_change_int(const std::function<double(double)>& f, double lo, double hi,
                                                int samples = 200);

// Whether the values z (any order) take both signs around `level` (z >= level and z < level); NaN
// values are skipped.
bool has_both_signs(const std::vector<double>& z, double level);

// On a grid of x.size() columns by rows (z row by row): the smallest x from which every column to the
// right has every value above `level` (NaN where even the last column does not).
double wins_everywhere_from(const std::vector<double>& x, const std::vector<double>& z, double level);

}  // namespace k3::boundaries
