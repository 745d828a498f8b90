// Module 14 `boundaries`: the nine maps in turn, the simulations of maps 2 and 6-9 stepped across slices,
// the verdict last.
#include <algorithm>

#include "core/boundaries/grid.h"
#include "core/fleet/tp_layout.h"
#include "core/fleet/workload_source.h"
#include "core/model/accounting.h"
#include "core/modules/boundaries/boundaries.h"
#include "core/modules/checkpoints/checkpoints.h"

namespace k3 {

namespace {

constexpr int kIntervalSessions = 24;  // synthetic mix of module 5 for the interval replays
constexpr uint32_t kFinestSpacing = 64, kCoarsestSpacing = 16384;

// Map 2 under an engine: its own replay at each value of the setting that spaces its states, from 64
// to 16,384 tokens, then at the configured value if that is not one of them.
void plan_engine_spacings(const BoundariesParams& p, BoundariesResult& b) {
    boundaries::EngineSpacingConfig c;
    c.engine = p.engine;
    c.sglang = boundaries_sglang(p);
    c.vllm = boundaries_vllm(p);
    for (uint32_t S = kFinestSpacing; S <= kCoarsestSpacing; S *= 2) c.spacings.push_back(S);
    b.engine_axis_runs = c.spacings.size();
    const uint32_t setting =
        p.engine == CacheEngine::sglang ? c.sglang.chunked_prefill_tokens : c.vllm.block_tokens;
    if (std::find(c.spacings.begin(), c.spacings.end(), setting) == c.spacings.end())
        c.spacings.push_back(setting);
    if (p.falsify == BoundariesFalsify::engine_run_slips) c.slip_run = 1;
    if (p.falsify == BoundariesFalsify::engine_run_halved) c.halved_run = 1;
    b.engine_sweep = std::make_unique<boundaries::EngineSpacingSweep>(std::move(c));
}

// Map 2's workload: module 5's synthetic mix (chats, agent trees, shared system prompts), replayed at
// every interval from 64 to 16,384 tokens (hardly any of its requests is longer).
void plan_intervals(const BoundariesParams& p, BoundariesResult& b) {
    WorkloadSpec ws;
    ws.sessions = kIntervalSessions;
    ws.seed = p.seed;
    b.interval_workload = std::make_shared<const Workload>(synthetic_workload(ws));
    if (p.engine != CacheEngine::ideal) return plan_engine_spacings(p, b);
    const MemoryAccount a = account_memory(b.in.model);
    ReplayConfig rc;
    rc.policy.kind = PolicyKind::interval;
    rc.state_bytes = a.state_bytes;
    rc.kv_bytes_per_token = a.kv_bytes_per_token;
    for (uint32_t I = kFinestSpacing; I <= kCoarsestSpacing; I *= 2) {
        rc.policy.interval = I;
        b.interval_replays.add(std::to_string(I), double(I), rc);
    }
}

// Map 6's fleet runs: every cell of reuse share and load, least loaded and affinity.
std::unique_ptr<boundaries::AffinitySweep> plan_fleet(const BoundariesParams& p, const BoundaryInputs& in) {
    boundaries::AffinitySweepConfig c;
    c.fleet.model = in.model;
    c.fleet.hardware = in.hardware;
    c.fleet.gpus = fleet_map_gpus(in.model, in.hardware);
    c.fleet.instances = p.instances;
    // Under an engine the cache lives in each instance's one pool (what the running requests leave):
    // the state capacity is engine=ideal's.
    c.fleet.cache.state_capacity = p.engine == CacheEngine::ideal ? p.state_capacity : 0;
    c.fleet.seed = p.seed;
    c.fleet.engine = p.engine;
    c.fleet.sglang = boundaries_sglang(p);
    c.fleet.vllm = boundaries_vllm(p);
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
            if (result_.engine_sweep) return result_.engine_sweep->step(*result_.interval_workload, d);
            return result_.interval_replays.step(*result_.interval_workload, d);
        });
        add_step("map 2: checkpoint interval", 0.2, [this, p] { map_intervals(p); });
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
        add_serving_maps(p);
        add_step("verdict", 0.1, [this] { report_boundaries(result_, report_); });
    }

  private:
    // Maps 7-9: each sweep planned, run across slices, then read.
    void add_serving_maps(const BoundariesParams& p) {
        using Sweep = std::unique_ptr<boundaries::FleetSweep>;
        using Plan = Sweep (*)(const ServingMapInputs&);
        using Read = ServingMap (*)(const ServingMapInputs&, const boundaries::FleetSweep&);
        struct Stage {
            const char* name;
            Sweep BoundariesResult::*runs;
            ServingMap BoundariesResult::*map;
            Plan plan;
            Read read;
        };
        static const Stage stages[] = {
            {"map 7: disaggregation", &BoundariesResult::pd_runs, &BoundariesResult::pd, pd_sweep, pd_map},
            {"map 8: host tier", &BoundariesResult::host_runs, &BoundariesResult::host, host_sweep, host_map},
            {"map 9: speculative decoding", &BoundariesResult::spec_runs, &BoundariesResult::spec, spec_sweep,
             spec_map}};
        add_step("maps 7-9: planning", 0.1, [this, p] { result_.serving_in = serving_map_inputs(p); });
        for (const Stage& st : stages) {
            add_stage(std::string(st.name) + ", fleet runs", 4, [this, st](const Deadline& d) {
                if (!(result_.*st.runs)) result_.*st.runs = st.plan(result_.serving_in);
                return (result_.*st.runs)->step(d);
            });
            add_step(st.name, 0.1,
                     [this, st] { result_.*st.map = st.read(result_.serving_in, *(result_.*st.runs)); });
        }
    }

    void map_intervals(const BoundariesParams& p) {
        const Workload& w = *result_.interval_workload;
        if (!result_.engine_sweep) {
            result_.interval = interval_map(result_.in, w, interval_runs(p, result_.interval_replays));
            return;
        }
        const boundaries::EngineSpacingConfig& c = result_.engine_sweep->config();
        const uint32_t setting =
            c.engine == CacheEngine::sglang ? c.sglang.chunked_prefill_tokens : c.vllm.block_tokens;
        result_.interval = engine_spacing_map(result_.in, w, result_.engine_sweep->runs(),
                                              result_.engine_axis_runs, setting);
    }

    BoundariesResult result_;
};

}  // namespace

int fleet_map_gpus(const ModelConfig& m, const Hardware& h) {
    FleetConfig f;
    f.model = m;
    f.hardware = h;
    for (int g = 2; g <= kFleetMapMaxGpus; g *= 2) {
        f.gpus = g;
        const MemoryPlan plan = memory_plan(f);
        if (plan.weights + plan.working <= plan.device && tp_layout_error(m, g, false).empty()) return g;
    }
    return 0;
}

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
    in.engine = p.engine;
    in.falsify = p.falsify;
    return in;
}

// Module 11's instance of maps 6's size under engine=ideal (disaggregation and the host tier are
// modelled for it), least-loaded routing, the chosen host tier and prefill-to-decode link.
ServingMapInputs serving_map_inputs(const BoundariesParams& p) {
    ServingMapInputs in;
    FleetConfig& f = in.fleet;
    f.model = *model_preset(p.preset);
    f.hardware = p.hardware;
    f.gpus = fleet_map_gpus(f.model, f.hardware);
    f.instances = p.instances;
    f.cache.state_capacity = p.state_capacity;
    f.seed = p.seed;
    f.router.kind = RouterKind::least_loaded;
    // Working memory as the engines size their pool (0.9 of the device less weights and activations),
    // less the device cache's states at capacity; never below module 11's default.
    const double cache_states = double(p.state_capacity) * double(account_memory(f.model).state_bytes);
    f.working_bytes = uint64_t(std::max(double(f.working_bytes), shared_pool_plan(f).budget - cache_states));
    f.pd.link = p.link;
    apply_host_tier(p.host, f);
    in.host = f.host;
    f.host = {};
    in.requests = p.fleet_requests;
    in.grid = p.fleet_grid;
    in.slo_ttft_ms = p.slo_ttft_ms;
    in.slo_tpot_ms = p.slo_tpot_ms;
    in.spec_state = p.spec_state;
    in.draft_len = p.draft_len;
    in.falsify = p.serving_falsify;
    return in;
}

SglangConfig boundaries_sglang(const BoundariesParams& p) {
    SglangConfig c;
    c.mode = p.sglang_mode;
    c.chunked_prefill_tokens = p.chunked_prefill_tokens;
    c.state_bytes = account_memory(*model_preset(p.preset)).state_bytes;
    return c;
}

// Module 5's configuration of vLLM (vllm_setup: the block derived at TP 1 by module 3's derivation, or
// the given one), from the parameters the two modules share.
VllmEngineConfig boundaries_vllm(const BoundariesParams& p, std::string* error) {
    CheckpointsParams c;
    c.preset = p.preset;
    c.engine = CacheEngine::vllm;
    c.vllm_block_tokens = p.vllm_block_tokens;
    c.retention_interval = p.retention_interval;
    const CheckpointsVllm v = vllm_setup(c);
    if (error) *error = v.derivation_error;
    return v.config;
}

std::unique_ptr<Run> start_boundaries(const BoundariesParams& p, const Params& raw) {
    return std::make_unique<BoundariesRun>(p, raw);
}

}  // namespace k3
