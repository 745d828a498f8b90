#include "core/experiments/report.h"

#include <stdexcept>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/experiments/compare.h"

namespace k3 {

Series make_series(std::string name, std::string plot, std::string x_label, std::string y_label,
                   std::string x_unit, std::string y_unit) {
    Series s;
    s.name = std::move(name);
    s.plot = std::move(plot);
    s.x_label = std::move(x_label);
    s.y_label = std::move(y_label);
    s.x_unit = std::move(x_unit);
    s.y_unit = std::move(y_unit);
    return s;
}

Table make_table(std::string name, const std::vector<Column>& cols) {
    Table t;
    t.name = std::move(name);
    for (const Column& c : cols) {
        t.columns.push_back(c.name);
        t.units.push_back(c.unit);
    }
    return t;
}

Table& Table::add(std::vector<Cell> row) {
    if (row.size() != columns.size())
        throw std::logic_error("table '" + name + "': a row of " + std::to_string(row.size()) +
                               " cells for " + std::to_string(columns.size()) + " columns");
    rows.push_back(std::move(row));
    return *this;
}

void Report::set_params(const Params& p) {
    params.clear();
    for (const auto& s : p.specs()) params.push_back({s.key, p.text(s.key), s.is_textual()});
}

Scalar& Report::scalar(std::string key, std::string label, std::string unit, double value, bool headline) {
    scalars.push_back({std::move(key), std::move(label), std::move(unit), value, headline, {}});
    return scalars.back();
}

Scalar& Report::timing_scalar(std::string key, std::string label, std::string unit, double value) {
    timing.scalars.push_back({std::move(key), std::move(label), std::move(unit), value, false, {}});
    return timing.scalars.back();
}

void Report::timing_text(std::string key, std::string label, std::string text) {
    timing.texts.push_back({std::move(key), std::move(label), std::move(text)});
}

Check& Report::check(std::string key, std::string name, bool passed, std::string detail) {
    checks.push_back({std::move(key), std::move(name), passed, std::move(detail)});
    return checks.back();
}

Check& Report::build_check(std::string key, std::string name, bool passed, std::string detail) {
    timing.checks.push_back({std::move(key), std::move(name), passed, std::move(detail)});
    return timing.checks.back();
}

Table& Report::add_table(Table t) {
    tables.push_back(std::move(t));
    return tables.back();
}

Series& Report::add_series(Series s) {
    series.push_back(std::move(s));
    return series.back();
}

const Check* Report::find_check(const std::string& key) const {
    for (const auto& c : checks)
        if (c.key == key) return &c;
    for (const auto& c : timing.checks)
        if (c.key == key) return &c;
    return nullptr;
}

const Scalar* Report::find_scalar(const std::string& key) const {
    for (const auto& s : scalars)
        if (s.key == key) return &s;
    for (const auto& s : timing.scalars)
        if (s.key == key) return &s;
    return nullptr;
}

bool Report::all_checks_passed() const {
    for (const auto* v : {&checks, &timing.checks})
        for (const auto& c : *v)
            if (!c.passed) return false;
    return true;
}

// ---- JSON ----------------------------------------------------------------------------------------

static void write_scalars(JsonWriter& w, const std::vector<Scalar>& v) {
    for (const auto& s : v) {
        w.key(s.key).begin_object();
        w.field("value", s.value).field("unit", s.unit).field("label", s.label);
        w.end_object();
    }
}

const char* series_style_name(SeriesStyle s) {
    switch (s) {
        case SeriesStyle::bars: return "bars";
        case SeriesStyle::points: return "points";
        case SeriesStyle::step: return "step";
        default: return "line";
    }
}

std::optional<SeriesStyle> parse_series_style(std::string_view name) {
    for (SeriesStyle s : {SeriesStyle::line, SeriesStyle::bars, SeriesStyle::points, SeriesStyle::step})
        if (name == series_style_name(s)) return s;
    return std::nullopt;
}

static void write_series(JsonWriter& w, const std::vector<Series>& v) {
    w.begin_array();
    for (const auto& s : v) {
        w.begin_object();
        w.field("name", s.name).field("plot", s.plot).field("x_label", s.x_label).field("y_label", s.y_label);
        w.key("x").numbers(s.x);
        w.key("y").numbers(s.y);
        if (!s.x_names.empty()) {
            w.key("x_names").begin_array();
            for (const auto& n : s.x_names) w.value(n);
            w.end_array();
        }
        if (!s.x_unit.empty()) w.field("x_unit", s.x_unit);
        if (!s.y_unit.empty()) w.field("y_unit", s.y_unit);
        w.field("log_x", s.log_x).field("log_y", s.log_y).field("style", series_style_name(s.style));
        w.end_object();
    }
    w.end_array();
}

static void write_tables(JsonWriter& w, const std::vector<Table>& v) {
    w.begin_array();
    for (const auto& t : v) {
        w.begin_object();
        w.field("name", t.name);
        w.key("columns").begin_array();
        for (const auto& c : t.columns) w.value(c);
        w.end_array();
        w.key("rows").begin_array();
        for (const auto& row : t.rows) {
            w.begin_array();
            for (const auto& c : row) {
                if (const double* d = std::get_if<double>(&c))
                    w.value(*d);
                else
                    w.value(std::get<std::string>(c));
            }
            w.end_array();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
}

static void write_strings(JsonWriter& w, const char* key, const std::vector<std::string>& v) {
    w.key(key).begin_array();
    for (const auto& x : v) w.value(x);
    w.end_array();
}

// `key`: an array of v's elements written by write(w, element); nothing when v is empty.
template <class T, class Write>
static void write_optional_array(JsonWriter& w, const char* key, const std::vector<T>& v, Write write) {
    if (v.empty()) return;
    w.key(key).begin_array();
    for (const T& x : v) write(w, x);
    w.end_array();
}

static void write_params(JsonWriter& w, const std::vector<Report::ParamValue>& v) {
    w.key("params").begin_object();
    for (const auto& p : v) {
        w.key(p.key);
        const auto n = p.textual ? std::nullopt : parse_real(p.text);
        if (n)
            w.value(*n);
        else
            w.value(p.text);
    }
    w.end_object();
}

static void write_checks(JsonWriter& w, const std::vector<Check>& v) {
    w.key("checks").begin_array();
    for (const auto& c : v)
        w.begin_object()
            .field("key", c.key)
            .field("name", c.name)
            .field("passed", c.passed)
            .field("detail", c.detail)
            .end_object();
    w.end_array();
}

static void write_grid(JsonWriter& w, const CellGrid& g) {
    w.begin_object().field("name", g.name).field("columns", double(g.columns));
    write_strings(w, "categories", g.categories);
    w.key("cells").numbers(std::vector<double>(g.cells.begin(), g.cells.end()));
    if (!g.cell_labels.empty()) write_strings(w, "cell_labels", g.cell_labels);
    w.end_object();
}

static void write_heatmap(JsonWriter& w, const HeatMap& h) {
    w.begin_object().field("name", h.name).field("x_label", h.x_label).field("y_label", h.y_label);
    w.field("z_label", h.z_label);
    w.key("x").numbers(h.x);
    w.key("y").numbers(h.y);
    w.key("z").numbers(h.z);
    if (h.contour) w.field("contour", *h.contour);
    w.end_object();
}

static void write_tree(JsonWriter& w, const Tree& t) {
    w.begin_object().field("name", t.name).field("x_label", t.x_label).field("marker_label", t.marker_label);
    write_strings(w, "categories", t.categories);
    w.key("nodes").begin_array();
    for (const auto& n : t.nodes) {
        w.begin_object().field("parent", double(n.parent)).field("start", n.start).field("end", n.end);
        w.field("category", double(n.category)).field("label", n.label).key("markers").numbers(n.markers);
        w.end_object();
    }
    w.end_array().end_object();
}

static void write_ring(JsonWriter& w, const Ring& g) {
    w.begin_object().field("name", g.name).field("capacity", double(g.capacity)).key("frames").begin_array();
    for (const auto& f : g.frames)
        w.begin_object()
            .field("tail", double(f.tail))
            .field("count", double(f.count))
            .field("event", f.event)
            .end_object();
    w.end_array().end_object();
}

static void write_timeline(JsonWriter& w, const Timeline& tl) {
    w.begin_object().field("name", tl.name).field("time_label", tl.time_label);
    write_strings(w, "lanes", tl.lanes);
    write_strings(w, "categories", tl.categories);
    w.key("spans").begin_array();
    for (const auto& sp : tl.spans)
        w.begin_object()
            .field("lane", double(sp.lane))
            .field("start", sp.start)
            .field("end", sp.end)
            .field("category", double(sp.category))
            .field("label", sp.label)
            .end_object();
    w.end_array().end_object();
}

static void write_timing(JsonWriter& w, const Report::Timing& t) {
    w.key("timing").begin_object();
    write_scalars(w, t.scalars);
    for (const auto& x : t.texts)
        w.key(x.key).begin_object().field("text", x.text).field("label", x.label).end_object();
    if (!t.series.empty()) {
        w.key("series");
        write_series(w, t.series);
    }
    if (!t.tables.empty()) {
        w.key("tables");
        write_tables(w, t.tables);
    }
    if (!t.checks.empty()) write_checks(w, t.checks);
    w.end_object();
}

static void write_report(JsonWriter& w, const Report& r) {
    w.begin_object();
    w.field("module", r.module);
    write_params(w, r.params);
    w.key("scalars").begin_object();
    write_scalars(w, r.scalars);
    w.end_object();
    w.key("series");
    write_series(w, r.series);
    w.key("tables");
    write_tables(w, r.tables);
    write_checks(w, r.checks);
    write_strings(w, "notes", r.notes);
    write_optional_array(w, "grids", r.grids, write_grid);
    write_optional_array(w, "heatmaps", r.heatmaps, write_heatmap);
    write_optional_array(w, "trees", r.trees, write_tree);
    write_optional_array(w, "rings", r.rings, write_ring);
    write_optional_array(w, "timelines", r.timelines, write_timeline);
    write_timing(w, r.timing);
    w.end_object();
}

std::string report_json(const Report& r, bool pretty) {
    JsonWriter w(pretty);
    write_report(w, r);
    return w.take();
}

std::string report_pair_json(const Report& r, const Report& baseline, bool pretty) {
    JsonWriter w(pretty);
    w.begin_object().key("report");
    write_report(w, r);
    w.key("baseline");
    write_report(w, baseline);
    w.end_object();
    return w.take();
}

// ---- CSV -----------------------------------------------------------------------------------------
// Blocks separated by a blank line, each headed by a "# ..." line: parameters, scalars, checks,
// then every table and series (series as x,y columns). Timing blocks are marked as such.

static std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out.push_back('"');
        out.push_back(c);
    }
    return out + "\"";
}

static void csv_checks(std::string& out, const std::vector<Check>& v, const char* prefix) {
    out += std::string("\n# ") + prefix + "checks\nkey,name,passed,detail\n";
    for (const auto& c : v)
        out += csv_field(c.key) + "," + csv_field(c.name) + "," + (c.passed ? "true" : "false") + "," +
               csv_field(c.detail) + "\n";
}

static void csv_table(std::string& out, const Table& t, const char* prefix) {
    out += "\n# " + std::string(prefix) + "table: " + t.name + "\n";
    for (size_t i = 0; i < t.columns.size(); ++i) out += (i ? "," : "") + csv_field(t.columns[i]);
    out += "\n";
    for (const auto& row : t.rows) {
        for (size_t i = 0; i < row.size(); ++i) {
            if (i) out += ",";
            if (const double* d = std::get_if<double>(&row[i]))
                out += format_number(*d);
            else
                out += csv_field(std::get<std::string>(row[i]));
        }
        out += "\n";
    }
}

static void csv_series(std::string& out, const Series& s, const char* prefix) {
    out += "\n# " + std::string(prefix) + "series: " + s.name + (s.plot.empty() ? "" : " (" + s.plot + ")") +
           "\n";
    out += csv_field(s.x_label) + "," + csv_field(s.y_label) + "\n";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (i < s.x_names.size())
            out += csv_field(s.x_names[i]);
        else
            out += format_number(s.x[i]);
        out += "," + format_number(s.y[i]) + "\n";
    }
}

// The timing blocks (wall clock and build facts); every heading starts with `prefix` ("baseline "
// for the baseline of a pair).
static void csv_timing(std::string& out, const Report& r, const std::string& prefix) {
    const std::string timing = prefix + "timing ";
    if (!r.timing.scalars.empty() || !r.timing.texts.empty()) {
        out += "\n# " + timing +
               "(wall clock and build facts, differ between runs and builds)\nkey,value,unit,label\n";
        for (const auto& s : r.timing.scalars)
            out += csv_field(s.key) + "," + format_number(s.value) + "," + csv_field(s.unit) + "," +
                   csv_field(s.label) + "\n";
        for (const auto& t : r.timing.texts)
            out += csv_field(t.key) + "," + csv_field(t.text) + ",," + csv_field(t.label) + "\n";
    }
    if (!r.timing.checks.empty()) csv_checks(out, r.timing.checks, timing.c_str());
    for (const auto& t : r.timing.tables) csv_table(out, t, timing.c_str());
    for (const auto& s : r.timing.series) csv_series(out, s, timing.c_str());
}

std::string report_csv(const Report& r) {
    std::string out = "# module: " + r.module + "\n# parameters\nkey,value\n";
    for (const auto& p : r.params) out += csv_field(p.key) + "," + csv_field(p.text) + "\n";
    out += "\n# scalars\nkey,value,unit,label\n";
    for (const auto& s : r.scalars)
        out += csv_field(s.key) + "," + format_number(s.value) + "," + csv_field(s.unit) + "," +
               csv_field(s.label) + "\n";
    csv_checks(out, r.checks, "");
    for (const auto& t : r.tables) csv_table(out, t, "");
    for (const auto& s : r.series) csv_series(out, s, "");
    csv_timing(out, r, "");
    return out;
}

// One line per key: the run's items in order beside the baseline's item with the same key, then the
// baseline's items the run does not have. `line(a, b)` writes one line; either may be null.
template <class T, class Line>
static void side_by_side(std::string& out, const std::vector<T>& run, const std::vector<T>& base, Line line) {
    auto find = [](const std::vector<T>& v, const std::string& key) -> const T* {
        for (const T& x : v)
            if (x.key == key) return &x;
        return nullptr;
    };
    for (const T& a : run) out += line(&a, find(base, a.key)) + "\n";
    for (const T& b : base)
        if (!find(run, b.key)) out += line(nullptr, &b) + "\n";
}

std::string report_pair_csv(const Report& r, const Report& baseline) {
    std::string out = "# module: " + r.module + " (baseline: " + baseline.module + ")\n";
    out += "# parameters\nkey,value,baseline\n";
    side_by_side(out, r.params, baseline.params,
                 [](const Report::ParamValue* a, const Report::ParamValue* b) {
                     return csv_field((a ? a : b)->key) + "," + (a ? csv_field(a->text) : "") + "," +
                            (b ? csv_field(b->text) : "");
                 });
    out += "\n# scalars\nkey,value,baseline,unit,label\n";
    side_by_side(out, r.scalars, baseline.scalars, [](const Scalar* a, const Scalar* b) {
        const Scalar& s = a ? *a : *b;
        return csv_field(s.key) + "," + (a ? format_number(a->value) : "") + "," +
               (b ? format_number(b->value) : "") + "," + csv_field(s.unit) + "," + csv_field(s.label);
    });
    out += "\n# checks\nkey,name,passed,baseline_passed,detail\n";
    side_by_side(out, r.checks, baseline.checks, [](const Check* a, const Check* b) {
        const Check& c = a ? *a : *b;
        auto passed = [](const Check* x) -> std::string { return x ? (x->passed ? "true" : "false") : ""; };
        return csv_field(c.key) + "," + csv_field(c.name) + "," + passed(a) + "," + passed(b) + "," +
               csv_field(c.detail);
    });
    // Tables as the page shows them in compare mode: a baseline column after each numeric one
    // (core/experiments/compare.h); a table only the baseline has follows on its own.
    auto named = [](const Report& in, const std::string& name) -> const Table* {
        for (const auto& t : in.tables)
            if (t.name == name) return &t;
        return nullptr;
    };
    for (const auto& t : r.tables) {
        const Table* b = named(baseline, t.name);
        csv_table(out, b ? table_with_baseline(t, *b) : t, "");
    }
    for (const auto& b : baseline.tables)
        if (!named(r, b.name)) csv_table(out, b, "baseline ");
    for (const auto& s : r.series) csv_series(out, s, "");
    for (const auto& s : baseline.series) csv_series(out, s, "baseline ");
    csv_timing(out, r, "");
    csv_timing(out, baseline, "baseline ");
    return out;
}

}  // namespace k3
