// Module 14 `boundaries`: where each method stops paying. Six break-even maps computed with the core
// code of the modules they judge: the cost of each method in one currency (core/boundaries/economics.h),
// module 5's workload replay for checkpoint intervals, module 11's fleet simulator for routing. Each map
// has its break-even contour; the break-evens read off for the chosen model and hardware fill a verdict
// table. The maps themselves are built in core/experiments/boundaries_maps.cpp.
#include <memory>

#include "core/base/numfmt.h"
#include "core/boundaries/grid.h"
#include "core/experiments/boundaries_maps.h"
#include "core/experiments/registry.h"
#include "core/fleet/workload_source.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B"};
constexpr int kIntervalSessions = 24;  // synthetic mix of module 5 for the interval replays

std::vector<ParamSpec> boundaries_params() {
    return {
        ParamSpec::choice("preset", "Model", kPresets, "kimi-linear-48b", kPresetLabels)
            .in_group("Model and hardware")
            .describe("Published configuration: state and KV bytes (module 2) and parameter counts for the "
                      "roofline."),
        ParamSpec::choice("hardware", "GPU", hardware_preset_ids(), "h100", hardware_preset_names())
            .in_group("Model and hardware")
            .describe("Datasheet peak dense BF16 FLOP/s, HBM bandwidth and memory: every time is a roofline "
                      "estimate at 50 % of peak compute and 80 % of peak bandwidth; memory rent is charged "
                      "against this device's memory."),
        ParamSpec::real("residence_s", "Residence of a cache entry", "s", 0.1, 3600, 30)
            .log()
            .in_group("Serving")
            .describe(
                "How long a cached prefix or checkpoint stays in device memory before it is reused or "
                "evicted: its memory rent runs this long (maps 1 and 2). The synthetic chat's mean think "
                "time is 30 s; SGLang's gateway prunes its tree every 120 s."),
        ParamSpec::integer("context", "Context of a request", "tokens", 256, 1048576, 32768)
            .log()
            .in_group("Serving")
            .describe(
                "Used for the read-offs: the reuse a prefix this long needs (map 1), the decode step of the "
                "batch (map 3), the bandwidth at which moving such a request pays (map 5)."),
        ParamSpec::integer("batch", "Running requests", "requests", 1, 1024, 64)
            .log()
            .in_group("Serving")
            .describe(
                "Requests in one decode step (map 3): the step's roofline time is how long each request's "
                "rollback storage is held."),
        ParamSpec::choice("link", "Instance link", link_preset_ids(), "ib-ndr", link_preset_names())
            .in_group("Serving")
            .describe("Between instances, for the migration read-off (map 5 sweeps the bandwidth itself)."),
        ParamSpec::choice("cp_link", "Link between CP ranks", link_preset_ids(), "nvlink4",
                          link_preset_names())
            .in_group("Serving")
            .describe("Carries the affine scan's maps and the attention KV between context-parallel ranks "
                      "(map 4)."),
        ParamSpec::flag("dest_checkpoint", "Destination holds a checkpoint", false)
            .in_group("Serving")
            .describe(
                "Map 5: the destination already holds a state checkpoint of the moved request (a host-tier "
                "replica), so moving only the KV and recomputing from the checkpoint is an option too."),
        ParamSpec::integer("checkpoint_distance", "Checkpoint distance", "tokens", 0, 65536, 512)
            .in_group("Serving")
            .active_when("dest_checkpoint", "1")
            .describe(
                "Tokens between that checkpoint and the request's position (module 5's interval: at most "
                "one interval back)."),
        ParamSpec::integer("resolution", "Map resolution", "cells", 6, 40, 20)
            .in_group("Maps")
            .describe("Cells per axis of the computed maps (1, 4 and 5; the acceptance axis of map 3)."),
        ParamSpec::integer("instances", "Instances", "", 2, 16, 4)
            .in_group("Fleet map")
            .describe("Serving instances of the fleet runs (2 GPUs each, as in module 11)."),
        ParamSpec::integer("state_capacity", "State capacity per instance", "states", 0, 1e6, 64)
            .in_group("Fleet map")
            .describe(
                "Checkpoints each instance's prefix cache holds (0 = unbounded; module 11's default is 64). "
                "A bounded cache is what makes routing matter: least loaded spreads every prefix over "
                "every instance and evicts it sooner."),
        ParamSpec::integer("fleet_requests", "Requests per run", "requests", 40, 2000, 960)
            .log()
            .in_group("Fleet map")
            .describe("Requests of each fleet run; every cell is two runs (least loaded, affinity)."),
        ParamSpec::integer("fleet_grid", "Fleet map cells per axis", "cells", 2, 8, 5)
            .in_group("Fleet map")
            .describe("Reuse shares and loads of the fleet map: cells^2 x 2 simulations."),
        ParamSpec::choice("affinity", "Affinity router", {"prefix", "state_aware"}, "prefix",
                          {"prefix affinity (SGLang cache_aware)", "state-aware affinity"})
            .in_group("Fleet map")
            .describe(
                "The router compared with least loaded: affinity on the KV-visible match (what KV events "
                "export) or on the state-usable match (module 11). Session hashing is left out: every "
                "request of this workload is its own session."),
        ParamSpec::integer("seed", "Seed", "", 0, 1e9, 1)
            .in_group("Fleet map")
            .describe("Seeds the synthetic workloads of maps 2 and 6."),
    };
}

std::vector<ParamIssue> validate_boundaries(const Params& p) {
    std::vector<ParamIssue> out;
    FleetConfig f;
    f.model = *model_preset(p.str("preset"));
    f.hardware = *hardware_preset(p.str("hardware"));
    const MemoryPlan m = memory_plan(f);
    if (m.weights + m.working > m.device)
        out.push_back({ParamIssue::warning, "preset",
                       "the fleet map's instances of " + std::to_string(f.gpus) + " x " + f.hardware.name +
                           " cannot hold the weights (" + format_bytes(m.weights) + ") and working memory (" +
                           format_bytes(m.working) + "); its times are roofline estimates regardless"});
    const int g = p.i("fleet_grid");
    const double runs = 2.0 * g * g * p.num("fleet_requests");
    if (runs > 2.0 * 5 * 5 * 2000)
        out.push_back({ParamIssue::error, "fleet_requests",
                       "the fleet map would simulate " + format_grouped(runs) +
                           " requests; the page's limit is 100,000: lower the requests or the cells"});
    return out;
}

const char* kHowItWorks =
    "Each map asks one question of one method and answers it with the core code of the module that built the "
    "method: a heat map over two quantities with a white line where the method breaks even. The break-evens "
    "read "
    "off for the chosen model and GPU fill the verdict table.\n\n"
    "Currency. Where a method trades memory for compute, both are priced in GPU-seconds of one device of the "
    "hardware preset. Work costs its roofline time, max(FLOPs / (peak x 0.5), bytes / (bandwidth x 0.8)). "
    "Memory "
    "costs rent: bytes held x seconds held / device memory, because memory that holds a cache entry cannot "
    "hold "
    "running requests. Marconi (Pan et al., MLSys 2025, arXiv 2411.19379) likewise judges hybrid-model cache "
    "entries by the compute a hit saves relative to the memory the entry holds. Context parallelism and "
    "migration are latency questions "
    "and are compared in seconds.\n\n"
    "- 1. Prefix caching with a checkpoint (modules 4, 5). A finished request's prefix of P tokens is kept: "
    "its "
    "attention KV and one state checkpoint at P, both held for the residence time; the checkpoint is written "
    "once "
    "(a copy of the state). If a later request reuses it (probability p) it skips the prefill of P tokens "
    "inside a "
    "running batch (prefill_cost without the weight stream). Net = p x prefill - KV rent - checkpoint, shown "
    "per "
    "prefix token; it breaks even at p = (KV rent + checkpoint) / prefill.\n"
    "- 2. Checkpoint interval (module 5). A synthetic mix of chats, agent trees and shared system prompts is "
    "replayed through one instance's radix cache at intervals of 64 to 16,384 tokens (module 5's replay, "
    "unbounded "
    "capacity). Halving the interval from 2 I to I resumes some tokens instead of recomputing them and "
    "writes more "
    "checkpoints, each costing its write and its rent over the residence on the y axis. The colour is log10 "
    "of "
    "the recompute that halving avoids over the cost of the checkpoints it adds, per request; the white line "
    "is "
    "where a denser interval stops paying.\n"
    "- 3. Projection replay (module 7). One verification of N tokens per request, every linear layer. "
    "Snapshots: "
    "the kernel writes a state after each of the N tokens and a restore is an index move (vLLM); N + 1 "
    "states are "
    "held. Replay: the kernel writes N minimal exact records; on commit the confirmed state is read, the "
    "kept "
    "tokens (1 + a + ... + a^(N-1) at acceptance a) are replayed and the state is written back; one state "
    "and N "
    "records are held. Work is the HBM traffic and the replay's FLOPs; rent runs for one decode step of the "
    "batch "
    "(decode_step_cost). Shown per kept token.\n"
    "- 4. Context parallelism (module 9). A prompt of R x n tokens in R contiguous slices. One rank: "
    "prefill_cost of "
    "the whole prompt. R ranks: the last rank's prefill of its n tokens after the (R - 1) n before them (its "
    "causal "
    "attention sees them all), plus its extra linear-layer work for the exact affine scan (the local map and "
    "ceil(log2 R) compositions counted by core/cp/work.h), the scan's maps over the link ((K K + K V) x 4 B "
    "per "
    "value head, layer and round) and the attention KV of the earlier tokens, not overlapped with compute. "
    "The "
    "white line is speed-up 1.\n"
    "- 5. Migration (module 10). Moving a paused request, its state and KV in the exact blob of "
    "core/lifecycle/blob_layout.h, over a link of the bandwidth on the y axis, against recomputing its "
    "context at "
    "the destination inside running batches (lifecycle::migration_costs). When the destination holds a "
    "checkpoint "
    "of the request, moving only the KV and recomputing from it is a candidate too. The colour is "
    "log10(recompute "
    "time / best move time); the white line is where they are equal.\n"
    "- 6. Affinity vs least loaded (module 11). For each share of requests that start with one of 32 shared "
    "4,096-token prefixes (popularity 1 / rank; the others are unique prompts of the same mean length), the "
    "same "
    "requests are simulated on the fleet at each load, once with least-loaded routing and once with the "
    "affinity "
    "router, each instance's cache holding a bounded number of checkpoints. Load 1 is the fleet's prefill "
    "capacity without reuse. The colour is mean TTFT under least loaded / under affinity: above 1 affinity "
    "pays.\n\n"
    "Each break-even in the verdict is found by bisection on the same cost functions, not read from the "
    "grid, and "
    "the checks verify that every cell lies on the side of the break-even that a direct evaluation puts "
    "it.\n\n"
    "Sources: reference/serving.md §2 (SGLang MambaRadixCache, vLLM align mode and retention, llama.cpp "
    "checkpoints), §3 (snapshots and ReplaySSM), §4 (migration and PD), §5 (SGLang Model Gateway "
    "cache_aware, "
    "Dynamo, llm-d), §7 (state sizes); reference/kda.md §4 (context parallelism), §5 (state per sequence), "
    "§6 "
    "(records); Kimi Linear tech report, arXiv 2510.26692; Marconi, arXiv 2411.19379.";

const char* kWhereItDoesNotPay =
    "This module's own limits:\n\n"
    "- Every time is a roofline estimate from datasheet peaks at assumed efficiencies (50 % of compute, 80 % "
    "of "
    "bandwidth), not a measurement. Kernels that reach less of the peak, launch overheads, or communication "
    "that "
    "overlaps compute move every line.\n"
    "- Memory rent prices memory at what the device costs, spread evenly over its bytes. An engine with "
    "spare "
    "memory pays no rent; one that is short of it pays more, in preempted requests.\n"
    "- Map 1 takes reuse as one probability within a fixed residence; real reuse follows the workload. Map 2 "
    "replays one small synthetic workload with unbounded capacity: other workloads, capacities and retention "
    "policies (module 5) move its optimum.\n"
    "- Map 3 compares module 7's replay on commit with vLLM-style snapshots restored by an index move. A "
    "ReplaySSM "
    "ring (module 8) reads the state once per several steps and SGLang copies the accepted snapshot; both "
    "favour "
    "replay further.\n"
    "- Map 4 costs contiguous slices without zig-zag balancing of causal attention, no overlap of "
    "communication "
    "with compute, and links at line rate without latency. Map 5 likewise ignores latency and protocol "
    "overhead and "
    "assumes the destination has spare compute for the recompute.\n"
    "- Map 6 is a small synthetic simulation: about a thousand single-turn requests with short outputs per "
    "run, "
    "two GPUs per instance. Its cells carry several percent of noise from the order in which requests happen "
    "to "
    "meet, so a contour near 1 means no clear difference; module 11 runs longer and richer workloads.";

class BoundariesRun : public StagedRun {
  public:
    explicit BoundariesRun(const Params& p) : StagedRun("boundaries", p), p_(p) {
        in_.model = *model_preset(p.str("preset"));
        in_.hardware = *hardware_preset(p.str("hardware"));
        in_.residence_s = p.num("residence_s");
        in_.context = p.num("context");
        in_.batch = p.num("batch");
        in_.link = *link_preset(p.str("link"));
        in_.cp_link = *link_preset(p.str("cp_link"));
        in_.dest_checkpoint = p.flag("dest_checkpoint");
        in_.checkpoint_distance = p.num("checkpoint_distance");
        in_.resolution = p.i("resolution");
        add_step("map 1: prefix caching", 0.5, [this] { verdicts_.push_back(prefix_map(report_, in_)); });
        add_step("map 2: making the workload", 0.2, [this] { plan_intervals(); });
        add_stage("map 2: replaying it at each checkpoint interval", 3,
                  [this](const Deadline& d) { return intervals_.step(*workload_, d); });
        add_step("map 2: checkpoint interval", 0.2, [this] {
            verdicts_.push_back(interval_map(report_, in_, *workload_, intervals_.results()));
        });
        add_step("map 3: projection replay", 0.5, [this] { verdicts_.push_back(replay_map(report_, in_)); });
        add_step("map 4: context parallelism", 0.5, [this] { verdicts_.push_back(cp_map(report_, in_)); });
        add_step("map 5: migration", 0.5, [this] { verdicts_.push_back(migration_map(report_, in_)); });
        add_step("map 6: planning the fleet runs", 0.1, [this] { plan_fleet(); });
        add_stage("map 6: fleet runs, affinity vs least loaded", 6,
                  [this](const Deadline& d) { return sweep_->step(d); });
        add_step("map 6: affinity", 0.2, [this] { verdicts_.push_back(affinity_map(report_, *sweep_)); });
        add_step("verdict", 0.1, [this] { finish(); });
    }

  private:
    void plan_intervals();
    void plan_fleet();
    void finish();

    Params p_;
    BoundaryInputs in_;
    std::shared_ptr<const Workload> workload_;
    ReplayQueue intervals_;
    std::unique_ptr<boundaries::AffinitySweep> sweep_;
    std::vector<Verdict> verdicts_;
};

// Map 2's workload: module 5's synthetic mix (chats, agent trees, shared system prompts), replayed at
// every interval from 64 to 16,384 tokens (hardly any of its requests is longer).
void BoundariesRun::plan_intervals() {
    WorkloadSpec ws;
    ws.sessions = kIntervalSessions;
    ws.seed = uint64_t(p_.integer("seed"));
    workload_ = std::make_shared<const Workload>(synthetic_workload(ws));
    const MemoryAccount a = account_memory(in_.model);
    ReplayConfig rc;
    rc.policy.kind = PolicyKind::interval;
    rc.state_bytes = a.state_bytes;
    rc.kv_bytes_per_token = a.kv_bytes_per_token;
    for (uint32_t I = 64; I <= 16384; I *= 2) {
        rc.policy.interval = I;
        intervals_.add(std::to_string(I), double(I), rc);
    }
}

void BoundariesRun::plan_fleet() {
    boundaries::AffinitySweepConfig c;
    c.fleet.model = in_.model;
    c.fleet.hardware = in_.hardware;
    c.fleet.instances = uint32_t(p_.i("instances"));
    c.fleet.cache.state_capacity = uint64_t(p_.integer("state_capacity"));
    c.fleet.seed = uint64_t(p_.integer("seed"));
    c.affinity = *parse_router(p_.str("affinity"));
    const int g = p_.i("fleet_grid");
    c.reuse = boundaries::linear_axis(0, 1, g);
    c.load = boundaries::linear_axis(0.25, 1.25, g);
    c.workload.requests = uint32_t(p_.i("fleet_requests"));
    c.workload.prefixes = 32;
    c.workload.seed = uint64_t(p_.integer("seed"));
    sweep_ = std::make_unique<boundaries::AffinitySweep>(c);
}

void BoundariesRun::finish() {
    Report& r = report_;
    verdict_table(r, verdicts_);
    const Hardware& hw = in_.hardware;
    r.notes.push_back("Every time is a roofline ESTIMATE for " + in_.model.name + " on " + hw.name + " (" +
                      hw.source +
                      ") at 50 % of peak compute and 80 % of peak bandwidth, not a measurement. Memory "
                      "rent is bytes x seconds / " +
                      format_bytes(hw.mem_bytes) + " of device memory, in GPU-seconds.");
    r.notes.push_back(
        "Maps 2 and 6 come from simulations of small synthetic workloads (module 5's replay, module 11's "
        "fleet simulator); the others are computed from formulas of the core. Break-evens in the "
        "verdict are found by bisection on the same cost functions, not read from the grid.");
}

}  // namespace

Experiment make_boundaries_experiment() {
    Experiment e;
    e.number = 14;
    e.id = "boundaries";
    e.title = "Where each method stops paying";
    e.component = "opposition";
    e.purpose =
        "Break-even maps for prefix caching, checkpoint intervals, projection replay, context parallelism, "
        "migration and affinity routing, computed with the code of the modules they judge, and a verdict "
        "on when to use each.";
    e.how_it_works = kHowItWorks;
    e.where_it_does_not_pay = kWhereItDoesNotPay;
    e.params = boundaries_params();
    e.validate = validate_boundaries;
    e.live = false;
    e.headlines = {
        {"Shortest prefix worth caching with a state checkpoint (Kimi Linear, H100, held 30 s; estimate)",
         {{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}},
         "prefix_min_tokens"},
        {"Context parallelism over 8 ranks pays from this many tokens per rank (estimate)",
         {{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}},
         "cp_min_tokens_per_rank"},
    };
    e.start = [](const Params& p) { return std::make_unique<BoundariesRun>(p); };
    return e;
}

K3_REGISTER_EXPERIMENT(make_boundaries_experiment);

}  // namespace k3
