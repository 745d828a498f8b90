// The result of a run: headline scalars, plot series, tables, checks and notes, plus the wall-clock
// part ("timing") that is the only thing allowed to differ between runs and builds.
// Its JSON (report_json) is the contract between the core, the page, the CLI and the tests.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/experiments/param.h"

namespace k3 {

struct Scalar {
    std::string key, label, unit;
    double value = 0;
    bool headline = false;  // shown in large type at the top of the module page
    std::string help;       // tooltip: what the figure means and how it was obtained
};

enum class SeriesStyle { line, bars, points, step };
const char* series_style_name(SeriesStyle s);  // "line", "bars", "points", "step"
std::optional<SeriesStyle> parse_series_style(std::string_view name);

struct Series {
    std::string name, x_label, y_label;
    std::vector<double> x, y;
    std::string plot;  // series with the same plot title are drawn in one chart
    bool log_x = false, log_y = false;
    SeriesStyle style = SeriesStyle::line;
    std::vector<std::string> x_names;  // category names for bar charts (x = 0, 1, 2, ...)
    std::string x_unit, y_unit;        // "B", "tokens", "fraction", ... drive tick formatting

    Series& add(double x_, double y_) {
        x.push_back(x_);
        y.push_back(y_);
        return *this;
    }
};

// A series with its plot, axis labels and units (points added by the caller).
Series make_series(std::string name, std::string plot, std::string x_label, std::string y_label,
                   std::string x_unit, std::string y_unit);

using Cell = std::variant<double, std::string>;

struct Column {
    std::string name, unit;  // unit may be empty; it drives formatting in the UI
};

struct Table {
    std::string name;
    std::vector<std::string> columns;
    std::vector<std::vector<Cell>> rows;
    std::vector<std::string> units;  // per column, may be empty; drives formatting in the UI

    // Appends a row; it must have one cell per column (std::logic_error otherwise: a bug in the module).
    Table& add(std::vector<Cell> row);
};

// A table with its columns and their units (rows added by the caller).
Table make_table(std::string name, const std::vector<Column>& cols);

// A check: `key` is stable snake_case (tests and tools find a check by it), `name` the sentence
// shown to the user, `detail` the figures that decided it.
struct Check {
    std::string key, name;
    bool passed = false;
    std::string detail;
};

// A grid of labelled cells (a pool map, a ring buffer): each cell has a category (colour) and a
// short text; drawn by the UI's cell-grid view, serialised like everything else.
struct CellGrid {
    std::string name;
    int columns = 0;
    std::vector<std::string> categories;   // legend; cell.category indexes it
    std::vector<int> cells;                // category per cell, -1 = empty
    std::vector<std::string> cell_labels;  // optional hover text per cell
};

// A heat map over two parameters with an optional contour level (break-even = 0, say).
struct HeatMap {
    std::string name, x_label, y_label, z_label;
    std::vector<double> x, y;  // axis values
    std::vector<double> z;     // y.size() rows of x.size() values
    bool log_x = false, log_y = false;
    std::optional<double> contour;  // drawn as a line where z crosses it
};

// A token tree (a radix prefix cache): each node spans token positions [start, end) under its
// parent; markers are positions inside it (state checkpoints). Drawn as an icicle: depth in tokens
// across, nodes stacked down in depth-first order.
struct TreeNode {
    int parent = -1;  // index of the parent node, -1 for the root
    double start = 0, end = 0;
    int category = 0;             // colour, indexes Tree::categories
    std::string label;            // hover text
    std::vector<double> markers;  // positions of checkpoints (or other events) in [start, end]
};
struct Tree {
    std::string name, x_label;
    std::vector<std::string> categories;
    std::string marker_label;     // what a marker means ("state checkpoint")
    std::vector<TreeNode> nodes;  // parents before children
};

// A ring buffer over time: capacity slots, and for each recorded step the occupied span (tail,
// count) and what happened. Drawn as a ring with a step slider and playback.
struct RingFrame {
    int tail = 0, count = 0;  // occupied slots: tail, tail + 1, ... (mod capacity), count of them
    std::string event;        // "draft 4", "verify: 2 accepted", "flush", "overflow: fold"
};
struct Ring {
    std::string name;
    int capacity = 0;
    std::vector<RingFrame> frames;
};

// Lanes over time (fleet instances): spans with a category and a label.
struct Span {
    int lane = 0;
    double start = 0, end = 0;
    int category = 0;
    std::string label;
};
struct Timeline {
    std::string name, time_label;  // e.g. "simulated time (s)"
    std::vector<std::string> lanes, categories;
    std::vector<Span> spans;
};

struct Report {
    std::string module;
    struct ParamValue {
        std::string key, text;  // effective value in canonical text
        bool textual = false;   // written as a JSON string (choice, text) or number
    };
    std::vector<ParamValue> params;
    std::vector<Scalar> scalars;
    std::vector<Series> series;
    std::vector<Table> tables;
    std::vector<Check> checks;
    std::vector<std::string> notes;
    std::vector<CellGrid> grids;
    std::vector<HeatMap> heatmaps;
    std::vector<Tree> trees;
    std::vector<Ring> rings;
    std::vector<Timeline> timelines;
    struct TimingText {
        std::string key, label, text;  // build facts that differ between builds (SIMD arch, say)
    };
    struct Timing {
        std::vector<Scalar> scalars;
        std::vector<TimingText> texts;
        std::vector<Series> series;
        std::vector<Table> tables;
        // Checks of what only some builds have (scalar against SIMD kernels in a SIMD build): they
        // count like any check, but a report from another build need not have them.
        std::vector<Check> checks;
    } timing;

    void set_params(const Params& p);
    Scalar& scalar(std::string key, std::string label, std::string unit, double value, bool headline = false);
    Scalar& timing_scalar(std::string key, std::string label, std::string unit, double value);
    void timing_text(std::string key, std::string label, std::string text);
    Check& check(std::string key, std::string name, bool passed, std::string detail);
    Check& build_check(std::string key, std::string name, bool passed, std::string detail);
    Table& add_table(Table t);
    Series& add_series(Series s);
    const Scalar* find_scalar(const std::string& key) const;
    const Check* find_check(const std::string& key) const;
    bool all_checks_passed() const;  // the checks and the build's own
};

std::string report_json(const Report& r, bool pretty = false);
std::string report_csv(const Report& r);
// A run beside a baseline (a report exported earlier, core/experiments/report_read.h):
// {"report": ..., "baseline": ...}, each in report_json's schema.
std::string report_pair_json(const Report& r, const Report& baseline, bool pretty = false);
// The same as CSV: parameters, scalars and checks side by side (value, baseline); tables with a
// baseline column after each numeric one (as compare mode shows them); the run's series, then the
// baseline's and whatever else only the baseline has, their headings marked "baseline".
std::string report_pair_csv(const Report& r, const Report& baseline);

}  // namespace k3
