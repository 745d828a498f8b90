// Module 3 `pool`: the three designs side by side as figures, plots over the run, tables, pool maps
// and notes (its checks are in pool_checks.cpp).
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/modules/pool/pool.h"

namespace k3 {

std::string pool_design_label(PoolDesign d) {
    switch (d) {
        case PoolDesign::static_split: return "static split";
        case PoolDesign::hybrid_pages: return "vLLM one page size";
        case PoolDesign::unified: return "unified pool";
    }
    return "?";
}

namespace {

// A time mean over the run's steps.
double per_step(double sum, uint64_t steps) { return sum / double(std::max<uint64_t>(1, steps)); }

// ---- figures ----

// Every figure of one design is keyed <figure>_<design id> (pool_design_id), built in figure():
//   mean_running_static, mean_running_vllm, mean_running_unified
//   peak_running_static, peak_running_vllm, peak_running_unified
//   utilisation_static, utilisation_vllm, utilisation_unified
//   peak_utilisation_static, peak_utilisation_vllm, peak_utilisation_unified
//   padding_static, padding_vllm, padding_unified
//   unfilled_static, unfilled_vllm, unfilled_unified
//   fragmentation_static, fragmentation_vllm, fragmentation_unified
//   rejections_static, rejections_vllm, rejections_unified
//   refused_with_room_static, refused_with_room_vllm, refused_with_room_unified
//   preemptions_static, preemptions_vllm, preemptions_unified
//   dropped_static, dropped_vllm, dropped_unified
//   makespan_static, makespan_vllm, makespan_unified
//   min_cacheable_prompt_static, min_cacheable_prompt_vllm, min_cacheable_prompt_unified
//   prefix_hit_tokens_static, prefix_hit_tokens_vllm, prefix_hit_tokens_unified
// Help longer than a line is in pool.md under these keys.
void design_scalars(const PoolDesignRun& run, double budget, Report& r) {
    const std::string id = pool_design_id(run.design), label = pool_design_label(run.design);
    auto figure = [&](const char* key, const char* name, const char* unit, double value,
                      bool headline = false) -> Scalar& {
        return r.scalar(key + ("_" + id), name + (": " + label), unit, value, headline);
    };
    const PoolSimResult& s = run.sim;
    figure("mean_running", "Mean running requests", "requests", s.mean_running, true).help =
        "Admitted concurrency averaged over every step of this design's run.";
    figure("peak_running", "Peak running requests", "requests", s.peak_running);
    figure("utilisation", "Mean utilisation", "fraction", per_step(s.sum_data, s.steps) / budget);
    figure("peak_utilisation", "Peak utilisation", "fraction", double(s.peak_data) / budget);
    figure("padding", "Mean padding", "fraction", per_step(s.sum_padding, s.steps) / budget);
    figure("unfilled", "Mean unfilled KV slots", "fraction", per_step(s.sum_unfilled, s.steps) / budget);
    figure("fragmentation", "Fragmentation", "fraction", s.fragmentation());
    figure("rejections", "Admissions refused", "events", s.blocked_steps).help =
        "Times the head of the queue could not be admitted for lack of memory (it waits; FCFS).";
    figure("refused_with_room", "Refused with enough free bytes", "events", s.refused_with_room);
    figure("preemptions", "Preemptions", "events", s.preemptions);
    figure("dropped", "Dropped (never fit)", "requests", s.dropped);
    figure("makespan", "Steps to serve the stream", "steps", double(s.steps));
    figure("min_cacheable_prompt", "Smallest prompt with a cache hit", "tokens", run.cache_grid + 1.0,
           run.design == PoolDesign::hybrid_pages);
    figure("prefix_hit_tokens", "Prefix tokens reused", "fraction",
           s.wanted_prefix_tokens ? double(s.reused_tokens) / double(s.wanted_prefix_tokens) : 0);
}

void scalars(const PoolComparison& c, Report& r) {
    for (const PoolDesignRun& run : c.designs) design_scalars(run, double(c.budget), r);
    const HybridBlockPlan& plan = c.plan;
    const uint64_t page = plan.page_bytes_per_layer - plan.state_padding_per_layer;
    r.scalar("vllm_block_tokens", "vLLM attention block (derived)", "tokens", plan.block_tokens, true);
    r.scalar("vllm_kernel_multiple", "vLLM kernel alignment", "tokens", plan.kernel_multiple);
    r.scalar("vllm_state_page_bytes", "vLLM state page per layer (conv window, recurrent, records)", "B",
             double(page));
    r.scalar("vllm_state_page_padded_bytes", "vLLM state page per layer, padded to the block", "B",
             double(plan.page_bytes_per_layer));
    r.scalar("vllm_state_blocks_per_request", "vLLM state blocks a request holds per linear layer", "blocks",
             double(c.state_blocks_per_request))
        .help =
        "2 + N in align mode (prefix caching), 1 + N in none mode; N = 0 speculative blocks with RecoverSSM.";
    const double resident_layer = double(c.state_blocks_per_request) * double(plan.page_bytes_per_layer);
    r.scalar("vllm_state_resident_per_layer_bytes", "vLLM state pages one request holds, per layer", "B",
             resident_layer);
    r.scalar("vllm_state_resident_bytes", "vLLM state pages one request holds, all linear layers", "B",
             resident_layer * double(c.model.linear_layers));
    r.scalar("vllm_state_padding_pct", "vLLM state page padding", "%", plan.state_padding_pct(page)).help =
        "\"Padding mamba page size by x%\": per layer, before padding layers.";
    r.scalar("vllm_padding_layers", "vLLM padding layers", "layers",
             plan.linear_padding_layers + plan.attention_padding_layers);
    const PoolLayout& split = c.of(PoolDesign::static_split).layout;
    r.scalar("static_state_slots", "Static split: state slots", "slots", double(split.max_states));
    r.scalar("static_kv_pages", "Static split: KV pages", "pages", double(split.max_kv_pages));
    r.scalar("state_bytes", "State per sequence", "B", double(c.model.state_bytes()));
    r.scalar("kv_bytes_per_token", "KV per token", "B", double(c.model.kv_bytes_per_token()));
}

// ---- plots ----

void plots(const PoolComparison& c, Report& r) {
    const double budget = double(c.budget);
    for (const PoolDesignRun& run : c.designs) {
        const std::string label = pool_design_label(run.design);
        Series running =
            make_series(label, "Running requests", "step", "running requests", "steps", "requests");
        running.style = SeriesStyle::step;
        Series used = make_series(label, "Utilisation (data bytes / budget)", "step", "utilisation", "steps",
                                  "fraction");
        for (const PoolSample& s : run.sim.samples) {
            running.add(double(s.step), s.running);
            used.add(double(s.step),
                     double(s.kv_running + s.kv_cached + s.state_running + s.state_cached) / budget);
        }
        r.add_series(std::move(running));
        r.add_series(std::move(used));
    }
    for (const PoolDesignRun& run : c.designs) {
        const std::string plot = "Pool bytes over time: " + pool_design_label(run.design);
        const char* names[6] = {
            "KV (running)", "cached KV", "state (running)", "cached state", "padding + unfilled KV slots",
            "free"};
        std::vector<Series> kinds;
        for (const char* name : names)
            kinds.push_back(make_series(name, plot, "step", "bytes", "steps", "B"));
        for (const PoolSample& s : run.sim.samples) {
            const uint64_t y[6] = {
                s.kv_running, s.kv_cached, s.state_running, s.state_cached, s.padding + s.kv_unfilled,
                s.free};
            for (size_t j = 0; j < kinds.size(); ++j) kinds[j].add(double(s.step), double(y[j]));
        }
        for (Series& s : kinds) r.add_series(std::move(s));
    }
}

// ---- tables ----

void layout_table(const PoolComparison& c, Report& r) {
    Table& t = r.add_table(make_table("Layout of each design (same budget)", {{"design", ""},
                                                                              {"KV page", "tokens"},
                                                                              {"KV page bytes", "B"},
                                                                              {"state slot bytes", "B"},
                                                                              {"padding per state", "B"},
                                                                              {"padding per KV page", "B"},
                                                                              {"max KV pages", "pages"},
                                                                              {"max states", "states"},
                                                                              {"unusable", "B"},
                                                                              {"cache grid", "tokens"}}));
    for (const PoolDesignRun& run : c.designs) {
        const PoolLayout& l = run.layout;
        t.add({pool_design_label(run.design), double(l.page_tokens), double(l.kv_page_bytes),
               double(l.state_slot_bytes), double(l.state_padding()), double(l.kv_page_padding()),
               double(l.max_kv_pages), double(l.max_states), double(l.unusable_bytes),
               double(run.cache_grid)});
    }
}

void serving_table(const PoolComparison& c, Report& r) {
    Table& t = r.add_table(make_table("Serving the same stream", {{"design", ""},
                                                                  {"peak running", "requests"},
                                                                  {"mean running", "requests"},
                                                                  {"steps", "steps"},
                                                                  {"mean wait", "steps"},
                                                                  {"mean latency", "steps"},
                                                                  {"refused admissions", "events"},
                                                                  {"refused: no KV page", "events"},
                                                                  {"refused: no state id", "events"},
                                                                  {"refused: no state space", "events"},
                                                                  {"refused with room", "events"},
                                                                  {"free at refusal (mean)", "B"},
                                                                  {"preemptions", "events"},
                                                                  {"dropped", "requests"}}));
    for (const PoolDesignRun& run : c.designs) {
        const PoolSimResult& s = run.sim;
        auto refused = [&](AllocStatus why) { return double(s.blocked_by[size_t(why)]); };
        t.add({pool_design_label(run.design), double(s.peak_running), s.mean_running, double(s.steps),
               s.mean_wait, s.mean_latency, double(s.blocked_steps), refused(AllocStatus::no_kv_page),
               refused(AllocStatus::no_state_id), refused(AllocStatus::no_state_space),
               double(s.refused_with_room),
               s.blocked_steps ? double(s.free_at_block_sum) / s.blocked_steps : 0.0, double(s.preemptions),
               double(s.dropped)});
    }
}

void memory_table(const PoolComparison& c, Report& r) {
    Table& t = r.add_table(make_table("Memory over the run (time means, fractions of the budget)",
                                      {{"design", ""},
                                       {"utilisation", "fraction"},
                                       {"peak utilisation", "fraction"},
                                       {"padding", "fraction"},
                                       {"unfilled KV slots", "fraction"},
                                       {"free", "fraction"},
                                       {"fragmentation", "fraction"},
                                       {"compactions", "events"},
                                       {"bytes moved", "B"}}));
    const double budget = double(c.budget);
    for (const PoolDesignRun& run : c.designs) {
        const PoolSimResult& s = run.sim;
        t.add({pool_design_label(run.design), per_step(s.sum_data, s.steps) / budget,
               double(s.peak_data) / budget, per_step(s.sum_padding, s.steps) / budget,
               per_step(s.sum_unfilled, s.steps) / budget, per_step(s.sum_free, s.steps) / budget,
               s.fragmentation(), double(s.compactions), double(s.bytes_moved)});
    }
}

void phase_table(const PoolComparison& c, Report& r) {
    Table& t = r.add_table(make_table(
        "Before and after the mix shift (steps with only pre-shift or only post-shift requests running)",
        {{"design", ""},
         {"phase", ""},
         {"steps", "steps"},
         {"mean running", "requests"},
         {"utilisation", "fraction"},
         {"free", "fraction"},
         {"fragmentation", "fraction"},
         {"refused: no KV page", "events"},
         {"refused: no state id", "events"},
         {"refused: no state space", "events"},
         {"refused with room", "events"}}));
    const double budget = double(c.budget);
    for (const PoolDesignRun& run : c.designs)
        for (int k = 0; k < 2; ++k) {
            const PoolSimResult::Phase& x = run.sim.phases[k];
            auto refused = [&](AllocStatus why) { return double(x.refused_by[size_t(why)]); };
            t.add({pool_design_label(run.design), std::string(k ? "after" : "before"), double(x.steps),
                   per_step(x.running, x.steps), per_step(x.data, x.steps) / budget,
                   per_step(x.free, x.steps) / budget,
                   x.states_ideal > 0 ? 1.0 - x.states_placeable / x.states_ideal : 0.0,
                   refused(AllocStatus::no_kv_page), refused(AllocStatus::no_state_id),
                   refused(AllocStatus::no_state_space), double(x.refused_with_room)});
        }
}

void prefix_table(const PoolComparison& c, Report& r) {
    Table& t =
        r.add_table(make_table("Prefix cache by shared-prefix length", {{"prefix", ""},
                                                                        {"length", "tokens"},
                                                                        {"cacheable: static", "tokens"},
                                                                        {"cacheable: vLLM", "tokens"},
                                                                        {"cacheable: unified", "tokens"},
                                                                        {"hits: static", "requests"},
                                                                        {"hits: vLLM", "requests"},
                                                                        {"hits: unified", "requests"}}));
    for (size_t k = 0; k < c.prefix_lengths.size(); ++k) {
        const uint32_t length = c.prefix_lengths[k];
        std::vector<Cell> row = {std::to_string(k), double(length)};
        for (const PoolDesignRun& run : c.designs)
            row.push_back(double(length / run.cache_grid * run.cache_grid));
        for (const PoolDesignRun& run : c.designs) row.push_back(double(run.sim.hits_by_prefix[k]));
        t.add(std::move(row));
    }
}

void tables(const PoolParams& p, const PoolComparison& c, Report& r) {
    layout_table(c, r);
    serving_table(c, r);
    memory_table(c, r);
    if (p.workload.shift_factor != 1.0) phase_table(c, r);
    prefix_table(c, r);
}

// The pool map of every design whose run reached the snapshot step; the bytes per cell (0: none).
uint64_t pool_maps(const PoolComparison& c, Report& r) {
    uint64_t cell_bytes = 0;
    for (const PoolDesignRun& run : c.designs) {
        const PoolSimResult& s = run.sim;
        if (s.snapshot.empty()) continue;
        r.grids.push_back(pool_map_grid(
            s.snapshot, c.budget,
            "Pool map at step " + std::to_string(s.snapshot_step) + ": " + pool_design_title(run.design),
            &cell_bytes));
    }
    return cell_bytes;
}

// ---- notes ----

void notes(const PoolComparison& c, uint64_t cell_bytes, Report& r) {
    const ModelConfig& cfg = c.config;
    const PoolModel& m = c.model;
    const HybridBlockPlan& plan = c.plan;
    r.notes.push_back(cfg.name + ": state " + format_bytes(double(m.state_bytes())) + " per sequence (" +
                      std::to_string(m.linear_layers) + " " + cfg.linear_name + " layers), KV " +
                      format_grouped(double(m.kv_bytes_per_token())) + " B per token (" +
                      std::to_string(m.attention_layers) + " attention layers); budget " +
                      format_bytes(double(c.budget)) + " per design.");
    const std::string padding_layers =
        plan.linear_padding_layers
            ? " with " + std::to_string(plan.linear_padding_layers) + " padding layer(s)"
            : std::string();
    r.notes.push_back(
        "vLLM: \"Setting attention block size to " + std::to_string(plan.block_tokens) + " tokens\" (" +
        std::to_string(plan.raw_tokens) + " rounded up to a multiple of " +
        std::to_string(plan.kernel_multiple) + "), \"Padding mamba page size by " +
        format_sig(plan.state_padding_pct(plan.page_bytes_per_layer - plan.state_padding_per_layer), 3) +
        "%\"; layer groups of " + std::to_string(plan.group_size) + ": " +
        std::to_string(plan.linear_groups) + " blocks per state" + padding_layers + ", " +
        std::to_string(plan.attention_groups) + " per KV page.");
    if (cell_bytes)
        r.notes.push_back("Pool maps are downsampled: one cell per " + format_bytes(double(cell_bytes)) +
                          " of pool order (" + std::to_string(kPoolMapCells) +
                          " cells); a cell shows the kind holding most of its bytes and the owner holding "
                          "most. vLLM maps list blocks in block order (a block's bytes sit at one index of "
                          "each per-layer tensor).");
    r.notes.push_back(
        "Time is simulated in scheduler steps (one decode token per running request per step); prefill and "
        "recompute after preemption take no extra steps. Admission is FCFS and all-or-nothing; preemption "
        "frees the most recently admitted request (vLLM's recompute).");
    r.notes.push_back(
        "Fragmentation here: of the new states the free bytes could hold if they were one run usable by "
        "anything, the share that cannot be placed without moving or evicting data (summed over steps). A "
        "static split's free KV pages, the unified pool's holes and short gap, and vLLM's padded blocks all "
        "count; free bytes too few for one state do not.");
    r.notes.push_back(
        "Not modelled: SGLang's cap of running requests at state slots / 3 (5 with extra_buffer) on top of "
        "the static split, so its figures here are an upper bound; the unified pool's compaction freeze "
        "during PD transfers (#33362); per-step state copies of vLLM's align mode.");
    std::string strides;
    for (const PoolDesignRun& run : c.designs)
        strides += (strides.empty() ? "" : "/") + std::to_string(run.sim.sample_stride);
    r.notes.push_back("Series are sampled every " + strides +
                      " steps (static/vLLM/unified); time means use every step.");
}

}  // namespace

void report_pool(const PoolParams& p, const PoolComparison& c, Report& r) {
    if (!pool_built_checks(c, r)) return;
    scalars(c, r);
    plots(c, r);
    tables(p, c, r);
    const uint64_t cell_bytes = pool_maps(c, r);
    pool_checks(p, c, r);
    notes(c, cell_bytes, r);
}

}  // namespace k3
