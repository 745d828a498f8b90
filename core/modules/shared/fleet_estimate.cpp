#include "core/modules/shared/fleet_estimate.h"

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/fleet/fleet_cost.h"

namespace k3 {

namespace {

// Measured on the development machine with k3cli run fleet compare_routers=0 compare_no_reuse=0 over
// sessions 96 to 1536, max_batch_tokens 64 to 8192, load 0.05 to 64 and instances 1 to 64 (CPU time
// and peak RSS against the counts); kFleetMargin covers a slower machine and the spread of the fit (the
// estimates came out 1.4 to 4 times the CPU time measured).
constexpr double kFleetMargin = 2;
constexpr double kStartSeconds = 0.05;     // the process, the workload, the report
constexpr double kEventSeconds = 2e-6;     // an event popped and handled
constexpr double kVisitSeconds = 0.12e-6;  // a running request visited by an iteration
constexpr double kRouteSeconds = 0.5e-6;   // a router weighing one instance for one request
constexpr double kPageSeconds = 0.05e-6;   // a pool page set up
constexpr double kBlockSeconds = 1.1e-6;   // a KV event block indexed (kv_events, kv_cost)
constexpr double kStartBytes = 16 << 20;   // the process and its code
constexpr double kRequestBytes = 400;      // a request's workload entry, outcome and live record
constexpr double kPieceBytes = 32;         // a piece of a prompt's token sequence (a trace block)
constexpr double kNodeBytes = 100;         // a tree node, its checkpoint record and its index slot
constexpr double kPageBytes = 32;          // a working-pool page: its owner and free-list entries
constexpr double kEventBytes = 128;        // an event's share of the iteration ledgers and series
constexpr double kBlockBytes = 56;         // an indexed KV event block (kv_events, kv_cost)

// The tokens one iteration of an instance may prefill.
double prefill_budget(const FleetConfig& c) {
    double b = c.max_batch_tokens;
    if (c.engine == CacheEngine::sglang) b = std::min<double>(b, c.max_prefill_tokens);
    return std::max(b, 1.0);
}

// Pages of one instance's working pool (engine ideal: working_bytes; the engines: their shared pool).
double pool_pages(const FleetConfig& c) {
    const CostModel cm(c);
    const double page = double(c.page_tokens) * std::max(double(cm.kv_bytes_per_token()), 1.0);
    const double bytes =
        c.engine == CacheEngine::ideal ? double(c.working_bytes) : std::max(0.0, shared_pool_plan(c).budget);
    return bytes / std::max(page, 1.0);
}

bool indexes_kv_events(const FleetConfig& c) {
    return c.router.kind == RouterKind::kv_events || c.router.kind == RouterKind::kv_cost;
}

// The counts of one simulation (the header's list).
struct SimCounts {
    double events = 0, visits = 0, routes = 0, blocks = 0, nodes = 0, pages = 0;
    double seconds() const {
        return events * kEventSeconds + visits * kVisitSeconds + routes * kRouteSeconds +
               blocks * kBlockSeconds + pages * kPageSeconds;
    }
    double bytes() const {
        return events * kEventBytes + blocks * kBlockBytes + nodes * kNodeBytes + pages * kPageBytes;
    }
};

SimCounts sim_counts(double R, double prompt, double cached, const FleetConfig& c) {
    SimCounts n;
    const double inst = std::max(double(c.instances), 1.0);
    n.events = 4 * R + prompt / prefill_budget(c);
    n.visits = n.events * std::min(double(c.max_running), std::max(1.0, R / inst));
    n.routes = R * inst;
    if (indexes_kv_events(c)) n.blocks = prompt / std::max(double(c.router.event_block_tokens), 1.0);
    if (c.caching) n.nodes = cached / std::max(double(c.policy.interval), 1.0) + 2 * R;
    // A host tier keeps a second tree per instance (its writes are events too).
    if (c.host.on()) n.nodes *= 2, n.events += R;
    n.pages = inst * pool_pages(c);
    return n;
}

// Each term's total over the simulations, kept apart to tell which parameter drives the cost.
struct Totals {
    SimCounts all;
    double seconds = 0, bytes = 0, prefill_s = 0, blocks_s = 0, pages_b = 0, nodes_b = 0;
    void add(const SimCounts& n, double R) {
        seconds += n.seconds();
        bytes += n.bytes();
        prefill_s += (n.events - 4 * R) * (kEventSeconds + kVisitSeconds * n.visits / n.events);
        blocks_s += n.blocks * kBlockSeconds;
        pages_b += n.pages * kPageBytes;
        nodes_b += n.nodes * kNodeBytes;
        all.events += n.events;
        all.visits += n.visits;
        all.blocks += n.blocks;
        all.nodes += n.nodes;
        all.pages += n.pages;
    }
};

// The parameter behind the larger of the two limits' shares (RunEstimate::on).
void name_driver(RunEstimate& e, const Totals& t, const FleetConfig& c, const FleetRouterParams& router,
                 const FleetCacheParams& cache, const FleetInstanceParams& instances,
                 const void* requests_field) {
    const void* pool = c.engine == CacheEngine::ideal ? static_cast<const void*>(&instances.working_gib)
                                                      : static_cast<const void*>(&instances.pool_gib);
    if (e.bytes / kRunBytesLimit > e.seconds / kRunSecondsLimit) {
        const bool blocks = t.all.blocks > 0 && std::max(t.pages_b, t.nodes_b) < t.bytes / 2;
        e.on = blocks                    ? static_cast<const void*>(&router.event_block_tokens)
               : t.pages_b > t.nodes_b   ? pool
               : t.nodes_b > t.bytes / 2 ? static_cast<const void*>(&cache.interval)
                                         : requests_field;
        e.larger_is_cheaper = e.on == &router.event_block_tokens || e.on == &cache.interval;
        return;
    }
    if (std::max(t.prefill_s, t.blocks_s) > t.seconds / 2) {
        e.on = t.blocks_s > t.prefill_s ? static_cast<const void*>(&router.event_block_tokens)
                                        : static_cast<const void*>(&instances.max_batch_tokens);
        e.larger_is_cheaper = true;
        return;
    }
    e.on = requests_field;
}

}  // namespace

RunEstimate estimate_fleet_sims(const Workload& w, const std::vector<FleetConfig>& sims,
                                const FleetRouterParams& router, const FleetCacheParams& cache,
                                const FleetInstanceParams& instances, const void* requests_field) {
    double prompt = 0, cached = 0, pieces = 0;
    for (const Request& r : w.requests) {
        prompt += double(r.prompt_len);
        cached += double(r.cache_len());
        pieces += r.tokens ? double(r.tokens->pieces().size()) : 0.0;
    }
    const double R = double(w.requests.size());
    Totals t;
    for (const FleetConfig& c : sims) t.add(sim_counts(R, prompt, cached, c), R);
    RunEstimate e;
    e.seconds = kFleetMargin * (kStartSeconds + t.seconds);
    e.bytes = kStartBytes + R * kRequestBytes + pieces * kPieceBytes + t.bytes;
    e.counted = std::to_string(sims.size()) + " simulations of " + format_grouped(R) +
                " requests: " + format_si(t.all.events, 3) + " events, " + format_si(t.all.visits, 3) +
                " request visits, " + format_si(t.all.blocks, 3) + " KV event blocks, " +
                format_si(t.all.nodes, 3) + " tree nodes, " + format_si(t.all.pages, 3) + " pool pages";
    if (!sims.empty()) name_driver(e, t, sims[0], router, cache, instances, requests_field);
    return e;
}

}  // namespace k3
