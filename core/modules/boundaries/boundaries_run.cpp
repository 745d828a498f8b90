// Module 14 `boundaries`: the six maps in turn, the simulations of maps 2 and 6 stepped across slices,
// the verdict last.
#include "core/boundaries/grid.h"
#include "core/fleet/workload_source.h"
#include "core/model/accounting.h"
#include "core/modules/boundaries/boundaries.h"

namespace k3 {

namespace {

constexpr int kIntervalSessions = 24;  // synthetic mix of module 5 for the interval replays

// Map 2's workload: module 5's synthetic mix (chats, agent trees, shared system prompts), replayed at
// every interval from 64 to 16,384 tokens (hardly any of its requests is longer).
void plan_intervals(const BoundariesParams& p, BoundariesResult& b) {
    WorkloadSpec ws;
    ws.sessions = kIntervalSessions;
    ws.seed = p.seed;
    b.interval_workload = std::make_shared<const Workload>(synthetic_workload(ws));
    const MemoryAccount a = account_memory(b.in.model);
    ReplayConfig rc;
    rc.policy.kind = PolicyKind::interval;
    rc.state_bytes = a.state_bytes;
    rc.kv_bytes_per_token = a.kv_bytes_per_token;
    for (uint32_t I = 64; I <= 16384; I *= 2) {
        rc.policy.interval = I;
        b.interval_replays.add(std::to_string(I), double(I), rc);
    }
}

// Map 6's fleet runs: every cell of reuse share and load, least loaded and affinity.
std::unique_ptr<boundaries::AffinitySweep> plan_fleet(const BoundariesParams& p, const BoundaryInputs& in) {
    boundaries::AffinitySweepConfig c;
    c.fleet.model = in.model;
    c.fleet.hardware = in.hardware;
    c.fleet.instances = p.instances;
    c.fleet.cache.state_capacity = p.state_capacity;
    c.fleet.seed = p.seed;
    c.affinity = p.affinity;
    c.reuse = boundaries::linear_axis(0, 1, p.fleet_grid);
    c.load = boundaries::linear_axis(0.25, 1.25, p.fleet_grid);
    c.workload.requests = p.fleet_requests;
    c.workload.prefixes = 32;
    c.workload.seed = p.seed;
    return std::make_unique<boundaries::AffinitySweep>(c);
}

// The replays as map 2 reads them, damaged as the falsifier says: the two finest intervals get each
// other's totals.
std::vector<ReplayResult> interval_runs(const BoundariesParams& p, const ReplayQueue& q) {
    std::vector<ReplayResult> runs = q.results();
    if (p.falsify == BoundariesFalsify::interval_replays_swapped && runs.size() >= 2) {
        std::swap(runs[0].t, runs[1].t);
        std::swap(runs[0].s, runs[1].s);
    }
    return runs;
}

// The fleet runs' records as map 6 reads them, damaged as the falsifier says: the reuse-0 column at
// the lowest load.
FleetRecords read_fleet_records(const BoundariesParams& p, const boundaries::AffinitySweep& s) {
    FleetRecords r = fleet_records(s);
    if (r.empty() || r[0].empty()) return r;
    std::vector<RequestOutcome>& least_loaded = r[0][0][0];
    std::vector<RequestOutcome>& affinity = r[0][0][1];
    if (p.falsify == BoundariesFalsify::fleet_record_dropped && !least_loaded.empty())
        least_loaded.pop_back();
    if (p.falsify == BoundariesFalsify::affinity_misroute && !affinity.empty())
        affinity[0].instance = int32_t((uint32_t(affinity[0].instance) + 1) % p.instances);
    return r;
}

class BoundariesRun final : public StagedRun {
  public:
    BoundariesRun(const BoundariesParams& p, const Params& raw) : StagedRun("boundaries", raw) {
        result_.in = boundary_inputs(p);
        add_step("map 1: prefix caching", 0.5, [this] { result_.prefix = prefix_map(result_.in); });
        add_step("map 2: making the workload", 0.2, [this, p] { plan_intervals(p, result_); });
        add_stage("map 2: replaying it at each checkpoint interval", 3, [this](const Deadline& d) {
            return result_.interval_replays.step(*result_.interval_workload, d);
        });
        add_step("map 2: checkpoint interval", 0.2, [this, p] {
            result_.interval = interval_map(result_.in, *result_.interval_workload,
                                            interval_runs(p, result_.interval_replays));
        });
        add_step("map 3: projection replay", 0.5, [this] { result_.replay = replay_map(result_.in); });
        add_step("map 4: context parallelism", 0.5, [this] { result_.cp = cp_map(result_.in); });
        add_step("map 5: migration", 0.5, [this] { result_.migration = migration_map(result_.in); });
        add_step("map 6: planning the fleet runs", 0.1,
                 [this, p] { result_.sweep = plan_fleet(p, result_.in); });
        add_stage("map 6: fleet runs, affinity vs least loaded", 6,
                  [this](const Deadline& d) { return result_.sweep->step(d); });
        add_step("map 6: affinity", 0.2, [this, p] {
            result_.fleet_records = read_fleet_records(p, *result_.sweep);
            result_.affinity = affinity_map(*result_.sweep, result_.fleet_records);
        });
        add_step("verdict", 0.1, [this] { report_boundaries(result_, report_); });
    }

  private:
    BoundariesResult result_;
};

}  // namespace

BoundaryInputs boundary_inputs(const BoundariesParams& p) {
    BoundaryInputs in;
    in.model = *model_preset(p.preset);
    in.hardware = p.hardware;
    in.residence_s = p.residence_s;
    in.context = p.context;
    in.batch = p.batch;
    in.link = p.link;
    in.cp_link = p.cp_link;
    in.dest_checkpoint = p.dest_checkpoint;
    in.checkpoint_distance = p.checkpoint_distance;
    in.resolution = p.resolution;
    in.variant = p.variant;
    in.align = p.prefix_caching;
    in.falsify = p.falsify;
    return in;
}

std::unique_ptr<Run> start_boundaries(const BoundariesParams& p, const Params& raw) {
    return std::make_unique<BoundariesRun>(p, raw);
}

}  // namespace k3
