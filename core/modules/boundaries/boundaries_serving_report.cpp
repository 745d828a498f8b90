// Module 14 `boundaries`: maps 7-9 (disaggregation, the host tier, speculative decoding): their checks,
// tables, read-offs, heat maps and verdict rows.
#include <algorithm>
#include <cmath>
#include <functional>

#include "core/base/numfmt.h"
#include "core/boundaries/grid.h"
#include "core/modules/boundaries/boundaries.h"

namespace k3 {

namespace {

// How one serving map is named in its checks, table and read-offs.
struct MapText {
    const char* number;   // "7"
    const char* prefix;   // of its scalars: "pd"
    const char* method;   // "disaggregation"
    const char *x, *y;    // the table's axis columns
    const char* plotted;  // what its cells-as-plotted check holds
    int x_digits;         // significant digits of an x value in the text
};

std::string sig(double v, int digits) { return format_sig(v, digits); }

void checks(const MapText& t, const ServingMap& m, Report& r) {
    const std::string n = t.number;
    r.check("map" + n + "_fleet_runs_clean",
            "Map " + n +
                ": every fleet run accounts for every request, for its work and every byte it moved, and "
                "releases its caches",
            m.failed_checks == 0,
            std::to_string(m.runs) + " runs: " + std::to_string(m.failed_checks) + " failed checks" +
                (m.first_failure.empty() ? "" : "; first: " + m.first_failure));
    r.check("map" + n + "_cells_as_plotted", "Map " + n + ": " + t.plotted, m.off_cell == 0,
            std::to_string(m.off_cell) + " departures over " + std::to_string(m.rows.size()) + " cells" +
                (m.first_off.empty() ? "" : "; first: " + m.first_off));
}

void table(const MapText& t, const ServingMap& m, const char* measure, const char* unit, Report& r) {
    Table& tab = r.add_table(make_table(
        "Map " + std::string(t.number) + ": the fleet runs (" + std::to_string(m.instances) + " instances, " +
            std::to_string(m.requests) + " requests each, engine ideal, least loaded)",
        {{t.x, ""},
         {t.y, ""},
         {std::string(measure) + ", without", unit},
         {std::string(measure) + ", with", unit},
         {"map value", ""},
         {"TTFT mean without", "ms"},
         {"TTFT mean with", "ms"},
         {"TPOT mean without", "ms"},
         {"TPOT mean with", "ms"},
         {"failed without", "requests"},
         {"failed with", "requests"}}));
    for (const ServingMap::Row& x : m.rows)
        tab.add({x.x, x.y, x.baseline, x.method, x.value, x.baseline_ttft_ms, x.method_ttft_ms,
                 x.baseline_tpot_ms, x.method_tpot_ms, double(x.baseline_failed), double(x.method_failed)});
}

std::string cell(const MapText& t, const HeatMap& h, size_t i) {
    return std::string(t.x) + " " + sig(h.x[i % h.x.size()], t.x_digits) + ", " + t.y + " " +
           sig(h.y[i / h.x.size()], 3);
}

// The checks, table, read-offs and heat map of one map, and its verdict row (`value` shows a cell's
// value as the verdict words it).
BoundaryVerdict serving_map(const MapText& t, const ServingMap& m, const char* measure, const char* unit,
                            const std::function<std::string(double)>& value, Report& r) {
    checks(t, m, r);
    table(t, m, measure, unit, r);
    const HeatMap& h = m.heat;
    const double level = *h.contour, cells = double(h.z.size());
    const bool any = m.best < h.z.size();
    const std::string p = t.prefix, map = "Map " + std::string(t.number);
    r.scalar(p + "_win_share", map + ": cells where " + t.method + " pays", "fraction",
             double(m.wins) / cells);
    r.scalar(p + "_best", map + ": its best cell (" + h.z_label + ")", "", any ? h.z[m.best] : NAN);
    r.scalar(p + "_worst", map + ": its worst cell", "", any ? h.z[m.worst] : NAN);
    r.scalar(p + "_failed_cells", map + ": cells left empty, requests failed", "cells",
             double(m.failed_cells));
    const double from = boundaries::wins_everywhere_from(h.x, h.z, level);
    r.scalar(p + "_pays_everywhere_from", map + ": pays at every " + t.y + " from " + t.x, "", from);
    const size_t losses = size_t(std::count_if(h.z.begin(), h.z.end(), [&](double v) { return v < level; }));
    const std::string of = " of " + std::to_string(h.z.size()) + " cells";
    const std::string empty = m.failed_cells ? "; " + std::to_string(m.failed_cells) + of +
                                                   " empty: requests failed (too large for the memory the "
                                                   "method leaves them)"
                                             : "";
    BoundaryVerdict v;
    v.use = any ? value(h.z[m.best]) + " (" + cell(t, h, m.best) + ")" : "no cell to judge";
    v.dont = (losses ? "loses in " + std::to_string(losses) + of + ", down to " + value(h.z[m.worst]) + " (" +
                           cell(t, h, m.worst) + ")"
                     : "it loses in no cell of the map") +
             empty;
    v.break_even =
        "pays in " + std::to_string(m.wins) + of +
        (std::isnan(from) ? ""
                          : "; at every " + std::string(t.y) + " from " + t.x + " " + sig(from, t.x_digits));
    v.module = "fleet";
    r.heatmaps.push_back(h);
    return v;
}

}  // namespace

std::vector<BoundaryVerdict> report_serving_maps(const BoundariesResult& b, Report& r) {
    const MapText pd{"7",
                     "pd",
                     "disaggregation",
                     "prefill instances",
                     "load",
                     "each disaggregated run prefilled on its column's prefill instances and decoded on the "
                     "others, every request handed off",
                     2};
    const MapText host{"8",
                       "host",
                       "the host tier",
                       "reuse share",
                       "device states",
                       "only the runs with a host tier wrote to one, and every one of them did",
                       2};
    const MapText spec{"9",
                       "spec",
                       "speculation",
                       "acceptance length",
                       "load",
                       "the decode steps of each speculative run yielded its column's acceptance length",
                       3};
    auto share = [](double d) {
        return (d >= 0 ? "+" : "") + format_sig(d * 100, 3) + " % of requests within both levels";
    };
    auto ratio = [](double x) { return format_sig(x, 3) + "x"; };
    std::vector<BoundaryVerdict> v;
    v.push_back(serving_map(pd, b.pd, "within both levels", "fraction", share, r));
    v.back().method = "Prefill/decode disaggregation instead of colocated (same GPUs)";
    v.push_back(serving_map(
        host, b.host, "TTFT mean", "ms", [&](double x) { return ratio(x) + " lower mean TTFT"; }, r));
    const HostTierConfig& tier = b.serving_in.host;
    v.back().method = "A host cache tier (" + format_grouped(double(tier.state_slots)) + " states and " +
                      format_grouped(double(tier.kv_tokens)) + " tokens of KV per instance)";
    v.push_back(serving_map(
        spec, b.spec, "E2E mean", "ms", [&](double x) { return ratio(x) + " lower mean E2E"; }, r));
    v.back().method = std::string("Speculative decoding (") + std::to_string(b.serving_in.draft_len) +
                      " drafts, " + spec_state_ids()[size_t(b.serving_in.spec_state)] + " scratch)";
    return v;
}

}  // namespace k3
