#include "core/modules/boundaries/boundaries_serving_maps.h"

#include <cmath>

#include "core/base/numfmt.h"
#include "core/boundaries/affinity_sweep.h"
#include "core/boundaries/grid.h"
#include "core/fleet/fleet_metrics.h"
#include "core/fleet/spec_decode.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

using namespace k3::boundaries;

namespace {

// Maps 7 and 9's requests: map 6's mix (32 shared 4,096-token prefixes) at half reuse, with outputs
// long enough for decoding to weigh against prefill.
constexpr double kServingReuse = 0.5, kServingOutput = 256;

ReuseMixConfig serving_mix(const ServingMapInputs& in, double reuse) {
    ReuseMixConfig w;
    w.requests = in.requests;
    w.prefixes = 32;
    w.reuse_share = reuse;
    w.output_len_mean = kServingOutput;
    w.seed = in.fleet.seed;
    w.rate_per_s = serving_capacity_per_s(in.fleet, w);  // load 1; each run divides arrival times by its load
    return w;
}

std::function<std::shared_ptr<const Workload>(size_t)> one_workload(const ServingMapInputs& in) {
    auto w = std::make_shared<const Workload>(reuse_mix_workload(serving_mix(in, kServingReuse)));
    return [w](size_t) { return w; };
}

std::vector<double> load_axis(int grid) { return linear_axis(0.25, 1.25, grid); }
}  // namespace

// ---- the runs ----

namespace {

// Maps 7 and 9: columns of the method's setting, rows of load, one workload; the baseline (the method
// off) is the same in every column. `on` turns the method on in cell (ix, iy)'s configuration.
using MethodOn = std::function<void(FleetConfig& f, size_t ix, size_t iy)>;
std::unique_ptr<FleetSweep> load_rows(const ServingMapInputs& in, std::vector<double> x, MethodOn on) {
    FleetSweepConfig s;
    s.x = std::move(x);
    s.y = load_axis(in.grid);
    s.baseline_per_row = true;
    s.workload = one_workload(in);
    s.fleet = [in, y = s.y, on](size_t ix, size_t iy, bool method) {
        FleetConfig f = in.fleet;
        f.load = y[iy];
        if (method) on(f, ix, iy);
        return f;
    };
    return std::make_unique<FleetSweep>(std::move(s));
}

}  // namespace

std::unique_ptr<FleetSweep> pd_sweep(const ServingMapInputs& in) {
    // At most `grid` splits, from one prefill instance to one decode instance, evenly spread.
    std::vector<double> x;
    for (double P : linear_axis(1, double(in.fleet.instances - 1), in.grid))
        if (x.empty() || std::round(P) > x.back()) x.push_back(std::round(P));
    return load_rows(in, x, [in, x](FleetConfig& f, size_t ix, size_t iy) {
        uint32_t P = uint32_t(x[ix]);
        if (in.falsify == ServingMapFalsify::pd_column_shifted && is_middle(ix, x))
            P = P + 1 < f.instances ? P + 1 : P - 1;
        f.pd.prefill_instances = P;
        if (in.falsify == ServingMapFalsify::pd_record_drops && is_middle(ix, x) && iy == 0)
            f.falsify = FleetSimFalsify::pd_record_drops_state;
    });
}

std::unique_ptr<FleetSweep> host_sweep(const ServingMapInputs& in) {
    FleetSweepConfig s;
    s.x = linear_axis(0, 1, in.grid);
    s.y = integer_log_axis(4, 256, in.grid);
    s.workload = [in, x = s.x](size_t ix) {
        return std::make_shared<const Workload>(reuse_mix_workload(serving_mix(in, x[ix])));
    };
    s.fleet = [in, x = s.x, y = s.y](size_t ix, size_t iy, bool method) {
        FleetConfig f = in.fleet;
        f.load = kHostMapLoad;
        f.cache.state_capacity = uint64_t(y[iy]);
        const bool cell = is_middle(ix, x) && is_middle(iy, y);
        if (!method || (cell && in.falsify == ServingMapFalsify::host_cell_without)) return f;
        f.host = in.host;
        if (cell && in.falsify == ServingMapFalsify::host_write_unlogged)
            f.falsify = FleetSimFalsify::host_write_unlogged;
        return f;
    };
    return std::make_unique<FleetSweep>(std::move(s));
}

std::unique_ptr<FleetSweep> spec_sweep(const ServingMapInputs& in) {
    const std::vector<double> x = linear_axis(1, 1 + double(in.draft_len), in.grid);
    return load_rows(in, x, [in, x](FleetConfig& f, size_t ix, size_t iy) {
        f.spec_state = in.spec_state;
        f.draft_len = in.draft_len;
        const bool shifted = in.falsify == ServingMapFalsify::spec_column_shifted && is_middle(ix, x);
        f.acceptance_len = x[!shifted ? ix : ix + 1 < x.size() ? ix + 1 : ix - 1];
        if (in.falsify == ServingMapFalsify::spec_accepts_all && ix == 0 && iy == 0)
            f.falsify = FleetSimFalsify::spec_accepts_all;
    });
}

// ---- the maps ----

FleetRunsAudit audit_fleet_runs(const FleetSweep& s) {
    FleetRunsAudit a;
    a.runs = s.runs();
    for (size_t i = 0; i < s.runs(); ++i) {
        Report scratch;
        report_fleet_checks(scratch, s.run(i));
        for (const Check& k : scratch.checks)
            if (!k.passed && a.failed_checks++ == 0) a.first_failure = k.name + ": " + k.detail;
    }
    return a;
}

namespace {

void off_cell(ServingMap& m, bool ok, const std::string& what) {
    if (ok) return;
    if (m.off_cell++ == 0) m.first_off = what;
}

using CellValue = std::function<ServingMap::Row(const FleetSim& baseline, const FleetSim& method)>;

ServingMap make_map(const ServingMapInputs& in, const FleetSweep& s, HeatMap h, const CellValue& value) {
    ServingMap m;
    m.instances = in.fleet.instances;
    m.requests = in.requests;
    m.capacity_per_s = serving_capacity_per_s(in.fleet, serving_mix(in, kServingReuse));
    const FleetSweepConfig& c = s.config();
    h.x = c.x;
    h.y = c.y;
    h.z.assign(c.x.size() * c.y.size(), NAN);
    for (size_t iy = 0; iy < c.y.size(); ++iy)
        for (size_t ix = 0; ix < c.x.size(); ++ix) {
            const FleetSim &a = s.run(ix, iy, false), &b = s.run(ix, iy, true);
            ServingMap::Row row = value(a, b);
            row.x = c.x[ix];
            row.y = c.y[iy];
            const RequestSummary sa = summarize_requests(a.outcomes()), sb = summarize_requests(b.outcomes());
            row.baseline_ttft_ms = sa.ttft_ms.mean;
            row.method_ttft_ms = sb.ttft_ms.mean;
            row.baseline_tpot_ms = sa.tpot_ms.mean;
            row.method_tpot_ms = sb.tpot_ms.mean;
            row.baseline_failed = sa.failed;
            row.method_failed = sb.failed;
            if (sa.failed || sb.failed) {
                row.value = NAN;
                ++m.failed_cells;
            }
            h.z[iy * c.x.size() + ix] = row.value;
            m.rows.push_back(row);
        }
    m.best = m.worst = h.z.size();  // none until a cell has a value
    for (size_t i = 0; i < h.z.size(); ++i) {
        if (std::isnan(h.z[i])) continue;
        m.wins += h.z[i] > *h.contour;
        if (m.worst == h.z.size() || h.z[i] < h.z[m.worst]) m.worst = i;
        if (m.best == h.z.size() || h.z[i] > h.z[m.best]) m.best = i;
    }
    m.heat = std::move(h);
    const FleetRunsAudit audit = audit_fleet_runs(s);
    m.runs = audit.runs;
    m.failed_checks = audit.failed_checks;
    m.first_failure = audit.first_failure;
    return m;
}

// A cell of the mean of `latency` without the method over its mean with it (above 1 the method pays).
CellValue mean_ratio(Percentiles RequestSummary::*latency) {
    return [latency](const FleetSim& a, const FleetSim& b) {
        ServingMap::Row r{};
        r.baseline = (summarize_requests(a.outcomes()).*latency).mean;
        r.method = (summarize_requests(b.outcomes()).*latency).mean;
        r.value = r.method > 0 ? r.baseline / r.method : NAN;
        return r;
    };
}

HeatMap titled(std::string name, std::string x, std::string y, std::string z, double contour) {
    HeatMap h;
    h.name = std::move(name);
    h.x_label = std::move(x);
    h.y_label = std::move(y);
    h.z_label = std::move(z);
    h.contour = contour;
    return h;
}

// Map 7's cell: every admission before the handoff on the column's prefill pool, every one after it on
// its decode pool, and every request that decoded was handed off.
void pd_cell_kept(const FleetSim& b, uint32_t P, ServingMap& m) {
    for (const AdmissionRecord& a : b.admissions()) {
        const bool decode_stage = a.carried;
        off_cell(m, decode_stage == (a.instance >= P),
                 "P = " + std::to_string(P) + ": request " + std::to_string(a.req) +
                     (decode_stage ? " decoded" : " prefilled") + " on instance " +
                     std::to_string(a.instance));
    }
    for (size_t r = 0; r < b.outcomes().size(); ++r) {
        const RequestOutcome& o = b.outcomes()[r];
        off_cell(
            m, !o.completed || o.output <= 1 || o.transfer_ms >= 0,
            "P = " + std::to_string(P) + ": request " + std::to_string(r) + " decoded without a handoff");
    }
}

}  // namespace

ServingMap pd_map(const ServingMapInputs& in, const FleetSweep& s) {
    ServingMap m =
        make_map(in, s,
                 titled("7. Disaggregation vs colocated: requests within both service levels, difference",
                        "prefill instances (of " + std::to_string(in.fleet.instances) + ")",
                        "load (arrivals / serving capacity without reuse)",
                        "share within the levels, disaggregated minus colocated (simulated, estimate)", 0),
                 [&](const FleetSim& a, const FleetSim& b) {
                     ServingMap::Row r{};
                     r.baseline = slo_met(a, in.slo_ttft_ms, in.slo_tpot_ms).share;
                     r.method = slo_met(b, in.slo_ttft_ms, in.slo_tpot_ms).share;
                     r.value = r.method - r.baseline;
                     return r;
                 });
    const FleetSweepConfig& c = s.config();
    for (size_t ix = 0; ix < c.x.size(); ++ix)
        for (size_t iy = 0; iy < c.y.size(); ++iy) pd_cell_kept(s.run(ix, iy, true), uint32_t(c.x[ix]), m);
    return m;
}

ServingMap host_map(const ServingMapInputs& in, const FleetSweep& s) {
    ServingMap m =
        make_map(in, s,
                 titled("8. Host cache tier: mean TTFT without it / with it (at load " +
                            format_sig(kHostMapLoad, 2) + ")",
                        "share of requests with a shared prefix",
                        "device state capacity per instance (states)", "TTFT ratio (simulated, estimate)", 1),
                 mean_ratio(&RequestSummary::ttft_ms));
    m.heat.log_y = true;
    const FleetSweepConfig& c = s.config();
    for (size_t ix = 0; ix < c.x.size(); ++ix)
        for (size_t iy = 0; iy < c.y.size(); ++iy) {
            const FleetTotals &a = s.run(ix, iy, false).totals(), &b = s.run(ix, iy, true).totals();
            off_cell(m, a.host_writes == 0 && a.host_loads == 0 && b.host_writes > 0,
                     "reuse " + format_sig(c.x[ix], 2) + ", " + format_number(c.y[iy]) +
                         " states: " + format_count(a.host_writes) + " host writes without a tier, " +
                         format_count(b.host_writes) + " with it");
        }
    return m;
}

ServingMap spec_map(const ServingMapInputs& in, const FleetSweep& s) {
    ServingMap m = make_map(
        in, s,
        titled("9. Speculative decoding: mean E2E latency without it / with it",
               "acceptance length (tokens per verify, of 1 + " + std::to_string(in.draft_len) + " verified)",
               "load (arrivals / serving capacity without reuse)", "E2E ratio (simulated, estimate)", 1),
        mean_ratio(&RequestSummary::e2e_ms));
    const FleetSweepConfig& c = s.config();
    for (size_t ix = 0; ix < c.x.size(); ++ix)
        for (size_t iy = 0; iy < c.y.size(); ++iy) {
            const double A = SpecAcceptance(c.x[ix]).length();
            const DecodeTally d = decode_steps_of(s.run(ix, iy, true));
            off_cell(m, d.yields(A),
                     "acceptance " + format_sig(A, 4) + ", load " + format_sig(c.y[iy], 2) + ": " +
                         format_count(d.tokens) + " tokens from " + format_count(d.steps) + " steps");
        }
    return m;
}

}  // namespace k3
