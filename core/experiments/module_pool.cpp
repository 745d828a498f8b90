// Module 3 `pool`: one seeded request stream served from three memory designs holding the same
// bytes (core/memory): SGLang's static split, vLLM's one page size, SGLang's unified two-ended pool.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/memory/hybrid_blocks.h"
#include "core/memory/pool.h"
#include "core/memory/pool_sim.h"
#include "core/model/pool_model.h"

namespace k3 {

namespace {

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b", "tiny"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B",
                                                "tiny (runnable)"};
constexpr double kMiB = 1024.0 * 1024.0;
constexpr PoolDesign kDesigns[3] = {PoolDesign::static_split, PoolDesign::hybrid_pages, PoolDesign::unified};
constexpr int kGridCells = 2048, kGridColumns = 64;
// Refused above these: the run must stay well under a second and a few MB of samples.
constexpr double kMaxTokenSteps = 4e6;    // requests x mean output: decode steps summed over requests
constexpr double kMaxArrivalSteps = 2e5;  // requests / arrival rate
constexpr uint64_t kMaxSimPages = 1u << 18;

std::vector<ParamSpec> pool_params() {
    return {
        ParamSpec::choice("preset", "Model", kPresets, "kimi-linear-48b", kPresetLabels)
            .in_group("Model and budget")
            .describe("Sizes of the state slot and of KV per token come from this model's exact accounting "
                      "(module 2)."),
        ParamSpec::real("budget_mib", "Pool budget", "MiB", 16, 65536, 2048)
            .log()
            .in_group("Model and budget")
            .describe("Bytes the three designs share, each the same. Scaled down from a GPU's tens of GiB so "
                      "the run is fast; the ratios between designs do not depend on the scale as long as "
                      "many requests fit."),
        ParamSpec::integer("page_tokens", "KV page (static, unified)", "tokens", 1, 1024, 64)
            .in_group("Designs")
            .describe(
                "SGLang page_size for the static and unified designs (1 with no_buffer, 64 typical with "
                "extra_buffer). The prefix-cache grid is the smallest page multiple >= 64 "
                "(mamba_cache_chunk_size = max(64, page_size)). vLLM derives its own block."),
        ParamSpec::real("state_ratio", "mamba_full_memory_ratio r", "", 0.05, 20, 0.9)
            .log()
            .in_group("Designs")
            .describe(
                "Static split: the state pool gets r / (1 + r) of the budget (SGLang default 0.9: 47 %), "
                "the KV pool the rest."),
        ParamSpec::integer("block_multiple", "vLLM kernel block multiple", "tokens", 1, 1024, 16)
            .in_group("Designs")
            .describe("vLLM rounds the inflated attention block up to a multiple of this (FlashAttention: "
                      "16)."),
        ParamSpec::integer("states_per_request", "State slots per running request", "slots", 1, 4, 1)
            .in_group("Designs")
            .describe("Working state slots a running request holds in every design. 1 here; vLLM's align "
                      "mode keeps 2 + speculative blocks, SGLang's extra_buffer a 2-slot ping-pong buffer "
                      "besides the working slot."),
        ParamSpec::integer("requests", "Requests", "requests", 10, 5000, 300)
            .log()
            .in_group("Workload")
            .describe("Length of the seeded request stream served by each design."),
        ParamSpec::real("arrival_rate", "Arrival rate", "requests/step", 0.001, 100, 0.25)
            .log()
            .in_group("Workload")
            .describe("Poisson arrivals per scheduler step (one step = one decode token for every running "
                      "request)."),
        ParamSpec::integer("prompt_tokens", "Prompt (own part)", "tokens", 1, 131072, 1024)
            .log()
            .in_group("Workload")
            .describe("Mean of the part of each prompt after any shared prefix; uniform in 0.5x to 1.5x."),
        ParamSpec::integer("output_tokens", "Output", "tokens", 1, 16384, 256)
            .log()
            .in_group("Workload")
            .describe("Mean output length; uniform in 0.5x to 1.5x."),
        ParamSpec::real("prefix_share", "Share wanting a cached prefix", "fraction", 0, 1, 0.5)
            .in_group("Workload")
            .describe(
                "Share of requests whose prompt starts with one of the shared prefixes (system prompts, "
                "agent scaffolds)."),
        ParamSpec::integer("prefixes", "Shared prefixes", "prefixes", 1, 64, 6)
            .in_group("Workload")
            .describe("Distinct shared prefixes, lengths spread geometrically between the two bounds below."),
        ParamSpec::integer("prefix_min", "Shortest prefix", "tokens", 1, 131072, 256)
            .log()
            .in_group("Workload")
            .describe("Length of the shortest shared prefix."),
        ParamSpec::integer("prefix_max", "Longest prefix", "tokens", 1, 131072, 4096)
            .log()
            .in_group("Workload")
            .describe("Length of the longest shared prefix (at least the shortest)."),
        ParamSpec::real("shift_at", "Mix shifts after", "fraction", 0, 1, 0.5)
            .in_group("Workload")
            .describe("Share of the stream after which prompts change length (the mix shift)."),
        ParamSpec::real("shift_factor", "Prompt length after the shift", "x", 0.05, 64, 8)
            .log()
            .in_group("Workload")
            .describe(
                "Multiplier on the prompts' own part after the shift; 1 = no shift. Above 1 the mix moves "
                "from state-heavy to KV-heavy, which a fixed split cannot follow."),
        ParamSpec::real("map_at", "Pool map taken at", "fraction", 0, 1, 0.4)
            .in_group("Workload")
            .describe("When the pool maps are recorded, as a share of the arrival period (the same step for "
                      "every design)."),
        ParamSpec::seed("Seed of the request stream (arrivals, prompt and output lengths).")
            .in_group("Workload"),
    };
}

PoolModel model_of(const Params& p) { return pool_model(*model_preset(p.str("preset"))); }

uint32_t cache_grid(uint32_t page) { return page * ((64 + page - 1) / page); }

PoolWorkload workload_of(const Params& p) {
    PoolWorkload w;
    w.seed = uint64_t(p.integer("seed"));
    w.requests = p.i("requests");
    w.arrival_rate = p.num("arrival_rate");
    w.prompt_tokens = p.i("prompt_tokens");
    w.output_tokens = p.i("output_tokens");
    w.prefix_share = p.num("prefix_share");
    w.prefixes = p.i("prefixes");
    w.prefix_min = p.i("prefix_min");
    w.prefix_max = p.i("prefix_max");
    w.shift_at = p.num("shift_at");
    w.shift_factor = p.num("shift_factor");
    return w;
}

std::vector<ParamIssue> validate_pool(const Params& p) {
    std::vector<ParamIssue> out;
    if (p.i("prefix_min") > p.i("prefix_max"))
        out.push_back({ParamIssue::error, "prefix_min",
                       "shortest prefix (" + p.text("prefix_min") + ") exceeds the longest (" +
                           p.text("prefix_max") + ")"});
    const double token_steps = p.num("requests") * p.num("output_tokens");
    if (token_steps > kMaxTokenSteps)
        out.push_back({ParamIssue::error, "output_tokens",
                       "requests x output = " + format_grouped(token_steps) +
                           " decode steps exceeds the limit of " + format_grouped(kMaxTokenSteps) +
                           " (keeps the run under a second)"});
    const double arrival_steps = p.num("requests") / p.num("arrival_rate");
    if (arrival_steps > kMaxArrivalSteps)
        out.push_back({ParamIssue::error, "arrival_rate",
                       "the arrivals span " + format_grouped(arrival_steps) + " steps, over the limit of " +
                           format_grouped(kMaxArrivalSteps) + ": raise the rate or lower the request count"});
    const PoolModel m = model_of(p);
    const uint64_t budget = uint64_t(p.num("budget_mib") * kMiB);
    const uint64_t page_bytes = uint64_t(p.i("page_tokens")) * m.kv_bytes_per_token();
    if (budget / page_bytes > kMaxSimPages)
        out.push_back({ParamIssue::error, "page_tokens",
                       format_grouped(double(budget / page_bytes)) + " pages of " + p.text("page_tokens") +
                           " tokens exceed the limit of " + format_grouped(double(kMaxSimPages)) +
                           ": raise page_tokens or lower the budget"});
    // Every design must hold one request's state slots and a KV page, or nothing is ever admitted.
    const uint64_t spr = uint64_t(p.i("states_per_request")), S = m.state_bytes();
    const double r = p.num("state_ratio");
    const uint64_t static_slots = uint64_t(double(budget) * r / (1.0 + r)) / S;
    HybridBlockPlan plan;
    const bool planned = plan_hybrid_blocks(m, uint32_t(p.i("block_multiple")), 16, &plan).empty();
    std::string short_of;
    if (static_slots < spr)
        short_of = "the static split's state pool (" + std::to_string(static_slots) + " slots)";
    else if (planned &&
             budget / plan.block_bytes < uint64_t(plan.linear_groups) * spr + uint64_t(plan.attention_groups))
        short_of = "vLLM's blocks (" + std::to_string(budget / plan.block_bytes) + " of " +
                   format_bytes(double(plan.block_bytes)) + ")";
    else if (budget < spr * S + page_bytes)
        short_of = "the unified pool";
    if (!short_of.empty())
        out.push_back({ParamIssue::error, "budget_mib",
                       "a budget of " + format_bytes(double(budget)) + " is too small for " + short_of +
                           " to hold one request's " + std::to_string(spr) + " state slot(s) of " +
                           format_bytes(double(S))});
    return out;
}

// ---- pool map -> grid ----------------------------------------------------------------------------

enum Category {
    c_free,
    c_kv,
    c_unfilled,
    c_state,
    c_cached_kv,
    c_cached_state,
    c_padding,
    c_unusable,
    c_count
};
const std::vector<std::string> kCategories = {
    "free", "KV", "KV (unfilled slots)", "state", "cached KV", "cached state", "padding", "unusable"};

int category_of(const MapUnit& u) {
    const bool cached = is_cache_owner(u.owner);
    switch (u.kind) {
        case UnitKind::free: return c_free;
        case UnitKind::kv: return cached ? c_cached_kv : c_kv;
        case UnitKind::kv_unfilled: return c_unfilled;
        case UnitKind::state: return cached ? c_cached_state : c_state;
        case UnitKind::padding: return c_padding;
        case UnitKind::unusable: return c_unusable;
    }
    return c_free;
}

std::string owner_name(OwnerId o) {
    if (o == kNoOwner) return "";
    if (is_cache_owner(o)) return "prefix " + std::to_string(o - kCacheOwnerBase) + " cache entry";
    return "request " + std::to_string(o - 1);
}

// One cell per `cell_bytes` of the pool (pool order); its category is the kind holding most of its
// bytes, its label the owner holding most.
CellGrid grid_of(const std::vector<MapUnit>& units, uint64_t budget, std::string name,
                 uint64_t* cell_bytes_out) {
    CellGrid g;
    g.name = std::move(name);
    g.columns = kGridColumns;
    g.categories = kCategories;
    const uint64_t cb = std::max<uint64_t>(1, (budget + kGridCells - 1) / kGridCells);
    const size_t n = size_t((budget + cb - 1) / cb);
    *cell_bytes_out = cb;
    std::vector<std::array<uint64_t, c_count>> by_cat(n);
    for (auto& a : by_cat) a.fill(0);
    std::vector<std::vector<std::pair<OwnerId, uint64_t>>> by_owner(n);
    for (const MapUnit& u : units) {
        const int cat = category_of(u);
        for (uint64_t at = u.offset, end = u.offset + u.bytes; at < end;) {
            const size_t c = size_t(at / cb);
            const uint64_t take = std::min(end, (c + 1) * cb) - at;
            by_cat[c][size_t(cat)] += take;
            if (u.owner != kNoOwner) {
                auto& v = by_owner[c];
                if (!v.empty() && v.back().first == u.owner)
                    v.back().second += take;
                else
                    v.push_back({u.owner, take});
            }
            at += take;
        }
    }
    g.cells.resize(n);
    g.cell_labels.resize(n);
    for (size_t c = 0; c < n; ++c) {
        g.cells[c] = int(std::max_element(by_cat[c].begin(), by_cat[c].end()) - by_cat[c].begin());
        std::map<OwnerId, uint64_t> owners;
        for (const auto& [o, b] : by_owner[c]) owners[o] += b;
        OwnerId best = kNoOwner;
        uint64_t best_b = 0;
        for (const auto& [o, b] : owners)
            if (b > best_b) best = o, best_b = b;
        if (best != kNoOwner) {
            g.cell_labels[c] = owner_name(best);
            if (owners.size() > 1) g.cell_labels[c] += " (+" + std::to_string(owners.size() - 1) + " more)";
        }
    }
    return g;
}

// ---- the run -------------------------------------------------------------------------------------

class PoolRun : public StagedRun {
  public:
    explicit PoolRun(const Params& p) : StagedRun("pool", p), p_(p) {
        add_step("request stream", 0.05, [this] { prepare(); });
        for (int d = 0; d < 3; ++d)
            add_stage(std::string("serving: ") + pool_design_title(kDesigns[d]), 0.3,
                      [this, d](const Deadline& dl) { return serve(d, dl); });
        add_step("report", 0.05, [this] { summarise(); });
    }

  private:
    void prepare();
    double serve(int d, const Deadline& dl);
    void summarise();

    Params p_;
    PoolModel model_;
    HybridBlockPlan plan_;
    std::vector<SimRequest> reqs_;
    std::vector<uint32_t> plen_;
    uint64_t budget_ = 0, snapshot_step_ = 0;
    PoolLayout layouts_[3];
    uint32_t grids_[3] = {0, 0, 0};
    PoolSimResult res_[3];
    std::unique_ptr<PagePool> pool_[3];  // alive while its design is being served
    std::unique_ptr<PoolSimulation> sim_[3];
    std::string errors_[3];
};

void PoolRun::prepare() {
    model_ = model_of(p_);
    budget_ = uint64_t(p_.num("budget_mib") * kMiB);
    const PoolWorkload w = workload_of(p_);
    reqs_ = make_request_stream(w);
    plen_ = prefix_lengths(w);
    snapshot_step_ = uint64_t(p_.num("map_at") * double(reqs_.empty() ? 0 : reqs_.back().arrival));
    plan_hybrid_blocks(model_, uint32_t(p_.i("block_multiple")), 16, &plan_);
}

double PoolRun::serve(int d, const Deadline& dl) {
    if (!sim_[d]) {
        const uint32_t page = uint32_t(p_.i("page_tokens"));
        PoolResult made;
        switch (kDesigns[d]) {
            case PoolDesign::static_split:
                made = make_static_pool(model_, {budget_, page, p_.num("state_ratio"), 0});
                break;
            case PoolDesign::hybrid_pages:
                made = make_hybrid_pool(model_, {budget_, uint32_t(p_.i("block_multiple")), 16});
                break;
            case PoolDesign::unified: made = make_unified_pool(model_, {budget_, page, 0, true}); break;
        }
        if (!made.pool) {
            errors_[d] = made.error;
            return 1;
        }
        pool_[d] = std::move(made.pool);
        layouts_[d] = pool_[d]->layout();
        PoolSimOptions o;
        o.cache_grid = kDesigns[d] == PoolDesign::hybrid_pages ? layouts_[d].page_tokens : cache_grid(page);
        grids_[d] = o.cache_grid;
        o.states_per_request = p_.i("states_per_request");
        o.snapshot_step = snapshot_step_;
        sim_[d] = std::make_unique<PoolSimulation>(*pool_[d], reqs_, plen_, o);
    }
    if (!sim_[d]->advance(&dl)) return std::min(0.99, sim_[d]->progress());
    res_[d] = sim_[d]->result();
    sim_[d].reset();
    pool_[d].reset();
    return 1;
}

void PoolRun::summarise() {
    Report& r = report_;
    const ModelConfig cfg = *model_preset(p_.str("preset"));
    const char* short_name[3] = {"static", "vllm", "unified"};
    const char* nice[3] = {"static split", "vLLM one page size", "unified pool"};
    const double B = double(budget_);

    for (int d = 0; d < 3; ++d)
        r.check(std::string("Pool built: ") + nice[d], errors_[d].empty(),
                errors_[d].empty() ? "ok" : errors_[d]);
    for (int d = 0; d < 3; ++d)
        if (!errors_[d].empty()) return;

    // ---- headline scalars ----
    for (int d = 0; d < 3; ++d) {
        const PoolSimResult& s = res_[d];
        const std::string k = short_name[d];
        const double steps = double(std::max<uint64_t>(1, s.steps));
        r.scalar("mean_running_" + k, std::string("Mean running requests: ") + nice[d], "requests",
                 s.mean_running, true)
            .help = "Admitted concurrency averaged over every step of this design's run.";
        r.scalar("peak_running_" + k, std::string("Peak running requests: ") + nice[d], "requests",
                 s.peak_running);
        r.scalar("utilisation_" + k, std::string("Mean utilisation: ") + nice[d], "fraction",
                 s.sum_data / steps / B)
            .help =
            "Bytes holding model data (filled KV token slots and state bytes, running and cached) over the "
            "budget, averaged over steps. Padding, unfilled slots and free bytes are the rest.";
        r.scalar("peak_utilisation_" + k, std::string("Peak utilisation: ") + nice[d], "fraction",
                 double(s.peak_data) / B);
        r.scalar("padding_" + k, std::string("Mean padding: ") + nice[d], "fraction",
                 s.sum_padding / steps / B);
        r.scalar("unfilled_" + k, std::string("Mean unfilled KV slots: ") + nice[d], "fraction",
                 s.sum_unfilled / steps / B);
        r.scalar("fragmentation_" + k, std::string("Fragmentation: ") + nice[d], "fraction",
                 s.fragmentation())
            .help =
            "Of the new states the free bytes could have held (as one run usable by anything), the share "
            "that could not be placed without moving or evicting data, summed over steps: free KV pages "
            "of a static split, holes and a short gap in the unified pool, padding and block rounding "
            "in vLLM's.";
        r.scalar("rejections_" + k, std::string("Admissions refused: ") + nice[d], "events", s.blocked_steps)
            .help = "Times the head of the queue could not be admitted for lack of memory (it waits; FCFS).";
        r.scalar("refused_with_room_" + k, std::string("Refused with enough free bytes: ") + nice[d],
                 "events", s.refused_with_room)
            .help =
            "Refusals while the pool's free bytes covered the request's state and prompt KV: memory "
            "locked to the other kind (static), lost to block rounding and padding (vLLM), or in holes "
            "compaction could not join (unified).";
        r.scalar("preemptions_" + k, std::string("Preemptions: ") + nice[d], "events", s.preemptions);
        r.scalar("dropped_" + k, std::string("Dropped (never fit): ") + nice[d], "requests", s.dropped);
        r.scalar("makespan_" + k, std::string("Steps to serve the stream: ") + nice[d], "steps",
                 double(s.steps));
        r.scalar("min_cacheable_prompt_" + k, std::string("Smallest prompt with a cache hit: ") + nice[d],
                 "tokens", grids_[d] + 1.0, d == 1)
            .help =
            "A hit reuses whole cache-grid units (vLLM: whole blocks) and must leave one prompt token to "
            "compute; a shared prefix shorter than one unit is never reused.";
        r.scalar("prefix_hit_tokens_" + k, std::string("Prefix tokens reused: ") + nice[d], "fraction",
                 s.wanted_prefix_tokens ? double(s.reused_tokens) / double(s.wanted_prefix_tokens) : 0);
    }
    const double pad_pct = plan_.state_padding_pct(model_.state_bytes_per_layer);
    r.scalar("vllm_block_tokens", "vLLM attention block (derived)", "tokens", plan_.block_tokens, true).help =
        "\"Setting attention block size to N tokens\": the smallest multiple of the kernel block size whose "
        "page of one attention layer holds one layer's state.";
    r.scalar("vllm_state_padding_pct", "vLLM state page padding", "%", pad_pct).help =
        "\"Padding mamba page size by x%\": per layer, before padding layers.";
    r.scalar("vllm_padding_layers", "vLLM padding layers", "layers",
             plan_.linear_padding_layers + plan_.attention_padding_layers);
    r.scalar("static_state_slots", "Static split: state slots", "slots", double(layouts_[0].max_states));
    r.scalar("static_kv_pages", "Static split: KV pages", "pages", double(layouts_[0].max_kv_pages));
    r.scalar("state_bytes", "State per sequence", "B", double(model_.state_bytes()));
    r.scalar("kv_bytes_per_token", "KV per token", "B", double(model_.kv_bytes_per_token()));

    // ---- series ----
    for (int d = 0; d < 3; ++d) {
        Series run{nice[d], "step", "running requests", {}, {}, "Running requests"};
        run.x_unit = "steps";
        run.y_unit = "requests";
        run.style = SeriesStyle::step;
        Series util{nice[d], "step", "utilisation", {}, {}, "Utilisation (data bytes / budget)"};
        util.x_unit = "steps";
        util.y_unit = "fraction";
        for (const PoolSample& s : res_[d].samples) {
            run.x.push_back(double(s.step)), run.y.push_back(s.running);
            util.x.push_back(double(s.step));
            util.y.push_back(double(s.kv_running + s.kv_cached + s.state_running + s.state_cached) / B);
        }
        r.series.push_back(run);
        r.series.push_back(util);
    }
    for (int d = 0; d < 3; ++d) {
        const std::string plot = std::string("Pool bytes over time: ") + nice[d];
        const char* names[6] = {
            "KV (running)", "cached KV", "state (running)", "cached state", "padding + unfilled KV slots",
            "free"};
        std::vector<Series> v;
        for (const char* n : names) {
            Series s{n, "step", "bytes", {}, {}, plot};
            s.x_unit = "steps";
            s.y_unit = "B";
            v.push_back(s);
        }
        for (const PoolSample& s : res_[d].samples) {
            const double y[6] = {double(s.kv_running),
                                 double(s.kv_cached),
                                 double(s.state_running),
                                 double(s.state_cached),
                                 double(s.padding + s.kv_unfilled),
                                 double(s.free)};
            for (int j = 0; j < 6; ++j)
                v[size_t(j)].x.push_back(double(s.step)), v[size_t(j)].y.push_back(y[j]);
        }
        for (auto& s : v) r.series.push_back(std::move(s));
    }

    // ---- tables ----
    Table lay{"Layout of each design (same budget)",
              {"design", "KV page", "KV page bytes", "state slot bytes", "padding per state",
               "padding per KV page", "max KV pages", "max states", "unusable", "cache grid"},
              {},
              {"", "tokens", "B", "B", "B", "B", "pages", "states", "B", "tokens"}};
    for (int d = 0; d < 3; ++d) {
        const PoolLayout& l = layouts_[d];
        lay.rows.push_back({std::string(nice[d]), double(l.page_tokens), double(l.kv_page_bytes),
                            double(l.state_slot_bytes), double(l.state_padding()),
                            double(l.kv_page_padding()), double(l.max_kv_pages), double(l.max_states),
                            double(l.unusable_bytes), double(grids_[d])});
    }
    r.tables.push_back(lay);

    Table adm{"Serving the same stream",
              {"design", "peak running", "mean running", "steps", "mean wait", "mean latency",
               "refused admissions", "refused: no KV page", "refused: no state id", "refused: no state space",
               "refused with room", "free at refusal (mean)", "preemptions", "dropped"},
              {},
              {"", "requests", "requests", "steps", "steps", "steps", "events", "events", "events", "events",
               "events", "B", "events", "requests"}};
    for (int d = 0; d < 3; ++d) {
        const PoolSimResult& s = res_[d];
        adm.rows.push_back(
            {std::string(nice[d]), double(s.peak_running), s.mean_running, double(s.steps), s.mean_wait,
             s.mean_latency, double(s.blocked_steps), double(s.blocked_by[size_t(AllocStatus::no_kv_page)]),
             double(s.blocked_by[size_t(AllocStatus::no_state_id)]),
             double(s.blocked_by[size_t(AllocStatus::no_state_space)]), double(s.refused_with_room),
             s.blocked_steps ? double(s.free_at_block_sum) / s.blocked_steps : 0.0, double(s.preemptions),
             double(s.dropped)});
    }
    r.tables.push_back(adm);

    Table mem{"Memory over the run (time means, fractions of the budget)",
              {"design", "utilisation", "peak utilisation", "padding", "unfilled KV slots", "free",
               "fragmentation", "compactions", "bytes moved"},
              {},
              {"", "fraction", "fraction", "fraction", "fraction", "fraction", "fraction", "events", "B"}};
    for (int d = 0; d < 3; ++d) {
        const PoolSimResult& s = res_[d];
        const double steps = double(std::max<uint64_t>(1, s.steps));
        mem.rows.push_back({std::string(nice[d]), s.sum_data / steps / B, double(s.peak_data) / B,
                            s.sum_padding / steps / B, s.sum_unfilled / steps / B, s.sum_free / steps / B,
                            s.fragmentation(), double(s.compactions), double(s.bytes_moved)});
    }
    r.tables.push_back(mem);

    if (p_.num("shift_factor") != 1.0) {
        Table ph{
            "Before and after the mix shift (steps with only pre-shift or only post-shift requests running)",
            {"design", "phase", "steps", "mean running", "utilisation", "free", "fragmentation",
             "refused: no KV page", "refused: no state id", "refused: no state space", "refused with room"},
            {},
            {"", "", "steps", "requests", "fraction", "fraction", "fraction", "events", "events", "events",
             "events"}};
        for (int d = 0; d < 3; ++d)
            for (int k = 0; k < 2; ++k) {
                const PoolSimResult::Phase& x = res_[d].phases[k];
                const double n = double(std::max<uint64_t>(1, x.steps));
                ph.rows.push_back({std::string(nice[d]), std::string(k ? "after" : "before"), double(x.steps),
                                   x.running / n, x.data / n / B, x.free / n / B,
                                   x.states_ideal > 0 ? 1.0 - x.states_placeable / x.states_ideal : 0.0,
                                   double(x.refused_by[size_t(AllocStatus::no_kv_page)]),
                                   double(x.refused_by[size_t(AllocStatus::no_state_id)]),
                                   double(x.refused_by[size_t(AllocStatus::no_state_space)]),
                                   double(x.refused_with_room)});
            }
        r.tables.push_back(ph);
    }

    Table pre{"Prefix cache by shared-prefix length",
              {"prefix", "length", "cacheable: static", "cacheable: vLLM", "cacheable: unified",
               "hits: static", "hits: vLLM", "hits: unified"},
              {},
              {"", "tokens", "tokens", "tokens", "tokens", "requests", "requests", "requests"}};
    for (size_t k = 0; k < plen_.size(); ++k) {
        std::vector<Cell> row = {std::to_string(k), double(plen_[k])};
        for (int d = 0; d < 3; ++d) row.push_back(double(plen_[k] / grids_[d] * grids_[d]));
        for (int d = 0; d < 3; ++d) row.push_back(double(res_[d].hits_by_prefix[k]));
        pre.rows.push_back(row);
    }
    r.tables.push_back(pre);

    // ---- pool maps ----
    uint64_t cell_bytes = 0;
    for (int d = 0; d < 3; ++d) {
        const PoolSimResult& s = res_[d];
        if (s.snapshot.empty()) continue;
        r.grids.push_back(grid_of(s.snapshot, budget_,
                                  std::string("Pool map at step ") + std::to_string(s.snapshot_step) + ": " +
                                      pool_design_title(kDesigns[d]),
                                  &cell_bytes));
    }

    // ---- checks ----
    for (int d = 0; d < 3; ++d) {
        const PoolSimResult& s = res_[d];
        r.check(std::string("No page owned twice: ") + nice[d], s.audit_error.empty() && s.audits > 0,
                s.audit_error.empty()
                    ? std::to_string(s.audits) + " full audits (owner tables, physical placement, map) passed"
                    : s.audit_error);
        r.check(std::string("Everything freed at the end: ") + nice[d], s.freed_at_end,
                format_grouped(double(s.end_stats.free_bytes + s.end_stats.unusable_bytes)) + " of " +
                    format_grouped(B) + " B free, " + std::to_string(s.end_stats.kv_pages) + " pages and " +
                    std::to_string(s.end_stats.states) + " states still held");
        uint64_t bad = 0;
        for (const PoolSample& x : s.samples)
            bad += x.kv_running + x.kv_cached + x.kv_unfilled + x.state_running + x.state_cached + x.padding +
                       x.free + layouts_[d].unusable_bytes !=
                   budget_;
        r.check(std::string("Bytes add up to the budget: ") + nice[d], bad == 0,
                std::to_string(s.samples.size() - bad) + " of " + std::to_string(s.samples.size()) +
                    " sampled steps: KV + unfilled + state + padding + free + unusable (" +
                    format_grouped(double(layouts_[d].unusable_bytes)) + " B) = " + format_grouped(B) + " B");
        r.check(std::string("Stream served to the end: ") + nice[d],
                s.completed && s.finished + s.dropped == reqs_.size(),
                std::to_string(s.finished) + " finished, " + std::to_string(s.dropped) + " dropped of " +
                    std::to_string(reqs_.size()) + " in " + format_grouped(double(s.steps)) + " steps");
    }
    {
        const uint64_t kv = model_.kv_bytes_per_token_per_layer, st = model_.state_bytes_per_layer;
        const bool fits = uint64_t(plan_.block_tokens) * kv >= st;
        const bool minimal =
            plan_.block_tokens <= 16 || uint64_t(plan_.block_tokens - plan_.kernel_multiple) * kv < st;
        r.check("vLLM block: one attention page holds one layer's state, and no smaller multiple would",
                fits && minimal,
                std::to_string(plan_.block_tokens) + " tokens x " + format_grouped(double(kv)) +
                    " B = " + format_grouped(double(plan_.block_tokens * kv)) +
                    " B >= " + format_grouped(double(st)) + " B per layer");
        if (cfg.id == "qwen3-next-80b")
            r.check("vLLM block matches the observed Qwen3-Next figure (reference/serving.md §7)",
                    plan_.block_tokens == 1056 || p_.i("block_multiple") != 16,
                    std::to_string(plan_.block_tokens) + " tokens (observed 1056)");
    }

    // ---- notes ----
    r.notes.push_back(cfg.name + ": state " + format_bytes(double(model_.state_bytes())) + " per sequence (" +
                      std::to_string(model_.linear_layers) + " " + cfg.linear_name + " layers), KV " +
                      format_grouped(double(model_.kv_bytes_per_token())) + " B per token (" +
                      std::to_string(model_.attention_layers) + " attention layers); budget " +
                      format_bytes(B) + " per design.");
    r.notes.push_back("vLLM: \"Setting attention block size to " + std::to_string(plan_.block_tokens) +
                      " tokens\" (" + std::to_string(plan_.raw_tokens) + " rounded up to a multiple of " +
                      std::to_string(plan_.kernel_multiple) + "), \"Padding mamba page size by " +
                      format_sig(pad_pct, 3) + "%\"; layer groups of " + std::to_string(plan_.group_size) +
                      ": " + std::to_string(plan_.linear_groups) + " blocks per state" +
                      (plan_.linear_padding_layers
                           ? " with " + std::to_string(plan_.linear_padding_layers) + " padding layer(s)"
                           : std::string()) +
                      ", " + std::to_string(plan_.attention_groups) + " per KV page.");
    if (cell_bytes)
        r.notes.push_back(
            "Pool maps are downsampled: one cell per " + format_bytes(double(cell_bytes)) +
            " of pool order (" + std::to_string(kGridCells) +
            " cells); a cell shows the kind holding "
            "most of its bytes and the owner holding most. vLLM maps list blocks in block order "
            "(a block's bytes sit at one index of each per-layer tensor).");
    r.notes.push_back(
        "Time is simulated in scheduler steps (one decode token per running request per step); "
        "prefill and recompute after preemption take no extra steps. Admission is FCFS and "
        "all-or-nothing; preemption frees the most recently admitted request (vLLM's recompute).");
    r.notes.push_back(
        "Fragmentation here: of the new states the free bytes could hold if they were one run usable "
        "by anything, the share that cannot be placed without moving or evicting data (summed over "
        "steps). A static split's free KV pages, the unified pool's holes and short gap, and vLLM's "
        "padded blocks all count; free bytes too few for one state do not.");
    r.notes.push_back(
        "Not modelled: SGLang's cap of running requests at state slots / 3 (5 with extra_buffer) "
        "on top of the static split, so its figures here are an upper bound; the unified pool's "
        "compaction freeze during PD transfers (#33362); per-step state copies of vLLM's align mode.");
    r.notes.push_back("Series are sampled every " + std::to_string(res_[0].sample_stride) + "/" +
                      std::to_string(res_[1].sample_stride) + "/" + std::to_string(res_[2].sample_stride) +
                      " steps (static/vLLM/unified); time means use every step.");
}

}  // namespace

Experiment make_pool_experiment() {
    Experiment e;
    e.number = 3;
    e.id = "pool";
    e.title = "Unified page pool";
    e.component = "page pool";
    e.purpose =
        "One request stream against three ways of sharing memory between growing KV pages and fixed "
        "state slots: a static split, one page size for all, and one byte pool with two ends.";
    e.how_it_works =
        "A hybrid model needs two kinds of memory per request: KV pages for its attention layers, which grow "
        "with every token, and one fixed state slot for its linear layers, tens of MB for the published "
        "models (Kimi-Linear: 41.4 MiB). Engines share one budget between them in three ways, and this "
        "module "
        "serves the same seeded request stream from each, with the same bytes.\n\n"
        "- Static split (SGLang's default): the state pool gets r / (1 + r) of the budget "
        "(--mamba-full-memory-ratio r = 0.9: 47 %), whole slots; the KV pool gets the rest. Neither lends to "
        "the other.\n"
        "- One page size (vLLM's hybrid allocator): the attention block is inflated until one layer's page "
        "holds one layer's state, rounded up to the kernel's block multiple (Qwen3.5-4B: 524 -> 528 tokens), "
        "and the state page is padded to match. Layers are grouped so each block id indexes group_size "
        "per-layer tensors; a state takes one block per linear group (Kimi-Linear: 3, one with a padding "
        "layer).\n"
        "- Unified pool (SGLang --enable-unified-memory, #29678): one byte buffer, KV page envelopes growing "
        "from the bottom (page-major, #29533) and state slots from the top. Freed slots leave holes; "
        "compaction moves the occupants at the region tops into them by rewriting a virtual -> physical "
        "table, "
        "so handles never change.\n\n"
        "A state allocation in the unified pool needs two resources: a free state id and enough contiguous "
        "bytes. Early code answered a shortfall only by evicting cached states and crashed with \"Can not "
        "alloc mamba cache\" while dashboards showed free memory (#34441); the fix evicts KV and compacts "
        "(#36713). The scheduler here does the same: evict unreferenced prefix-cache entries (LRU), let the "
        "pool compact, and only then refuse admission or preempt.\n\n"
        "A prefix-cache entry holds the KV of a shared prefix floored to the cache grid plus one state "
        "checkpoint at that position: a hybrid hit needs both. Throughout the run (every 16 steps, thinning "
        "on "
        "long runs, and at the end) the pool is audited: each page and slot has one owner and one place, the "
        "map tiles the budget, and the bytes add up.\n\n"
        "Sources: reference/serving.md §1 and §7; SGLang memory_pool.py (MambaPool, HybridReqToTokenPool), "
        "unified_memory_pool.py, multi_ended_allocator.py, PRs #29533, #29678, #34441, #36713, #33362; "
        "vLLM docs/design/hybrid_kv_cache_manager.md, the attention block-size alignment and mamba page "
        "padding in the platform config, kv_cache_utils layer grouping.";
    e.where_it_does_not_pay =
        "A unified page size makes prompts shorter than a block uncacheable: prefix caching works in whole "
        "blocks, so with Kimi-Linear's 1,888-token block a 1,500-token system prompt is never reused, and "
        "every request's last block is partly empty (vllm #40696: 0 % hits below 528 tokens on Qwen3.5-4B). "
        "Padding layers and the padded state page cost a few percent more.\n\n"
        "A static split wastes memory when the mix shifts: a state-heavy phase (short prompts) runs out of "
        "slots with KV pages idle, a KV-heavy phase (long prompts) runs out of pages with slots idle. Move "
        "\"Prompt length after the shift\" to see one design follow and the other not.\n\n"
        "The unified pool pays in compaction (bytes moved) and in a second failure mode: with ids free and "
        "the bytes held by KV, a state allocation fails until KV is evicted and the pool compacted. While PD "
        "transfers address raw bytes, compaction must be frozen (#33362), so this failure can last.\n\n"
        "- At a small budget all three admit about the same few requests: the state slot dominates.\n"
        "- When outputs are short and prompts long, KV dominates and the static split's state pool idles.";
    e.params = pool_params();
    e.validate = validate_pool;
    e.start = [](const Params& p) { return std::make_unique<PoolRun>(p); };
    e.live = false;  // about 70 ms natively at defaults, more in the browser: run on release, with progress
    e.headlines = {
        {"Kimi-Linear under vLLM's one page size: attention block needed to hold one KDA layer's state",
         {},
         "vllm_block_tokens"},
    };
    return e;
}

K3_REGISTER_EXPERIMENT(make_pool_experiment);

}  // namespace k3
