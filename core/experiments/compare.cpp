#include "core/experiments/compare.h"

#include <cmath>
#include <map>

#include "core/base/numfmt.h"

namespace k3 {

static size_t declared_by_both(const Experiment& a, const Experiment& b) {
    const Params declared = b.defaults();
    size_t n = 0;
    for (const auto& s : a.params) n += declared.spec(s.key) != nullptr;
    return n;
}

bool shares_parameter_set(const Experiment& pinned, const Experiment& shown) {
    if (&pinned == &shown) return true;
    return !pinned.params.empty() && 2 * declared_by_both(pinned, shown) >= pinned.params.size();
}

std::optional<Params> baseline_params(const Pin& pin, const Experiment& shown, std::string& why) {
    if (!pin.module) return std::nullopt;
    if (!shares_parameter_set(*pin.module, shown)) {
        why = "the baseline was pinned in module " + std::to_string(pin.module->number) + " " +
              pin.module->id + ", whose parameters this module does not share";
        return std::nullopt;
    }
    if (pin.module == &shown) return pin.params;
    Params p = shown.defaults();
    std::vector<ParamIssue> issues;
    for (const auto& s : pin.params.specs())
        if (p.spec(s.key)) p.set(s.key, pin.params.text(s.key), RangePolicy::strict, issues);
    for (const auto& i : shown.check(p)) issues.push_back(i);
    for (const auto& i : issues)
        if (i.level == ParamIssue::error) {
            why = "the baseline's settings are refused here: " + i.message;
            return std::nullopt;
        }
    return p;
}

std::string parameter_differences(const Params& current, const Params& baseline) {
    std::string out;
    for (const auto& s : current.specs()) {
        if (!baseline.spec(s.key)) continue;
        const std::string a = current.text(s.key), b = baseline.text(s.key);
        if (a != b) out += (out.empty() ? "" : ", ") + s.key + "=" + a + " (baseline " + b + ")";
    }
    return out;
}

// Row of `base` matching each row of `cur`: by the first cell's text when the first column is text
// in both, else by position; -1 when there is none.
static std::vector<int> matched_rows(const Table& cur, const Table& base) {
    std::vector<int> match(cur.rows.size(), -1);
    std::map<std::string, int> by_key;
    bool keyed = true;
    for (const auto* t : {&cur, &base})
        for (const auto& row : t->rows) keyed &= !row.empty() && std::holds_alternative<std::string>(row[0]);
    if (keyed)
        for (size_t r = 0; r < base.rows.size(); ++r)
            by_key.emplace(std::get<std::string>(base.rows[r][0]), int(r));
    for (size_t r = 0; r < cur.rows.size(); ++r) {
        if (keyed) {
            const auto it = by_key.find(std::get<std::string>(cur.rows[r][0]));
            match[r] = it == by_key.end() ? -1 : it->second;
        } else if (r < base.rows.size()) {
            match[r] = int(r);
        }
    }
    return match;
}

static bool numeric_column(const Table& t, size_t c) {
    bool any = false;
    for (const auto& row : t.rows) {
        if (c >= row.size()) continue;
        if (!std::holds_alternative<double>(row[c])) return false;
        any = true;
    }
    return any;
}

Table table_with_baseline(const Table& current, const Table& baseline) {
    Table out;
    out.name = current.name;
    std::vector<bool> paired(current.columns.size());
    for (size_t c = 0; c < current.columns.size(); ++c) {
        const std::string unit = c < current.units.size() ? current.units[c] : "";
        out.columns.push_back(current.columns[c]);
        out.units.push_back(unit);
        paired[c] = numeric_column(current, c) && c < baseline.columns.size() &&
                    baseline.columns[c] == current.columns[c];
        if (!paired[c]) continue;
        out.columns.push_back(current.columns[c] + " (baseline)");
        out.units.push_back(unit);
    }
    const std::vector<int> match = matched_rows(current, baseline);
    for (size_t r = 0; r < current.rows.size(); ++r) {
        std::vector<Cell> row;
        for (size_t c = 0; c < current.columns.size(); ++c) {
            row.push_back(c < current.rows[r].size() ? current.rows[r][c] : Cell(std::string()));
            if (!paired[c]) continue;
            const auto* b = match[r] < 0 ? nullptr : &baseline.rows[size_t(match[r])];
            row.push_back(b && c < b->size() ? (*b)[c] : Cell(std::string()));
        }
        out.rows.push_back(std::move(row));
    }
    return out;
}

std::string format_difference(double current, double baseline, const std::string& unit) {
    if (current == baseline || (std::isnan(current) && std::isnan(baseline))) return "same";
    const double d = current - baseline;
    const std::string sign = d > 0 ? "+" : "";
    // A difference of fractions in percentage points: "+2.5 %" would read as relative.
    if (unit == "fraction") return sign + trim_zeros(format_sig(100 * d, 3)) + " pp";
    if (baseline == 0 || !std::isfinite(d / baseline)) return sign + format_with_unit(d, unit);
    return sign + trim_zeros(format_sig(100 * d / std::fabs(baseline), 3)) + " %";
}

}  // namespace k3
