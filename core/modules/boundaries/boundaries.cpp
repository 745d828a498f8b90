// Module 14 `boundaries`: its parameters, validation and declaration.
#include "core/modules/boundaries/boundaries.h"

#include "core/base/numfmt.h"
#include "core/experiments/module_doc.h"
#include "core/experiments/registry.h"
#include "core/fleet/fleet_config.h"
#include "core/modules/shared/choices.h"
#include "core/modules/shared/engine_params.h"

namespace k3 {

namespace {

void serving_params(ParamList<BoundariesParams>& l) {
    using P = BoundariesParams;
    auto serving = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Serving"); };
    serving(l.real(&P::residence_s, "residence_s", "Residence of a cache entry", "s", 0.1, 3600).log());
    serving(l.integer(&P::context, "context", "Context of a request", "tokens", 256, 1048576).log());
    serving(l.integer(&P::batch, "batch", "Running requests", "requests", 1, 1024).log());
    serving(l.choice(&P::link, "link", "Instance link", link_choices()))
        .describe(
            "Between instances: map 5's read-off (its map sweeps the bandwidth) and map 7's transfers.");
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
        l.integer(&P::state_capacity, "state_capacity", "State capacity per instance", "states", 0, 1e6))
        .active_when("engine", "ideal");
    fleet_map(l.integer(&P::fleet_requests, "fleet_requests", "Requests per run", "requests", 40, 2000).log())
        .describe(
            "Requests of each fleet run of maps 6-9; a cell is up to two runs (without, with the method).");
    fleet_map(l.integer(&P::fleet_grid, "fleet_grid", "Fleet map cells per axis", "cells", 2, 8))
        .describe("Cells per axis of the fleet maps 6-9 (map 7's x axis: as many splits of the instances).");
    fleet_map(l.choice(
        &P::affinity, "affinity", "Affinity router",
        Choices<RouterKind>{{RouterKind::prefix, "prefix", "prefix affinity (oracle: true trees, zero lag)"},
                            {RouterKind::state_aware, "state_aware", "state-aware affinity"}}));
    fleet_map(l.integer(&P::seed, "seed", "Seed", "", 0, 1e9))
        .describe("Seeds the synthetic workloads of maps 2 and 6.");
}

// Maps 7-9's own: the service levels, the host tier (module 11's parameters), the speculation.
void serving_map_params(ParamList<BoundariesParams>& l) {
    using P = BoundariesParams;
    auto serving = [](ParamSpec& s) -> ParamSpec& { return s.in_group("Serving maps"); };
    serving(l.real(&P::slo_ttft_ms, "slo_ttft_ms", "Map 7: TTFT service level", "ms", 1, 1e6).log())
        .describe("A request meets the levels when its TTFT and its TPOT are within them.");
    serving(l.real(&P::slo_tpot_ms, "slo_tpot_ms", "Map 7: TPOT service level", "ms", 0.1, 1e4).log())
        .describe("The TPOT level of map 7 (slo_ttft_ms).");
    // Module 11's choices but off: map 9 compares speculation with none.
    Choices<SpecState> scratch =
        choices_from<SpecState>(spec_state_ids(), spec_state_labels(), parse_spec_state);
    std::erase_if(scratch, [](const Choice<SpecState>& c) { return c.value == SpecState::off; });
    serving(l.choice(&P::spec_state, "spec_state", "Map 9: state scratch", scratch))
        .describe("What each running request holds for its drafts' states (module 11's spec_state).");
    serving(l.integer(&P::draft_len, "draft_len", "Map 9: draft tokens", "tokens", 1, 16))
        .describe("Draft tokens per verify; the x axis runs from acceptance length 1 to 1 + draft_len.");
    l.group(&P::host, fleet_host_params);  // map 8's tier: module 11's parameters (UI group "Host tier")
}

// The engine parameters modules 5 and 11-13 declare (core/modules/shared/engine_params.h).
void engine_params(ParamList<BoundariesParams>& l) {
    using P = BoundariesParams;
    engine_param_specs(l,
                       EngineParamFields<P>{&P::engine, &P::sglang_mode, &P::chunked_prefill_tokens,
                                            &P::vllm_block_tokens, &P::retention_interval},
                       doc_help_in_group("boundaries", "Engine"));
}

using Kv = std::vector<std::pair<std::string, std::string>>;

// Map 2's falsifiers under each engine (on the small maps of the others).
std::vector<Falsifier<BoundariesParams>> engine_falsifiers(Kv small) {
    using F = BoundariesFalsify;
    auto set = [](F f) { return [f](BoundariesParams& p) { p.falsify = f; }; };
    auto with = [&small](const char* engine) {
        Kv kv = small;
        kv.push_back({"engine", engine});
        return kv;
    };
    return {
        {"engine_run_slips_sglang",
         "engine=sglang: one run of map 2 never frees a request's mamba slot",
         {"map2_engine_invariants"},
         set(F::engine_run_slips),
         with("sglang")},
        {"engine_run_slips_vllm",
         "engine=vllm: one run of map 2 never releases its first request's blocks",
         {"map2_engine_invariants"},
         set(F::engine_run_slips),
         with("vllm")},
        {"engine_run_halved_sglang",
         "engine=sglang: one run of map 2 is replayed at half the chunked prefill it is plotted at",
         {"map2_engine_follows_setting"},
         set(F::engine_run_halved),
         with("sglang")},
        {"engine_run_halved_vllm",
         "engine=vllm: one run of map 2 is replayed at half the block it is plotted at",
         {"map2_engine_follows_setting"},
         set(F::engine_run_halved),
         with("vllm")},
    };
}

// Maps 7-9's: a column run at another value than it is plotted at, bytes unaccounted in one run.
std::vector<Falsifier<BoundariesParams>> serving_falsifiers(const Kv& small) {
    using F = ServingMapFalsify;
    auto set = [](F f) { return [f](BoundariesParams& p) { p.serving_falsify = f; }; };
    return {
        {"pd_column_shifted",
         "map 7's middle column runs with another number of prefill instances than it is plotted at",
         {"map7_cells_as_plotted"},
         set(F::pd_column_shifted),
         small},
        {"pd_record_drops",
         "one disaggregated run of map 7 records its transfers without the state's bytes",
         {"map7_fleet_runs_clean"},
         set(F::pd_record_drops),
         small},
        {"host_write_unlogged",
         "one run of map 8 loses a write to its host tier without logging it",
         {"map8_fleet_runs_clean"},
         set(F::host_write_unlogged),
         small},
        {"host_cell_without",
         "map 8's middle cell runs without the host tier it is plotted with",
         {"map8_cells_as_plotted"},
         set(F::host_cell_without),
         small},
        {"spec_accepts_all",
         "one speculative run of map 9 keeps every draft, whatever its acceptance length",
         {"map9_fleet_runs_clean", "map9_cells_as_plotted"},
         set(F::spec_accepts_all),
         small},
        {"spec_column_shifted",
         "map 9's middle column verifies at another acceptance length than it is plotted at",
         {"map9_cells_as_plotted"},
         set(F::spec_column_shifted),
         small},
    };
}

// Every falsifier runs on small maps and fleet runs (the audit stays cheap), with a destination
// checkpoint so that map 5's cells and their recount compare moving only the KV too.
std::vector<Falsifier<BoundariesParams>> boundaries_falsifiers() {
    using F = BoundariesFalsify;
    auto set = [](F f) { return [f](BoundariesParams& p) { p.falsify = f; }; };
    const Kv small = {
        {"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}, {"dest_checkpoint", "1"}};
    auto with = [](Kv kv, std::pair<std::string, std::string> more) {
        kv.push_back(std::move(more));
        return kv;
    };
    std::vector<Falsifier<BoundariesParams>> all = {
        {"prefix_cell",
         "one cell of map 1 is priced without its checkpoint",
         {"map1_cells_match_entry_ledger"},
         set(F::prefix_cell),
         small},
        {"interval_replays_swapped",
         "the replays of the two finest checkpoint intervals get each other's totals",
         {"map2_finer_interval_nested"},
         set(F::interval_replays_swapped),
         small},
        {"replay_row_records",
         "one acceptance row of map 3 counts core-only records instead of minimal exact ones",
         {"map3_cells_match_verification_ledger"},
         set(F::replay_row_records),
         small},
        {"module7_record_size",
         "module 7's storage is counted with core-only records (the wrong record size)",
         {"map3_module7_storage"},
         set(F::module7_record_size),
         small},
        {"recoverssm_row_window",
         "one acceptance row of map 3 sizes RecoverSSM's pages and records for one draft token more than the "
         "row's",
         {"map3_cells_match_verification_ledger"},
         set(F::recoverssm_row_window),
         with(small, {"variant", "recoverssm"})},
        {"recoverssm_k3_window",
         "Kimi-K3's RecoverSSM storage is sized for 8 draft tokens instead of 7",
         {"map3_recoverssm_storage"},
         set(F::recoverssm_k3_window),
         small},
        {"cp_link",
         "map 4's exchanges are costed over a link twice as fast as the chosen one",
         {"map4_cells_match_ledger"},
         set(F::cp_link),
         small},
        {"migration_row_bandwidth",
         "one bandwidth row of map 5 moves the request at twice that bandwidth",
         {"map5_cells_match_ledger"},
         set(F::migration_row_bandwidth),
         small},
        {"move_kv_link",
         "move_kv's break-even distance is searched over a link twice as fast as the instance link",
         {"map5_move_kv_break_even_closed_form"},
         set(F::move_kv_link),
         small},
        {"fleet_record_dropped",
         "one request's completion record of one fleet run is dropped",
         {"map6_fleet_runs_clean"},
         set(F::fleet_record_dropped),
         small},
        {"affinity_misroute",
         "one request of a reuse-0 affinity run is recorded on another instance",
         {"map6_no_reuse_routes_as_least_loaded"},
         set(F::affinity_misroute),
         small},
    };
    for (Falsifier<BoundariesParams>& f : engine_falsifiers(small)) all.push_back(std::move(f));
    for (Falsifier<BoundariesParams>& f : serving_falsifiers(small)) all.push_back(std::move(f));
    return all;
}

void validate_engine(const BoundariesParams& p, Issues& issues) {
    const std::optional<VllmRetention> r = parse_vllm_retention(p.retention_interval);
    if (!r)
        issues.error(p.retention_interval,
                     "retention_interval '" + p.retention_interval + "' is not a token count, 0 or dense");
    if (p.engine == CacheEngine::sglang) {
        const std::string refused = sglang_config_error(boundaries_sglang(p));
        if (!refused.empty()) issues.error(p.sglang_mode, refused);
    }
    if (p.engine != CacheEngine::vllm) return;
    if (p.vllm_block_tokens && p.vllm_block_tokens < 16)
        issues.error(p.vllm_block_tokens, "vllm_block_tokens: vLLM's smallest block is 16 tokens");
    std::string error;
    boundaries_vllm(p, &error);
    if (!error.empty())
        issues.error(p.vllm_block_tokens, "vLLM's block cannot be derived for this model: " + error);
}

// Map 8 compares a host tier with none; maps 7-9 run module 11's fleet, which must accept them.
void validate_serving_maps(const BoundariesParams& p, Issues& issues) {
    if (!(p.host.host_tier_gib > 0)) {
        issues.error(p.host.host_tier_gib,
                     "map 8 compares a host tier with none: host_tier_gib must be above 0");
        return;
    }
    if (fleet_map_gpus(*model_preset(p.preset), p.hardware) == 0) return;  // refused above
    ServingMapInputs in = serving_map_inputs(p);
    in.fleet.host = in.host;
    validate_host_tier(p.host, in.fleet, issues);
    in.fleet.host = {};
    in.fleet.spec_state = p.spec_state;
    in.fleet.draft_len = p.draft_len;
    in.fleet.acceptance_len = 1;
    if (std::string e = check_fleet_config(in.fleet); !e.empty()) issues.error(p.spec_state, "map 9: " + e);
}

}  // namespace

ParamList<BoundariesParams> boundaries_params() {
    using P = BoundariesParams;
    ParamList<P> l;
    l.choice(
         &P::preset, "preset", "Model",
         preset_choices({ModelPreset::kimi_linear_48b, ModelPreset::kimi_k3, ModelPreset::qwen3_next_80b}))
        .in_group("Model and hardware")
        .describe(
            "Published configuration: state and KV bytes (module 2) and parameter counts for the roofline.");
    l.choice(&P::hardware, "hardware", "GPU", hardware_choices()).in_group("Model and hardware");
    serving_params(l);
    l.integer(&P::resolution, "resolution", "Map resolution", "cells", 6, 40)
        .in_group("Maps")
        .describe("Cells per axis of the computed maps (1, 4 and 5; the acceptance axis of map 3).");
    l.choice(&P::variant, "variant", "Map 3: replay records",
             Choices<spec::RecordVariant>{
                 {spec::RecordVariant::minimal_exact, "minimal_exact", "minimal exact records (module 7)"},
                 {spec::RecordVariant::recoverssm, "recoverssm", "RecoverSSM as vLLM runs it (Kimi-K3)"}})
        .in_group("Maps");
    l.flag(&P::prefix_caching, "prefix_caching", "Map 3: vLLM prefix caching (align mode)")
        .in_group("Maps")
        .active_when("variant", "recoverssm")
        .describe(
            "RecoverSSM's pages: align mode holds 2 + N snapshot pages against 2, none 1 + N against 1.");
    fleet_map_params(l);
    serving_map_params(l);
    engine_params(l);
    return l;
}

void validate_boundaries(const BoundariesParams& p, Issues& issues) {
    if (p.variant == spec::RecordVariant::recoverssm && model_preset(p.preset)->linear_name != "KDA")
        issues.error(p.variant,
                     "RecoverSSM records KDA's delta-rule corrections and gates; this model's "
                     "linear layers are " +
                         model_preset(p.preset)->linear_name);
    if (fleet_map_gpus(*model_preset(p.preset), p.hardware) == 0) {
        FleetConfig f;  // module 11's instance with the most GPUs a fleet instance may have
        f.model = *model_preset(p.preset);
        f.hardware = p.hardware;
        f.gpus = kFleetMapMaxGpus;
        const MemoryPlan m = memory_plan(f);
        issues.error(p.hardware, "the fleet map's instances (at most " + std::to_string(kFleetMapMaxGpus) +
                                     " x " + p.hardware.name + ", " + format_bytes(m.device) +
                                     ") cannot hold the weights (" + format_bytes(m.weights) +
                                     ") and working memory (" + format_bytes(m.working) +
                                     "): pick a GPU with more memory");
    }
    validate_engine(p, issues);
    validate_serving_maps(p, issues);
}

// Measured on the development machine (k3cli run boundaries over fleet_grid 2 to 8, fleet_requests
// 40 to 2000, each engine, SGLang's chunk 64 to 8192), CPU time: the closed-form maps and the report
// about 0.1 s; maps 6-9 13 to 21 us per request simulated at 4 instances, 38 to 62 us at 16 (the
// routers look at every instance); map 2 under SGLang 292 / chunk + 39,700 / chunk^2 s (a tracked
// state per chunk end on the conversation trace), under vLLM about 2.5 s (its block-grid replays), under
// the idealised placement about 0.2 s. x1.5 margin.
RunEstimate estimate_boundaries(const BoundariesParams& p) {
    const double g = p.fleet_grid, n = p.fleet_requests;
    const double affinity = 2 * g * g * n;
    // Map 7: a colocated run per load and one per split; map 8: two per cell; map 9: one per cell and a
    // run without speculation per load.
    const double splits = std::min<double>(g, p.instances - 1);
    const double serving = (g + splits * g) * n + 2 * g * g * n + (g + g * g) * n;
    // Routing looks at every instance: a simulated request costs about 6 us + 3.6 us per instance
    // (20 us at 4 instances, 62 at 16), with 10 % more here.
    const double per_request_s = 6.6e-6 + 4e-6 * double(p.instances);
    const double fleet_s = (affinity + serving) * per_request_s, chunk = double(p.chunked_prefill_tokens);
    const double replay_s = p.engine == CacheEngine::sglang ? 292.0 / chunk + 39700.0 / (chunk * chunk)
                            : p.engine == CacheEngine::vllm ? 2.5
                                                            : 0.2;
    RunEstimate e;
    e.seconds = 1.5 * (0.1 + fleet_s + replay_s);
    e.bytes = 32.0 * 1024 * 1024 + (affinity + serving) * 400.0 + replay_s * 8.0 * 1024 * 1024;
    e.counted = format_grouped(affinity + serving) +
                " requests simulated by maps 6-9, map 2's replays about " + format_sig(replay_s, 2) + " s";
    if (p.engine == CacheEngine::sglang && replay_s > fleet_s) {
        e.on = &p.chunked_prefill_tokens;
        e.larger_is_cheaper = true;
    } else {
        e.on = &p.fleet_requests;
    }
    return e;
}

Experiment make_boundaries_experiment() {
    return make_experiment(Module<BoundariesParams>{
        .number = 14,
        .id = "boundaries",
        .title = "Where each method stops paying",
        .component = "opposition",
        .purpose = "Break-even maps for prefix caching, checkpoint intervals, projection replay, context "
                   "parallelism, migration, affinity routing, prefill/decode disaggregation, a host cache "
                   "tier and speculative decoding, computed with the code of the modules they judge, and a "
                   "verdict on when to use each.",
        .params = boundaries_params(),
        .validate = validate_boundaries,
        .estimate = estimate_boundaries,
        .start = start_boundaries,
        .live = false,
        .headlines =
            {
                {"Shortest prefix worth caching with a state checkpoint (Kimi Linear, H100, held 30 s; "
                 "estimate)",
                 {{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}},
                 "prefix_min_tokens"},
                {"Context parallelism over 8 ranks pays from this many tokens per rank (estimate)",
                 {{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}},
                 "cp_min_tokens_per_rank"},
            },
        .falsifiers = boundaries_falsifiers(),
        // Map 3 with RecoverSSM at Kimi-K3's dimensions.
        .audit_params = {{{"resolution", "6"},
                          {"fleet_grid", "2"},
                          {"fleet_requests", "40"},
                          {"preset", "kimi-k3"},
                          {"hardware", "gb300"},
                          {"variant", "recoverssm"}}}});
}

K3_REGISTER_EXPERIMENT(make_boundaries_experiment);

}  // namespace k3
