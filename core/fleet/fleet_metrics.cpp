#include "core/fleet/fleet_metrics.h"

#include <algorithm>

namespace k3 {

double percentile_sorted(const std::vector<double>& v, double q) {
    if (v.empty()) return 0;
    const double pos = q * double(v.size() - 1);
    const size_t i = size_t(pos);
    if (i + 1 >= v.size()) return v.back();
    const double f = pos - double(i);
    return v[i] + (v[i + 1] - v[i]) * f;
}

Percentiles percentiles(std::vector<double> v) {
    Percentiles p;
    if (v.empty()) return p;
    std::sort(v.begin(), v.end());
    p.n = v.size();
    double sum = 0;
    for (double x : v) sum += x;
    p.mean = sum / double(v.size());
    p.p50 = percentile_sorted(v, 0.50);
    p.p90 = percentile_sorted(v, 0.90);
    p.p99 = percentile_sorted(v, 0.99);
    p.max = v.back();
    return p;
}

double jain_index(const std::vector<double>& x) {
    double s = 0, s2 = 0;
    for (double v : x) s += v, s2 += v * v;
    return s2 > 0 ? s * s / (double(x.size()) * s2) : 1.0;
}

std::vector<double> max_min_fair_shares(double total, const std::vector<double>& demand,
                                        const std::vector<double>& w) {
    std::vector<double> fair(demand.size(), 0);
    std::vector<bool> fixed(demand.size(), false);
    double left = total;
    for (;;) {
        double wsum = 0;
        for (size_t i = 0; i < demand.size(); ++i)
            if (!fixed[i]) wsum += w[i];
        if (wsum <= 0) break;
        bool changed = false;
        for (size_t i = 0; i < demand.size(); ++i)
            if (!fixed[i] && demand[i] <= left * w[i] / wsum) {
                fair[i] = demand[i];
                fixed[i] = true;
                left -= demand[i];
                changed = true;
            }
        if (!changed) {
            for (size_t i = 0; i < demand.size(); ++i)
                if (!fixed[i]) fair[i] = left * w[i] / wsum;
            break;
        }
    }
    return fair;
}

RequestSummary summarize_requests(const std::vector<RequestOutcome>& v, const RequestFilter& keep) {
    RequestSummary s;
    std::vector<double> ttft, tpot, e2e;
    bool first = true;
    for (const RequestOutcome& o : v) {
        if (keep && !keep(o)) continue;
        ++s.requests;
        s.first_arrival_ms = first ? o.arrival_ms : std::min(s.first_arrival_ms, o.arrival_ms);
        first = false;
        s.prompt_tokens += o.prompt;
        s.output_tokens += o.generated;
        s.kv_hit_tokens += o.kv_hit;
        s.state_hit_tokens += o.state_hit;
        s.best_state_tokens += std::max(o.best_state_hit, o.state_hit);
        s.prefill_work += o.prefill_work;
        s.preemptions += o.preemptions;
        s.moves += o.moves;
        s.violations += o.violations;
        if (o.completed) {
            ++s.completed;
            ttft.push_back(o.ttft_ms());
            e2e.push_back(o.e2e_ms());
            if (o.output > 1) tpot.push_back(o.tpot_ms());
            s.last_finish_ms = std::max(s.last_finish_ms, o.finish_ms);
        } else if (o.failed != FailReason::none) {
            ++s.failed;
        }
    }
    s.ttft_ms = percentiles(std::move(ttft));
    s.tpot_ms = percentiles(std::move(tpot));
    s.e2e_ms = percentiles(std::move(e2e));
    return s;
}

FleetSummary summarize_fleet(const FleetSim& sim) {
    FleetSummary f;
    f.all = summarize_requests(sim.outcomes());
    f.makespan_s = f.all.span_s();
    if (f.makespan_s > 0) {
        f.output_tokens_per_s = double(f.all.output_tokens) / f.makespan_s;
        f.total_tokens_per_s = double(f.all.prompt_tokens + f.all.output_tokens) / f.makespan_s;
    }
    std::vector<double> busy;
    double most = 0;
    for (const InstanceStats& s : sim.instance_stats()) {
        busy.push_back(s.busy_ms / 1000.0);
        f.busy_s += s.busy_ms / 1000.0;
        most = std::max(most, s.busy_ms / 1000.0);
    }
    const double mean = busy.empty() ? 0 : f.busy_s / double(busy.size());
    f.load_imbalance = mean > 0 ? most / mean : 1.0;
    f.jain_busy = jain_index(busy);
    const double gpus = double(sim.cost_model().gpus());
    f.gpu_hours_provisioned = double(busy.size()) * gpus * f.makespan_s / 3600.0;
    f.gpu_hours_busy = gpus * f.busy_s / 3600.0;
    return f;
}

SloMet slo_met(const FleetSim& s, double ttft_ms, double tpot_ms) {
    SloMet m;
    uint64_t n = 0;
    for (const RequestOutcome& o : s.outcomes()) {
        ++n;
        m.met += o.completed && o.ttft_ms() <= ttft_ms && o.tpot_ms() <= tpot_ms;
    }
    const double span = summarize_fleet(s).makespan_s;
    m.share = n ? double(m.met) / double(n) : 0;
    m.per_s = span > 0 ? double(m.met) / span : 0;
    return m;
}

DecodeTally decode_steps_of(const FleetSim& s) {
    DecodeTally d;
    for (const RequestOutcome& o : s.outcomes()) {
        d.steps += o.decode_steps;
        d.tokens += o.decode_step_tokens;
        d.requests += o.decode_steps > 0;
    }
    return d;
}

}  // namespace k3
