// Module 14 `boundaries`: its parameters, validation and declaration.
#include "core/modules/boundaries/boundaries.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/fleet/fleet_config.h"
#include "core/modules/shared/choices.h"

namespace k3 {

namespace {

void serving_params(ParamList<BoundariesParams>& l) {
    using P = BoundariesParams;
    auto serving = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Serving"); };
    serving(l.real(&P::residence_s, "residence_s", "Residence of a cache entry", "s", 0.1, 3600).log());
    serving(l.integer(&P::context, "context", "Context of a request", "tokens", 256, 1048576).log());
    serving(l.integer(&P::batch, "batch", "Running requests", "requests", 1, 1024).log());
    serving(l.choice(&P::link, "link", "Instance link", link_choices()))
        .describe("Between instances, for the migration read-off (map 5 sweeps the bandwidth itself).");
    serving(l.choice(&P::cp_link, "cp_link", "Link between CP ranks", link_choices()))
        .describe(
            "Carries the affine scan's maps and the attention KV between context-parallel ranks (map 4).");
    serving(l.flag(&P::dest_checkpoint, "dest_checkpoint", "Destination holds a checkpoint"));
    serving(
        l.integer(&P::checkpoint_distance, "checkpoint_distance", "Checkpoint distance", "tokens", 0, 65536))
        .active_when("dest_checkpoint", "1");
}

void fleet_map_params(ParamList<BoundariesParams>& l) {
    using P = BoundariesParams;
    auto fleet_map = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Fleet map"); };
    fleet_map(l.integer(&P::instances, "instances", "Instances", "", 2, 16))
        .describe("Serving instances of the fleet runs (2 GPUs each, as in module 11).");
    fleet_map(
        l.integer(&P::state_capacity, "state_capacity", "State capacity per instance", "states", 0, 1e6));
    fleet_map(l.integer(&P::fleet_requests, "fleet_requests", "Requests per run", "requests", 40, 2000).log())
        .describe("Requests of each fleet run; every cell is two runs (least loaded, affinity).");
    fleet_map(l.integer(&P::fleet_grid, "fleet_grid", "Fleet map cells per axis", "cells", 2, 8))
        .describe("Reuse shares and loads of the fleet map: cells^2 x 2 simulations.");
    fleet_map(
        l.choice(&P::affinity, "affinity", "Affinity router",
                 Choices<RouterKind>{{RouterKind::prefix, "prefix", "prefix affinity (SGLang cache_aware)"},
                                     {RouterKind::state_aware, "state_aware", "state-aware affinity"}}));
    fleet_map(l.integer(&P::seed, "seed", "Seed", "", 0, 1e9))
        .describe("Seeds the synthetic workloads of maps 2 and 6.");
}

}  // namespace

ParamList<BoundariesParams> boundaries_params() {
    using P = BoundariesParams;
    ParamList<P> l;
    l.choice(&P::preset, "preset", "Model",
             preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::qwen3_next_80b}))
        .in_group("Model and hardware")
        .describe(
            "Published configuration: state and KV bytes (module 2) and parameter counts for the roofline.");
    l.choice(&P::hardware, "hardware", "GPU", hardware_choices()).in_group("Model and hardware");
    serving_params(l);
    l.integer(&P::resolution, "resolution", "Map resolution", "cells", 6, 40)
        .in_group("Maps")
        .describe("Cells per axis of the computed maps (1, 4 and 5; the acceptance axis of map 3).");
    fleet_map_params(l);
    return l;
}

void validate_boundaries(const BoundariesParams& p, Issues& issues) {
    FleetConfig f;  // the fleet map's instances: module 11's defaults but for the model and GPU
    f.model = *model_preset(p.preset);
    f.hardware = p.hardware;
    const MemoryPlan m = memory_plan(f);
    if (m.weights + m.working > m.device)
        issues.warning(p.preset,
                       "the fleet map's instances of " + std::to_string(f.gpus) + " x " + f.hardware.name +
                           " cannot hold the weights (" + format_bytes(m.weights) + ") and working memory (" +
                           format_bytes(m.working) + "); its times are roofline estimates regardless");
    const double runs = 2.0 * p.fleet_grid * p.fleet_grid * p.fleet_requests;
    if (runs > 2.0 * 5 * 5 * 2000)
        issues.error(p.fleet_requests,
                     "the fleet map would simulate " + format_grouped(runs) +
                         " requests; the page's limit is 100,000: lower the requests or the cells");
}

Experiment make_boundaries_experiment() {
    return make_experiment(Module<BoundariesParams>{
        .number = 14,
        .id = "boundaries",
        .title = "Where each method stops paying",
        .component = "opposition",
        .purpose = "Break-even maps for prefix caching, checkpoint intervals, projection replay, context "
                   "parallelism, migration and affinity routing, computed with the code of the modules they "
                   "judge, and a verdict on when to use each.",
        .params = boundaries_params(),
        .validate = validate_boundaries,
        .start = start_boundaries,
        .live = false,
        .headlines = {
            {"Shortest prefix worth caching with a state checkpoint (Kimi Linear, H100, held 30 s; estimate)",
             {{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}},
             "prefix_min_tokens"},
            {"Context parallelism over 8 ranks pays from this many tokens per rank (estimate)",
             {{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}},
             "cp_min_tokens_per_rank"},
        }});
}

K3_REGISTER_EXPERIMENT(make_boundaries_experiment);

}  // namespace k3
