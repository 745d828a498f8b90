#include "core/experiments/report_read.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include "core/base/numfmt.h"

namespace k3 {

namespace {

std::string child(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string item(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Reads the fields of a report's JSON, naming each by its path in every message; the first error is
// kept and later reads return empty values.
class In {
  public:
    explicit In(std::string& error) : error_(error) {}
    bool failed() const { return !error_.empty(); }

    bool fail(const JsonValue& at, const std::string& path, const std::string& what) {
        if (error_.empty()) error_ = at.where() + (path.empty() ? "" : path + ": ") + what;
        return false;
    }

    // `v` is an object with every `required` key, and no key outside `required` and `optional`.
    bool object(const JsonValue& v, const std::string& path, std::initializer_list<const char*> required,
                std::initializer_list<const char*> optional = {}) {
        if (!v.is(JsonType::object)) return fail(v, path, "expected an object, got " + json_shown(v));
        for (const char* k : required)
            if (!v.find(k)) return fail(v, child(path, k), "missing");
        for (size_t i = 0; i < v.keys.size(); ++i) {
            bool known = false;
            for (const auto* list : {&required, &optional})
                for (const char* k : *list) known = known || v.keys[i] == k;
            if (!known) return fail(v.items[i], child(path, v.keys[i]), "not a field of a report");
        }
        return !failed();
    }

    std::string str(const JsonValue& obj, const std::string& path, const char* key) {
        const JsonValue* v = obj.find(key);
        if (!v || failed()) return {};
        if (!v->is(JsonType::string))
            return fail(*v, child(path, key), "expected a string, got " + json_shown(*v)), "";
        return v->text;
    }

    // A number; null (what the writer writes for a non-finite one) reads as NaN.
    double num(const JsonValue& v, const std::string& path) {
        if (v.is(JsonType::number)) return v.number;
        if (v.is(JsonType::null)) return std::numeric_limits<double>::quiet_NaN();
        return fail(v, path, "expected a number, got " + json_shown(v)), 0;
    }
    double num(const JsonValue& obj, const std::string& path, const char* key) {
        const JsonValue* v = obj.find(key);
        return v && !failed() ? num(*v, child(path, key)) : 0;
    }

    int integer(const JsonValue& v, const std::string& path) {
        if (v.is(JsonType::number) && v.number == std::floor(v.number) && std::fabs(v.number) <= 2147483647.0)
            return int(v.number);
        return fail(v, path, "expected a whole number, got " + json_shown(v)), 0;
    }
    int integer(const JsonValue& obj, const std::string& path, const char* key) {
        const JsonValue* v = obj.find(key);
        return v && !failed() ? integer(*v, child(path, key)) : 0;
    }

    bool flag(const JsonValue& obj, const std::string& path, const char* key) {
        const JsonValue* v = obj.find(key);
        if (!v || failed()) return false;
        if (!v->is(JsonType::boolean))
            return fail(*v, child(path, key), "expected true or false, got " + json_shown(*v));
        return v->boolean();
    }

    // The array `key` of `obj`, each element read by read(element, its path); empty when absent.
    template <class T, class Read>
    std::vector<T> each(const JsonValue& obj, const std::string& path, const char* key, Read read) {
        std::vector<T> out;
        const JsonValue* v = obj.find(key);
        if (!v || failed()) return out;
        const std::string p = child(path, key);
        if (!v->is(JsonType::array)) return fail(*v, p, "expected an array, got " + json_shown(*v)), out;
        out.reserve(v->items.size());
        for (size_t i = 0; i < v->items.size() && !failed(); ++i)
            out.push_back(read(v->items[i], item(p, i)));
        return out;
    }

    std::vector<double> nums(const JsonValue& obj, const std::string& path, const char* key) {
        return each<double>(obj, path, key,
                            [&](const JsonValue& v, const std::string& p) { return num(v, p); });
    }
    std::vector<int> ints(const JsonValue& obj, const std::string& path, const char* key) {
        return each<int>(obj, path, key,
                         [&](const JsonValue& v, const std::string& p) { return integer(v, p); });
    }
    std::vector<std::string> strs(const JsonValue& obj, const std::string& path, const char* key) {
        return each<std::string>(obj, path, key,
                                 [&](const JsonValue& v, const std::string& p) -> std::string {
                                     if (v.is(JsonType::string)) return v.text;
                                     return fail(v, p, "expected a string, got " + json_shown(v)), "";
                                 });
    }

  private:
    std::string& error_;
};

// ---- the parts of a report, in report_json's order -----------------------------------------------

std::vector<Report::ParamValue> read_params(In& in, const JsonValue& v, const std::string& path) {
    std::vector<Report::ParamValue> out;
    if (!v.is(JsonType::object)) return in.fail(v, path, "expected an object, got " + json_shown(v)), out;
    for (size_t i = 0; i < v.keys.size(); ++i) {
        const JsonValue& x = v.items[i];
        if (x.is(JsonType::string))
            out.push_back({v.keys[i], x.text, true});
        else if (x.is(JsonType::number))
            out.push_back({v.keys[i], format_number(x.number), false});
        else
            in.fail(x, child(path, v.keys[i]), "expected a number or a string, got " + json_shown(x));
    }
    return out;
}

// Scalars keyed by name: {"value", "unit", "label"} each.
Scalar read_scalar(In& in, const std::string& key, const JsonValue& v, const std::string& path) {
    Scalar s;
    if (!in.object(v, path, {"value", "unit", "label"})) return s;
    s.key = key;
    s.value = in.num(v, path, "value");
    s.unit = in.str(v, path, "unit");
    s.label = in.str(v, path, "label");
    return s;
}

std::vector<Scalar> read_scalars(In& in, const JsonValue& v, const std::string& path) {
    std::vector<Scalar> out;
    if (!v.is(JsonType::object)) return in.fail(v, path, "expected an object, got " + json_shown(v)), out;
    for (size_t i = 0; i < v.keys.size() && !in.failed(); ++i)
        out.push_back(read_scalar(in, v.keys[i], v.items[i], child(path, v.keys[i])));
    return out;
}

SeriesStyle style_of(In& in, const JsonValue& v, const std::string& path) {
    const std::string s = in.str(v, path, "style");
    const auto st = parse_series_style(s);
    if (!st && !in.failed())
        in.fail(*v.find("style"), child(path, "style"), "expected line, bars, points or step");
    return st.value_or(SeriesStyle::line);
}

Series read_series(In& in, const JsonValue& v, const std::string& path) {
    Series s;
    if (!in.object(v, path, {"name", "plot", "x_label", "y_label", "x", "y", "log_x", "log_y", "style"},
                   {"x_names", "x_unit", "y_unit"}))
        return s;
    s.name = in.str(v, path, "name");
    s.plot = in.str(v, path, "plot");
    s.x_label = in.str(v, path, "x_label");
    s.y_label = in.str(v, path, "y_label");
    s.x = in.nums(v, path, "x");
    s.y = in.nums(v, path, "y");
    s.x_names = in.strs(v, path, "x_names");
    s.x_unit = in.str(v, path, "x_unit");
    s.y_unit = in.str(v, path, "y_unit");
    s.log_x = in.flag(v, path, "log_x");
    s.log_y = in.flag(v, path, "log_y");
    s.style = style_of(in, v, path);
    return s;
}

Table read_table(In& in, const JsonValue& v, const std::string& path) {
    Table t;
    if (!in.object(v, path, {"name", "columns", "rows"})) return t;
    t.name = in.str(v, path, "name");
    t.columns = in.strs(v, path, "columns");
    t.rows = in.each<std::vector<Cell>>(v, path, "rows", [&](const JsonValue& row, const std::string& p) {
        std::vector<Cell> cells;
        if (!row.is(JsonType::array))
            return in.fail(row, p, "expected an array, got " + json_shown(row)), cells;
        if (row.items.size() != t.columns.size())
            return in.fail(row, p,
                           std::to_string(row.items.size()) + " cells for " +
                               std::to_string(t.columns.size()) + " columns"),
                   cells;
        for (size_t i = 0; i < row.items.size(); ++i) {
            const JsonValue& c = row.items[i];
            if (c.is(JsonType::string))
                cells.emplace_back(c.text);
            else
                cells.emplace_back(in.num(c, item(p, i)));
        }
        return cells;
    });
    return t;
}

Check read_check(In& in, const JsonValue& v, const std::string& path) {
    Check c;
    if (!in.object(v, path, {"key", "name", "passed", "detail"})) return c;
    c.key = in.str(v, path, "key");
    c.name = in.str(v, path, "name");
    c.passed = in.flag(v, path, "passed");
    c.detail = in.str(v, path, "detail");
    return c;
}

// ---- the views: grids, heat maps, trees, rings, timelines ------------------------------------------

CellGrid read_grid(In& in, const JsonValue& v, const std::string& path) {
    CellGrid g;
    if (!in.object(v, path, {"name", "columns", "categories", "cells"}, {"cell_labels"})) return g;
    g.name = in.str(v, path, "name");
    g.columns = in.integer(v, path, "columns");
    g.categories = in.strs(v, path, "categories");
    g.cells = in.ints(v, path, "cells");
    g.cell_labels = in.strs(v, path, "cell_labels");
    return g;
}

HeatMap read_heatmap(In& in, const JsonValue& v, const std::string& path) {
    HeatMap h;
    if (!in.object(v, path, {"name", "x_label", "y_label", "z_label", "x", "y", "z"}, {"contour"})) return h;
    h.name = in.str(v, path, "name");
    h.x_label = in.str(v, path, "x_label");
    h.y_label = in.str(v, path, "y_label");
    h.z_label = in.str(v, path, "z_label");
    h.x = in.nums(v, path, "x");
    h.y = in.nums(v, path, "y");
    h.z = in.nums(v, path, "z");
    if (v.find("contour")) h.contour = in.num(v, path, "contour");
    return h;
}

TreeNode read_node(In& in, const JsonValue& v, const std::string& path) {
    TreeNode n;
    if (!in.object(v, path, {"parent", "start", "end", "category", "label", "markers"})) return n;
    n.parent = in.integer(v, path, "parent");
    n.start = in.num(v, path, "start");
    n.end = in.num(v, path, "end");
    n.category = in.integer(v, path, "category");
    n.label = in.str(v, path, "label");
    n.markers = in.nums(v, path, "markers");
    return n;
}

Tree read_tree(In& in, const JsonValue& v, const std::string& path) {
    Tree t;
    if (!in.object(v, path, {"name", "x_label", "marker_label", "categories", "nodes"})) return t;
    t.name = in.str(v, path, "name");
    t.x_label = in.str(v, path, "x_label");
    t.marker_label = in.str(v, path, "marker_label");
    t.categories = in.strs(v, path, "categories");
    t.nodes = in.each<TreeNode>(
        v, path, "nodes", [&](const JsonValue& x, const std::string& p) { return read_node(in, x, p); });
    return t;
}

Ring read_ring(In& in, const JsonValue& v, const std::string& path) {
    Ring g;
    if (!in.object(v, path, {"name", "capacity", "frames"})) return g;
    g.name = in.str(v, path, "name");
    g.capacity = in.integer(v, path, "capacity");
    g.frames = in.each<RingFrame>(v, path, "frames", [&](const JsonValue& x, const std::string& p) {
        RingFrame f;
        if (!in.object(x, p, {"tail", "count", "event"})) return f;
        f.tail = in.integer(x, p, "tail");
        f.count = in.integer(x, p, "count");
        f.event = in.str(x, p, "event");
        return f;
    });
    return g;
}

Timeline read_timeline(In& in, const JsonValue& v, const std::string& path) {
    Timeline t;
    if (!in.object(v, path, {"name", "time_label", "lanes", "categories", "spans"})) return t;
    t.name = in.str(v, path, "name");
    t.time_label = in.str(v, path, "time_label");
    t.lanes = in.strs(v, path, "lanes");
    t.categories = in.strs(v, path, "categories");
    t.spans = in.each<Span>(v, path, "spans", [&](const JsonValue& x, const std::string& p) {
        Span s;
        if (!in.object(x, p, {"lane", "start", "end", "category", "label"})) return s;
        s.lane = in.integer(x, p, "lane");
        s.start = in.num(x, p, "start");
        s.end = in.num(x, p, "end");
        s.category = in.integer(x, p, "category");
        s.label = in.str(x, p, "label");
        return s;
    });
    return t;
}

// ---- timing and the whole report -------------------------------------------------------------------

// "timing": scalars ({value, unit, label}) and build facts ({text, label}) keyed by name, in the
// writer's order, then the optional "series", "tables" and "checks" arrays.
Report::Timing read_timing(In& in, const JsonValue& v, const std::string& path) {
    Report::Timing t;
    if (!v.is(JsonType::object)) return in.fail(v, path, "expected an object, got " + json_shown(v)), t;
    auto list = [&](const char* key, const JsonValue& x) {
        return x.is(JsonType::array) && v.find(key) == &x;
    };
    for (size_t i = 0; i < v.keys.size() && !in.failed(); ++i) {
        const JsonValue& x = v.items[i];
        const std::string p = child(path, v.keys[i]);
        if (list("series", x) || list("tables", x) || list("checks", x)) continue;
        if (x.is(JsonType::object) && x.find("text")) {
            if (in.object(x, p, {"text", "label"}))
                t.texts.push_back({v.keys[i], in.str(x, p, "label"), in.str(x, p, "text")});
        } else {
            t.scalars.push_back(read_scalar(in, v.keys[i], x, p));
        }
    }
    t.series = in.each<Series>(
        v, path, "series", [&](const JsonValue& x, const std::string& p) { return read_series(in, x, p); });
    t.tables = in.each<Table>(v, path, "tables",
                              [&](const JsonValue& x, const std::string& p) { return read_table(in, x, p); });
    t.checks = in.each<Check>(v, path, "checks",
                              [&](const JsonValue& x, const std::string& p) { return read_check(in, x, p); });
    return t;
}

// Reads `part` of `v` into `out` with `read(in, element, path)` for each element of the array.
template <class T, class Read>
void read_list(In& in, const JsonValue& v, const std::string& path, const char* part, std::vector<T>& out,
               Read read) {
    out = in.each<T>(v, path, part, [&](const JsonValue& x, const std::string& p) { return read(in, x, p); });
}

Report read_report(In& in, const JsonValue& v, const std::string& path) {
    Report r;
    if (!in.object(v, path, {"module", "params", "scalars", "series", "tables", "checks", "notes", "timing"},
                   {"grids", "heatmaps", "trees", "rings", "timelines"}))
        return r;
    r.module = in.str(v, path, "module");
    r.params = read_params(in, *v.find("params"), child(path, "params"));
    if (!in.failed()) r.scalars = read_scalars(in, *v.find("scalars"), child(path, "scalars"));
    read_list(in, v, path, "series", r.series, read_series);
    read_list(in, v, path, "tables", r.tables, read_table);
    read_list(in, v, path, "checks", r.checks, read_check);
    r.notes = in.strs(v, path, "notes");
    read_list(in, v, path, "grids", r.grids, read_grid);
    read_list(in, v, path, "heatmaps", r.heatmaps, read_heatmap);
    read_list(in, v, path, "trees", r.trees, read_tree);
    read_list(in, v, path, "rings", r.rings, read_ring);
    read_list(in, v, path, "timelines", r.timelines, read_timeline);
    if (!in.failed()) r.timing = read_timing(in, *v.find("timing"), child(path, "timing"));
    return r;
}

}  // namespace

bool is_report_json(const JsonValue& root) {
    return root.is(JsonType::object) &&
           (root.find("module") || (root.find("report") && root.find("baseline")));
}

ReportRead report_from_json(const JsonValue& root) {
    ReportRead out;
    In in(out.error);
    if (root.is(JsonType::object) && root.find("report") && !root.find("module")) {
        if (in.object(root, "", {"report", "baseline"})) {
            out.report = read_report(in, *root.find("report"), "report");
            out.baseline = read_report(in, *root.find("baseline"), "baseline");
        }
    } else {
        out.report = read_report(in, root, "");
    }
    if (!out.ok()) out = ReportRead{{}, std::nullopt, std::move(out.error)};
    return out;
}

ReportRead report_from_json(std::string_view text) {
    JsonParse p = parse_json(text);
    if (!p.ok()) return ReportRead{{}, std::nullopt, p.error};
    return report_from_json(p.value);
}

}  // namespace k3
