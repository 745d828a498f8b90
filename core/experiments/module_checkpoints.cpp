// Module 5 `checkpoints`: checkpoint placement, retention and compression, measured by replaying a
// workload (synthetic, or the Mooncake conversation trace) through one instance's radix prefix cache
// in metadata mode.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/cache/codec_effect.h"
#include "core/cache/shared_model.h"
#include "core/cache/state_codec.h"
#include "core/cache/tree_view.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/tree_report.h"
#include "core/fleet/trace_reference.h"
#include "core/fleet/workload_replay.h"
#include "core/fleet/workload_source.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b", "tiny"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B",
                                                "tiny (runnable)"};
constexpr uint64_t kMaxNodesEstimate = 3000000;  // about 300 MB of tree: the page's budget

std::vector<ParamSpec> checkpoint_params() {
    auto when_synthetic = [](ParamSpec s) {
        return s.in_group("Workload").active_when("trace", "synthetic");
    };
    return {
        ParamSpec::text("trace", "Workload", "synthetic", {"synthetic", "mooncake"})
            .in_group("Workload")
            .describe(
                "\"synthetic\" (generated below), \"mooncake\" (the bundled Mooncake FAST'25 conversation "
                "trace: 12,031 requests, 145 M prompt tokens) or a path to a file in the Mooncake format."),
        when_synthetic(
            ParamSpec::choice("synthetic", "Synthetic workload", {"mix", "chat", "agentic", "shared"}, "mix", {"mix of all three", "multi-turn chat", "agentic branching", "shared system prompts"})
                .describe("Multi-turn chat (each turn extends the conversation), agent trees that "
                          "fork off a common prefix, single-turn requests sharing system prompts.")),
        when_synthetic(ParamSpec::integer("sessions", "Sessions", "sessions", 1, 4096, 96)
                           .log()
                           .describe("Chat sessions; the mix adds sessions/4 agent tasks and 2 x sessions "
                                     "shared-prompt requests.")),
        when_synthetic(ParamSpec::seed("Seed of the synthetic workload.")),
        ParamSpec::choice("policy", "Checkpoint policy", policy_ids(), "interval", policy_labels())
            .in_group("Checkpoints")
            .describe("Where requests leave state checkpoints and which ones the tree keeps (How it works)."),
        ParamSpec::integer("interval", "Checkpoint interval", "tokens", 16, 65536, 512)
            .log()
            .in_group("Checkpoints")
            .describe("A checkpoint at every multiple of this position: a multiple of the kernel chunk so a "
                      "resume is bitwise exact, and of the page size."),
        ParamSpec::integer("chunk", "Kernel chunk", "tokens", 1, 1024, 64)
            .log()
            .in_group("Checkpoints")
            .describe(
                "Chunk of the chunked prefill kernel (FLA uses 64). Junction checkpoints are floored to "
                "this grid."),
        ParamSpec::integer("max_states_per_path", "States per path (cap)", "states", 1, 4096, 3)
            .in_group("Checkpoints")
            .active_when("policy", "cap")
            .describe("SGLang --mamba-max-states-per-path: after each insert the shallowest interior states "
                      "beyond this are dropped (tail, forks, leaves and locked states stay)."),
        ParamSpec::integer("spread_states", "States per path (spread)", "states", 1, 4096, 8)
            .in_group("Checkpoints")
            .active_when("policy", "spread")
            .describe("At most this many states per path, chosen evenly spread along it."),
        ParamSpec::integer("retention_interval", "Retention segment", "tokens", 16, 1048576, 4096)
            .log()
            .in_group("Checkpoints")
            .active_when("policy", "segmented")
            .describe("vLLM prefix_cache_retention_interval: one state per segment of this many tokens, plus "
                      "the latest boundary and the shared-prefix junctions."),
        ParamSpec::choice("codec", "Checkpoint codec", state_codec_ids(), "fp32")
            .in_group("Checkpoints")
            .describe("How a stored checkpoint's recurrent state is encoded (the conv windows stay as they "
                      "are). Changes the bytes per checkpoint; errors in the compression table."),
        ParamSpec::integer("state_capacity", "State capacity", "states", 0, 1e8, 0)
            .in_group("Capacity")
            .describe("Checkpoints the cache may hold; 0 = unbounded. Evicted in LRU order: an interior "
                      "node keeps its KV as a tombstone, a leaf goes with its KV."),
        ParamSpec::integer("kv_capacity_tokens", "KV capacity", "tokens", 0, 1e11, 0)
            .in_group("Capacity")
            .describe("Tokens of attention KV the cache may hold; 0 = unbounded. LRU leaves go first."),
        ParamSpec::choice("lru_refresh", "LRU refresh on a hit", {"node", "path"}, "node",
                          {"matched node only", "whole path"})
            .in_group("Capacity")
            .describe("SGLang #31643: refreshing only the node a hit consumes keeps deep states of hot "
                      "sessions; refreshing the whole path evicts whole cold sessions together."),
        ParamSpec::integer("page_size", "KV page size", "tokens", 1, 64, 1)
            .log()
            .in_group("Capacity")
            .describe("KV is cached in whole pages: a prompt's partial last page is not cached (as in SGLang "
                      "and vLLM)."),
        ParamSpec::choice("preset", "Model", kPresets, "kimi-linear-48b", kPresetLabels)
            .in_group("Model")
            .describe("Bytes per state checkpoint and per KV token (module 2's accounting)."),
        ParamSpec::flag("sweeps", "Sweeps (intervals, capacities, policies)", true)
            .in_group("Run")
            .describe("Replays the workload again for the curves and the policy table. On the Mooncake trace "
                      "this takes a few seconds."),
    };
}

uint64_t grid_of(const Params& p) {
    return std::lcm<uint64_t>(uint64_t(p.i("chunk")), uint64_t(p.i("page_size")));
}

std::vector<ParamIssue> validate_checkpoints(const Params& p) {
    std::vector<ParamIssue> out;
    const uint64_t I = uint64_t(p.i("interval"));
    if (I % uint64_t(p.i("chunk")) != 0)
        out.push_back({ParamIssue::error, "interval",
                       "interval " + p.text("interval") + " is not a multiple of the kernel chunk " +
                           p.text("chunk") + ": a resume from such a checkpoint is not bitwise exact"});
    if (I % uint64_t(p.i("page_size")) != 0)
        out.push_back({ParamIssue::error, "interval",
                       "interval " + p.text("interval") + " is not a multiple of the page size " +
                           p.text("page_size")});
    if (std::string e = check_trace_param(p.str("trace")); !e.empty())
        out.push_back({ParamIssue::error, "trace", e});
    return out;
}

WorkloadSpec workload_spec(const Params& p) {
    WorkloadSpec s;
    s.trace = p.str("trace");
    for (const SyntheticKindName& k : synthetic_kinds()) if (p.str("synthetic") == k.id) s.synthetic = k.kind;
    s.sessions = uint32_t(p.i("sessions"));
    s.seed = uint64_t(p.integer("seed"));
    return s;
}

// Bytes of one checkpoint of the preset with its recurrent state encoded by `codec`.
uint64_t checkpoint_bytes(const ModelConfig& c, const MemoryAccount& a, StateCodec codec) {
    const uint64_t rows = uint64_t(c.lin_v_heads) * uint64_t(c.head_k);
    const uint64_t rec = c.state_dtype == DType::fp32 ? encoded_bytes(codec, rows, uint64_t(c.head_v))
                                                      : a.recurrent_bytes_per_layer;
    return uint64_t(a.linear_layers) * (rec + a.conv_bytes_per_layer);
}

class CheckpointsRun : public StagedRun {
  public:
    explicit CheckpointsRun(const Params& p);

  private:
    void load();
    double replay_main(const Deadline& d);
    void finish_main();
    void plan_sweeps();
    void codecs();
    void report_all();

    Params p_;
    ModelConfig model_;
    MemoryAccount acc_;
    ReplayConfig cfg_;
    LoadedWorkload lw_;
    std::unique_ptr<WorkloadReplay> main_;
    ReplayTotals main_t_;
    CacheStats main_s_;
    struct TreeSummary {
        uint64_t nodes = 0, leaves = 0, with_state = 0, tomb = 0, plain = 0, max_depth = 0, max_fan = 0,
                 forks = 0;
    } tree_;
    CompressedTree view_;
    std::string audit_;
    bool cleared_to_zero_ = false;
    std::string zero_detail_;
    uint64_t max_states_after_ = 0, max_kv_after_ = 0;
    bool refused_ = false;
    double replay_ms_ = 0;
    ReplayQueue intervals_, capacities_, policies_;
    bool interval_sweep_uses_interval_end_ = false;
};

CheckpointsRun::CheckpointsRun(const Params& p) : StagedRun("checkpoints", p), p_(p) {
    model_ = *model_preset(p.str("preset"));
    acc_ = account_memory(model_);
    cfg_.cache.page_size = uint32_t(p.i("page_size"));
    cfg_.cache.state_capacity = uint64_t(p.integer("state_capacity"));
    cfg_.cache.kv_capacity_tokens = uint64_t(p.integer("kv_capacity_tokens"));
    cfg_.cache.refresh = p.str("lru_refresh") == "path" ? LruRefresh::path : LruRefresh::node;
    cfg_.policy.kind = *parse_policy(p.str("policy"));
    cfg_.policy.interval = uint32_t(p.i("interval"));
    cfg_.policy.chunk = uint32_t(p.i("chunk"));
    cfg_.policy.max_states_per_path =
        uint32_t(cfg_.policy.kind == PolicyKind::spread ? p.i("spread_states") : p.i("max_states_per_path"));
    cfg_.policy.retention_interval = uint32_t(p.i("retention_interval"));
    cfg_.state_bytes = checkpoint_bytes(model_, acc_, *parse_state_codec(p.str("codec")));
    cfg_.kv_bytes_per_token = acc_.kv_bytes_per_token;

    add_step("loading the workload", 1, [this] { load(); });
    add_stage("replaying the workload", 4, [this](const Deadline& d) { return replay_main(d); });
    add_step("checking the tree", 1, [this] { finish_main(); });
    add_stage("sweeping checkpoint intervals", 4,
              [this](const Deadline& d) { return refused_ ? 1.0 : intervals_.step(*lw_.workload, d); });
    add_stage("sweeping state capacity", 6,
              [this](const Deadline& d) { return refused_ ? 1.0 : capacities_.step(*lw_.workload, d); });
    add_stage("comparing policies", 4,
              [this](const Deadline& d) { return refused_ ? 1.0 : policies_.step(*lw_.workload, d); });
    add_step("measuring codecs", 0.5, [this] { codecs(); });
    add_step("report", 0.5, [this] { report_all(); });
}

void CheckpointsRun::load() {
    lw_ = load_workload(workload_spec(p_));
    if (!lw_.workload) {
        refused_ = true;
        report_.check("Workload loaded", false, lw_.error);
        return;
    }
    // Refuse what the page cannot hold: one node per distinct checkpoint or branch.
    uint64_t tokens = 0;
    for (const Request& r : lw_.workload->requests) tokens += r.cache_len();
    const uint64_t finest =
        std::min<uint64_t>(cfg_.policy.interval, p_.flag("sweeps") ? 256 : cfg_.policy.interval);
    const uint64_t estimate = tokens / std::max<uint64_t>(finest, 1) + lw_.workload->requests.size() * 2;
    if (estimate > kMaxNodesEstimate) {
        refused_ = true;
        report_.check("Run within the memory budget", false,
                      "refused: up to " + format_grouped(double(estimate)) + " tree nodes (" +
                          format_grouped(double(tokens)) + " tokens at one checkpoint per " +
                          format_grouped(double(finest)) + " tokens) exceed the limit of " +
                          format_grouped(double(kMaxNodesEstimate)) +
                          "; raise the interval or turn the sweeps off");
        return;
    }
    main_ = std::make_unique<WorkloadReplay>(*lw_.workload, cfg_);
    plan_sweeps();
}

double CheckpointsRun::replay_main(const Deadline& d) {
    if (refused_) return 1.0;
    const Stopwatch sw;
    const size_t n = lw_.workload->requests.size();
    while (!main_->done()) {
        main_->run(nullptr, 1);
        const CacheStats& s = main_->cache().stats();
        max_states_after_ = std::max(max_states_after_, s.states);
        max_kv_after_ = std::max(max_kv_after_, s.kv_tokens);
        if ((main_->processed() & 63) == 0 && d.passed()) break;
    }
    replay_ms_ += sw.ms();
    return n ? double(main_->processed()) / double(n) : 1.0;
}

void CheckpointsRun::finish_main() {
    if (refused_) return;
    RadixCache& c = main_->cache();
    main_t_ = main_->totals();
    main_s_ = c.stats();
    audit_ = c.audit();
    const std::vector<NodeView> all = c.nodes();
    view_ = compress_tree(all, 400);
    for (const NodeView& n : all) {
        tree_.max_fan = std::max<uint64_t>(tree_.max_fan, n.children);
        if (n.id == kRoot) continue;
        ++tree_.nodes;
        tree_.leaves += n.children == 0;
        tree_.with_state += n.has_state;
        tree_.tomb += n.tombstone;
        tree_.plain += !n.has_state && !n.tombstone;
        tree_.max_depth = std::max<uint64_t>(tree_.max_depth, n.depth);
        tree_.forks += n.children >= 2;
    }
    // Everything a request held is released; dropping the cache must bring every count to zero.
    const uint64_t leases = c.stats().leases;
    c.clear();
    const CacheStats& z = c.stats();
    cleared_to_zero_ = leases == 0 && z.nodes == 0 && z.kv_tokens == 0 && z.states == 0 &&
                       z.state_bytes == 0 && z.live_checkpoints == 0 && z.live_state_bytes == 0 &&
                       z.tombstones == 0;
    zero_detail_ = "after the replay: " + format_grouped(double(leases)) +
                   " leases held; after dropping the cache: " + format_grouped(double(z.nodes)) + " nodes, " +
                   format_grouped(double(z.kv_tokens)) + " KV tokens, " +
                   format_grouped(double(z.live_checkpoints)) + " checkpoints, " +
                   format_bytes(double(z.live_state_bytes)) + " of state";
    main_.reset();
}

void CheckpointsRun::plan_sweeps() {
    if (!p_.flag("sweeps")) return;
    const uint64_t g = grid_of(p_);
    // Checkpoint intervals: the chosen one and powers of two from 256, on the chunk and page grid.
    ReplayConfig ic = cfg_;
    if (!cfg_.policy.places_interval()) {
        ic.policy.kind = PolicyKind::interval_end;
        interval_sweep_uses_interval_end_ = true;
    }
    std::vector<uint64_t> iv;
    for (uint64_t x = 256; x <= 16384; x *= 2)
        if (x % g == 0) iv.push_back(x);
    iv.push_back(cfg_.policy.interval);
    std::sort(iv.begin(), iv.end());
    iv.erase(std::unique(iv.begin(), iv.end()), iv.end());
    for (uint64_t x : iv) {
        ic.policy.interval = uint32_t(x);
        intervals_.add(format_grouped(double(x)), double(x), ic);
    }
    // State capacity, under both LRU refresh modes.
    for (LruRefresh r : {LruRefresh::node, LruRefresh::path})
        for (uint64_t cap : {16u, 64u, 256u, 1024u, 4096u, 16384u, 0u}) {
            ReplayConfig cc = cfg_;
            cc.cache.state_capacity = cap;
            cc.cache.refresh = r;
            capacities_.add(r == LruRefresh::node ? "node" : "path", double(cap), cc);
        }
    // Every policy under the chosen capacities and interval.
    for (size_t k = 0; k < policy_ids().size(); ++k) {
        ReplayConfig pc = cfg_;
        pc.policy.kind = PolicyKind(k);
        if (pc.policy.kind == PolicyKind::spread)
            pc.policy.max_states_per_path = uint32_t(p_.i("spread_states"));
        if (pc.policy.kind == PolicyKind::cap)
            pc.policy.max_states_per_path = uint32_t(p_.i("max_states_per_path"));
        policies_.add(policy_labels()[k], double(k), pc);
    }
}

void CheckpointsRun::codecs() {
    if (refused_) return;
    // Random states shaped like one KDA head of the preset ([K][V], rows of different scales, as the
    // decayed key channels of a real state have); the effect on the runnable model's logits comes
    // with the runnable model.
    const size_t rows = size_t(model_.head_k) * 4, cols = size_t(model_.head_v);
    std::vector<float> x(rows * cols);
    Rng rng(20260);
    for (size_t r = 0; r < rows; ++r) {
        const double scale = rng.lognormal(-2.0, 1.0);
        for (size_t i = 0; i < cols; ++i) x[r * cols + i] = float(rng.normal() * scale);
    }
    Table t{"Checkpoint compression",
            {"codec", "bytes per checkpoint", "vs fp32", "stated error bound", "max |error| (random state)",
             "max error / bound", "relative RMS error", "checkpoints per fp32 checkpoint's memory"},
            {},
            {"", "B", "ratio", "", "", "ratio", "", "ratio"}};
    const uint64_t fp32 = checkpoint_bytes(model_, acc_, StateCodec::fp32);
    bool within = true;
    std::string detail;
    for (const std::string& id : state_codec_ids()) {
        const StateCodec c = *parse_state_codec(id);
        const CodecError e = measure_codec(c, x.data(), rows, cols);
        const uint64_t b = checkpoint_bytes(model_, acc_, c);
        within &= e.max_bound_ratio <= 1.0;
        detail += (detail.empty() ? "" : ", ") + id + " " + format_sig(e.max_bound_ratio, 3);
        t.rows.push_back({id, double(b), double(b) / double(fp32), std::string(codec_bound_text(c)),
                          format_sig(e.max_abs, 3), e.max_bound_ratio, format_sig(e.rel_rms, 3),
                          double(fp32) / double(b)});
    }
    report_.tables.push_back(t);
    report_.check("Every codec's measured error is within its stated bound", within,
                  "largest error / bound on a random " + std::to_string(rows) + " x " + std::to_string(cols) +
                      " state: " + detail);

    // The same codecs on the runnable model: the error on its real KDA states, and the next-token logits
    // after a resume from the compressed checkpoint against the exact one (core/cache/codec_effect.h).
    std::string err;
    model::Model* m = serve::shared_model("tiny", 1, 64, &err);
    const serve::CodecEffectConfig ec;
    const std::vector<serve::CodecEffect> fx =
        m ? serve::measure_codec_effects(*m, ec, &err) : std::vector<serve::CodecEffect>{};
    if (fx.empty()) {
        report_.check("Codecs measured on the runnable model", false, err);
        return;
    }
    Table te{"Checkpoint compression on the runnable model (tiny)",
             {"codec", "bytes per checkpoint", "max error / bound (real states)", "max |state error|",
              "relative RMS error (worst layer)", "max |logit diff| after resume", "largest |logit|",
              "top-1 agreement", "bitwise"},
             {},
             {"", "B", "ratio", "", "", "", "", "fraction", ""}};
    bool real_within = true, fp32_exact = false;
    std::string real_detail;
    for (const serve::CodecEffect& x : fx) {
        real_within &= x.state_bound_ratio <= 1.0;
        if (x.codec == StateCodec::fp32) fp32_exact = x.bitwise && x.max_logit_diff == 0;
        real_detail += (real_detail.empty() ? "" : ", ") + std::string(state_codec_id(x.codec)) + " " +
                       format_sig(x.state_bound_ratio, 3);
        te.rows.push_back({std::string(state_codec_id(x.codec)), double(x.checkpoint_bytes),
                           x.state_bound_ratio, format_sig(x.state_max_abs, 3),
                           format_sig(x.state_rel_rms, 3), format_sig(x.max_logit_diff, 3),
                           format_sig(x.logit_scale, 3), x.rows ? double(x.top1_agree) / double(x.rows) : 0.0,
                           std::string(x.bitwise ? "yes" : "no")});
    }
    report_.tables.push_back(te);
    report_.check("Every codec's error is within its stated bound on the runnable model's states",
                  real_within,
                  "largest error / bound over every KDA layer of " + std::to_string(ec.prompts) +
                      " prompts: " + real_detail);
    report_.check("A resume from an fp32 checkpoint is bitwise the exact resume", fp32_exact,
                  "resumed at " + std::to_string(ec.resume) + " tokens, " + std::to_string(ec.steps) +
                      " next-token predictions per prompt compared bit for bit");
    report_.notes.push_back(
        "Codecs on the runnable model: " + std::to_string(ec.prompts) + " random prompts prefilled to " +
        std::to_string(ec.resume) + " tokens, checkpointed with each codec, resumed, " +
        std::to_string(ec.continue_tokens) + " more prompt tokens prefilled and " +
        std::to_string(ec.steps - 1) +
        " greedy step(s) decoded with the exact run's tokens; the table compares the next-token logits.");
}

void CheckpointsRun::report_all() {
    Report& r = report_;
    if (refused_) return;
    const Workload& w = *lw_.workload;
    const ReplayTotals& t = main_t_;
    const CacheStats& s = main_s_;
    const double kvb = double(cfg_.kv_bytes_per_token);
    const double state_held = double(s.state_bytes), kv_held = double(s.kv_tokens) * kvb;

    // ---- headline scalars ----
    r.scalar("token_hit_kv", "KV-visible token hit", "fraction", t.token_hit_kv(), true).help =
        "Prompt tokens whose attention KV was cached, over all prompt tokens. A hybrid cannot resume from "
        "KV alone.";
    r.scalar("token_hit_state", "State-usable token hit", "fraction", t.token_hit_state(), true).help =
        "Prompt tokens up to the deepest checkpoint at or above the KV match: what a request actually skips.";
    r.scalar("recomputed_tokens", "Recomputed prompt tokens", "tokens", double(t.recomputed_tokens), true)
        .help = "Sum over requests of prompt length minus the state-usable hit.";
    r.scalar("state_memory_share", "State share of cache memory (end)", "fraction",
             state_held + kv_held > 0 ? state_held / (state_held + kv_held) : 0.0, true);
    r.scalar("hit_gap", "KV-visible minus state-usable", "fraction", t.token_hit_kv() - t.token_hit_state());
    r.scalar("prompt_tokens", "Prompt tokens", "tokens", double(t.prompt_tokens));
    r.scalar("requests", "Requests", "requests", double(t.requests));
    r.scalar("kv_hit_tokens", "KV-visible hit tokens", "tokens", double(t.kv_hit_tokens));
    r.scalar("state_hit_tokens", "State-usable hit tokens", "tokens", double(t.state_hit_tokens));
    r.scalar("state_bytes_held", "State checkpoints held (end)", "B", state_held);
    r.scalar("kv_bytes_held", "Attention KV held (end)", "B", kv_held);
    r.scalar("peak_state_bytes", "State checkpoints held (peak)", "B", double(t.peak_state_bytes));
    r.scalar("peak_kv_bytes", "Attention KV held (peak)", "B", double(t.peak_kv_bytes));
    r.scalar("states_held", "Checkpoints held (end)", "count", double(s.states));
    r.scalar("kv_tokens_held", "KV tokens held (end)", "tokens", double(s.kv_tokens));
    r.scalar("checkpoint_bytes", "Bytes per checkpoint", "B", double(cfg_.state_bytes)).help =
        model_.name + ", " + p_.str("codec") + " recurrent state plus conv windows.";
    r.scalar("states_created", "Checkpoints created", "count", double(t.states_added));
    r.scalar("checkpoints_used", "Checkpoints ever resumed from", "count", double(s.checkpoints_used)).help =
        "Checkpoints that at least one later request resumed from; the rest were pure cost.";
    r.scalar("checkpoint_use_fraction", "Share of checkpoints ever resumed from", "fraction",
             t.states_added ? double(s.checkpoints_used) / double(t.states_added) : 0.0);
    r.scalar("states_evicted", "Checkpoints evicted (capacity)", "count", double(s.states_evicted));
    r.scalar("retention_dropped", "Checkpoints dropped by retention", "count", double(t.retention_dropped));
    r.scalar("tombstones", "Tombstones (KV kept, state gone)", "count", double(s.tombstones));
    r.scalar("gap_requests", "Requests with KV deeper than state", "requests", double(t.gap_requests));
    r.scalar("full_hits", "Requests resumed at their prompt end", "requests", double(t.full_hits));
    r.timing_scalar("replay_ms", "Replay (headline run)", "ms", replay_ms_);
    if (replay_ms_ > 0)
        r.timing_scalar("requests_per_s", "Replay throughput", "req/s",
                        double(t.requests) / (replay_ms_ / 1000.0));

    // ---- sweeps ----
    uint64_t over_kv = t.state_over_kv;
    if (!intervals_.empty()) {
        Series mr = make_series("interval sweep", "Memory vs recompute over checkpoint intervals",
                                "state checkpoints held (peak)", "recomputed prompt tokens", "B", "tokens");
        mr.log_x = true;
        mr.style = SeriesStyle::points;
        Series rv = make_series("recomputed", "Recompute vs checkpoint interval", "interval",
                                "recomputed prompt tokens", "tokens", "tokens");
        Series mv = make_series("state memory (peak)", "State memory vs checkpoint interval", "interval",
                                "state checkpoints held (peak)", "tokens", "B");
        rv.log_x = mv.log_x = mv.log_y = true;
        Table tt{"Checkpoint intervals",
                 {"interval", "state-usable hit", "recomputed", "checkpoints held", "state memory (peak)",
                  "KV memory (end)", "state share (end)"},
                 {},
                 {"tokens", "fraction", "tokens", "count", "B", "B", "fraction"}};
        for (const ReplayResult& x : intervals_.results()) {
            over_kv += x.t.state_over_kv;
            const double kv = double(x.s.kv_tokens) * kvb, st = double(x.s.state_bytes);
            mr.x.push_back(double(x.t.peak_state_bytes));
            mr.y.push_back(double(x.t.recomputed_tokens));
            rv.x.push_back(x.x), rv.y.push_back(double(x.t.recomputed_tokens));
            mv.x.push_back(x.x), mv.y.push_back(double(x.t.peak_state_bytes));
            tt.rows.push_back({x.x, x.t.token_hit_state(), double(x.t.recomputed_tokens), double(x.s.states),
                               double(x.t.peak_state_bytes), kv, st + kv > 0 ? st / (st + kv) : 0.0});
        }
        r.series.push_back(mr);
        r.series.push_back(rv);
        r.series.push_back(mv);
        r.tables.push_back(tt);
        if (interval_sweep_uses_interval_end_)
            r.notes.push_back(
                "The chosen policy places no interval checkpoints: the interval sweep uses "
                "\"interval + request end\" with the same capacities.");
        // With unbounded capacity and no retention, a finer nested grid can only resume deeper.
        const bool unbounded = cfg_.cache.state_capacity == 0 && cfg_.cache.kv_capacity_tokens == 0;
        const PolicyKind k = intervals_.results()[0].cfg.policy.kind;
        if (unbounded &&
            (k == PolicyKind::interval || k == PolicyKind::interval_end || k == PolicyKind::branch)) {
            bool mono = true;
            std::string detail;
            const auto& v = intervals_.results();
            for (size_t i = 0; i < v.size(); ++i)
                for (size_t j = 0; j < v.size(); ++j)
                    if (uint64_t(v[j].x) % uint64_t(v[i].x) == 0 &&
                        v[i].t.recomputed_tokens > v[j].t.recomputed_tokens) {
                        mono = false;
                        detail = "interval " + format_grouped(v[i].x) + " recomputes more than " +
                                 format_grouped(v[j].x);
                    }
            r.check("Unbounded cache: a finer nested interval never recomputes more", mono,
                    mono ? "recomputed tokens non-increasing as the interval halves, over " +
                               std::to_string(v.size()) + " intervals"
                         : detail);
        }
    }
    if (!capacities_.empty()) {
        const auto& v = capacities_.results();
        Series hn = make_series("state-usable, node refresh", "Hit rate vs state capacity",
                                "state capacity (states)", "token hit", "count", "fraction");
        hn.log_x = true;
        Series hp = hn, kn = hn;
        hp.name = "state-usable, path refresh";
        kn.name = "KV-visible, node refresh";
        Table ct{"State capacity",
                 {"capacity", "LRU refresh", "KV-visible hit", "state-usable hit", "recomputed",
                  "checkpoints evicted"},
                 {},
                 {"count", "", "fraction", "fraction", "tokens", "count"}};
        for (const ReplayResult& x : v) {
            over_kv += x.t.state_over_kv;
            // The unbounded run is plotted at the number of states it ended up holding.
            const double at = x.x > 0 ? x.x : double(std::max<uint64_t>(x.s.peak_states, 1));
            Series& dst = x.cfg.cache.refresh == LruRefresh::node ? hn : hp;
            dst.x.push_back(at), dst.y.push_back(x.t.token_hit_state());
            if (x.cfg.cache.refresh == LruRefresh::node)
                kn.x.push_back(at), kn.y.push_back(x.t.token_hit_kv());
            ct.rows.push_back(
                {x.x > 0 ? Cell(x.x)
                         : Cell(std::string("unbounded (" + format_grouped(double(x.s.peak_states)) + ")")),
                 x.label, x.t.token_hit_kv(), x.t.token_hit_state(), double(x.t.recomputed_tokens),
                 double(x.s.states_evicted)});
        }
        for (Series* s2 : {&hn, &hp, &kn}) {
            // Sort by x (the unbounded point may land anywhere).
            std::vector<size_t> o(s2->x.size());
            std::iota(o.begin(), o.end(), 0);
            std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) { return s2->x[a] < s2->x[b]; });
            Series c2 = *s2;
            for (size_t i = 0; i < o.size(); ++i) c2.x[i] = s2->x[o[i]], c2.y[i] = s2->y[o[i]];
            *s2 = c2;
        }
        r.series.push_back(hn);
        r.series.push_back(hp);
        r.series.push_back(kn);
        r.tables.push_back(ct);
        // The unbounded point of the sweep under the headline's refresh is the headline run again.
        if (cfg_.cache.state_capacity == 0)
            for (const ReplayResult& x : v)
                if (x.x == 0 && x.cfg.cache.refresh == cfg_.cache.refresh)
                    r.check(
                        "The sweep's unbounded run reproduces the headline run",
                        x.t.state_hit_tokens == t.state_hit_tokens && x.t.kv_hit_tokens == t.kv_hit_tokens,
                        format_grouped(double(x.t.state_hit_tokens)) + " vs " +
                            format_grouped(double(t.state_hit_tokens)) + " state-usable hit tokens");
    }
    if (!policies_.empty()) {
        Series pb = make_series("state-usable hit", "State-usable hit by policy", "policy", "token hit", "",
                                "fraction");
        pb.style = SeriesStyle::bars;
        Table pt{
            "Policies compared",
            {"policy", "KV-visible hit", "state-usable hit", "recomputed", "checkpoints held",
             "state memory (peak)", "created", "share ever resumed from", "dropped by retention", "evicted"},
            {},
            {"", "fraction", "fraction", "tokens", "count", "B", "count", "fraction", "count", "count"}};
        for (const ReplayResult& x : policies_.results()) {
            over_kv += x.t.state_over_kv;
            pb.x.push_back(x.x), pb.y.push_back(x.t.token_hit_state());
            pb.x_names.push_back(policy_ids()[size_t(x.x)]);
            pt.rows.push_back(
                {x.label, x.t.token_hit_kv(), x.t.token_hit_state(), double(x.t.recomputed_tokens),
                 double(x.s.states), double(x.t.peak_state_bytes), double(x.t.states_added),
                 x.t.states_added ? double(x.s.checkpoints_used) / double(x.t.states_added) : 0.0,
                 double(x.t.retention_dropped), double(x.s.states_evicted)});
        }
        r.series.push_back(pb);
        r.tables.push_back(pt);
    }

    // ---- radix tree summary ----
    {
        Table tt{"Radix tree at the end of the headline run", {"property", "value"}, {}, {"", ""}};
        auto row = [&](std::string k, double v, const char* unit = "count") {
            tt.rows.push_back({std::move(k), format_with_unit(v, unit)});
        };
        row("nodes", double(tree_.nodes));
        row("leaves", double(tree_.leaves));
        row("forks (2+ children)", double(tree_.forks));
        row("largest fan-out", double(tree_.max_fan));
        row("deepest node (nodes from the root)", double(tree_.max_depth));
        row("nodes with a checkpoint", double(tree_.with_state));
        row("tombstones (state evicted, KV kept)", double(tree_.tomb));
        row("nodes that never had a checkpoint", double(tree_.plain));
        row("KV tokens", double(s.kv_tokens), "tokens");
        row("KV memory", kv_held, "B");
        row("checkpoint memory", state_held, "B");
        row("node splits", double(s.splits));
        row("KV tokens evicted", double(s.kv_tokens_evicted), "tokens");
        row("nodes removed", double(s.nodes_removed));
        r.tables.push_back(tt);
    }
    // The tree itself: single-child chains merged, checkpoints as markers, heaviest subtrees first.
    {
        r.trees.push_back(prefix_tree_report("Radix tree at the end of the headline run", view_));
        if (view_.total > view_.nodes.size())
            r.notes.push_back("The tree view merges single-child chains and shows the " +
                              format_grouped(double(view_.nodes.size())) + " heaviest of " +
                              format_grouped(double(view_.total)) + " spans.");
    }
    const uint64_t partial = t.requests - t.full_hits - t.no_state_hit;
    r.tables.push_back(Table{"Requests by outcome",
                             {"outcome", "requests", "share"},
                             {{std::string("resumed at the prompt end"), double(t.full_hits),
                               double(t.full_hits) / double(std::max<uint64_t>(t.requests, 1))},
                              {std::string("resumed part way"), double(partial),
                               double(partial) / double(std::max<uint64_t>(t.requests, 1))},
                              {std::string("no state-usable hit (full prefill)"), double(t.no_state_hit),
                               double(t.no_state_hit) / double(std::max<uint64_t>(t.requests, 1))},
                              {std::string("KV matched deeper than the state"), double(t.gap_requests),
                               double(t.gap_requests) / double(std::max<uint64_t>(t.requests, 1))}},
                             {"", "requests", "fraction"}});

    // ---- checks ----
    r.check("Tree invariants hold after the replay (audit)", audit_.empty(),
            audit_.empty() ? "spans, child index, "
                             "LRU lists, lock counts, reference counts and byte totals agree"
                           : audit_);
    r.check(
        "State-usable hit never exceeds the KV-visible hit", over_kv == 0,
        format_grouped(double(over_kv)) + " requests with state hit > KV hit, over every replay of this run");
    r.check("Recomputed = prompt - state-usable hit",
            t.recomputed_tokens + t.state_hit_tokens == t.prompt_tokens,
            format_grouped(double(t.recomputed_tokens)) + " + " + format_grouped(double(t.state_hit_tokens)) +
                " = " + format_grouped(double(t.prompt_tokens)));
    r.check("Reference counts and memory return to zero", cleared_to_zero_, zero_detail_);
    if (cfg_.cache.state_capacity > 0 || cfg_.cache.kv_capacity_tokens > 0) {
        const bool ok =
            (cfg_.cache.state_capacity == 0 || max_states_after_ <= cfg_.cache.state_capacity) &&
            (cfg_.cache.kv_capacity_tokens == 0 || max_kv_after_ <= cfg_.cache.kv_capacity_tokens);
        r.check("Capacities hold after every request", ok,
                "at most " + format_grouped(double(max_states_after_)) + " checkpoints and " +
                    format_grouped(double(max_kv_after_)) + " KV tokens held between requests");
    }
    const bool unbounded_p1 =
        cfg_.cache.state_capacity == 0 && cfg_.cache.kv_capacity_tokens == 0 && cfg_.cache.page_size == 1;
    if (lw_.trace && unbounded_p1) {
        const TraceReferenceHits ref = trace_reference_hits(*lw_.trace, cfg_.policy.interval);
        r.check("KV-visible hit equals an independent count over the block ids",
                ref.kv_hit_tokens == t.kv_hit_tokens,
                format_grouped(double(t.kv_hit_tokens)) + " tokens (radix tree) vs " +
                    format_grouped(double(ref.kv_hit_tokens)) + " (block-level count, no tree)");
        if (cfg_.policy.kind == PolicyKind::interval || cfg_.policy.kind == PolicyKind::interval_end) {
            const uint64_t want = cfg_.policy.kind == PolicyKind::interval ? ref.state_hit_interval
                                                                           : ref.state_hit_interval_end;
            r.check("State-usable hit equals an independent count over the block ids",
                    want == t.state_hit_tokens,
                    format_grouped(double(t.state_hit_tokens)) + " tokens (radix tree) vs " +
                        format_grouped(double(want)) + " (block-level count)");
        }
    }
    if (lw_.bundled && unbounded_p1 && cfg_.policy.interval == 512 &&
        (cfg_.policy.kind == PolicyKind::interval || cfg_.policy.kind == PolicyKind::interval_end)) {
        const bool end = cfg_.policy.kind == PolicyKind::interval_end;
        const double kv = std::round(t.token_hit_kv() * 10000) / 100,
                     st = std::round(t.token_hit_state() * 10000) / 100;
        r.check("Mooncake conversation trace: 37.36 % KV-visible, " + std::string(end ? "37.36" : "37.34") +
                    " % state-usable (traces/README.md)",
                kv == 37.36 && st == (end ? 37.36 : 37.34),
                format_sig(t.token_hit_kv() * 100, 6) + " % KV-visible, " +
                    format_sig(t.token_hit_state() * 100, 6) + " % state-usable over " +
                    format_grouped(double(t.prompt_tokens)) + " prompt tokens");
    }

    // ---- notes ----
    r.notes.push_back(w.name + " workload: " + format_grouped(double(w.requests.size())) + " requests, " +
                      format_grouped(double(t.prompt_tokens)) + " prompt tokens.");
    if (lw_.trace)
        r.notes.push_back(
            "Each 512-token block id of the trace expands into 512 deterministic pseudo-token ids "
            "(the last block truncated to input_length), which keeps exactly the trace's prefix "
            "sharing. Output tokens are not in the trace, so only prompts are cached.");
    else
        r.notes.push_back(
            "Synthetic requests cache prompt and output (the next turn's prompt contains the output).");
    r.notes.push_back(
        "Requests are replayed one after the other (no concurrency); the fleet module replays the same "
        "cache under a scheduler. A request resumes from its state-usable hit and recomputes the rest.");
}

}  // namespace

Experiment make_checkpoints_experiment() {
    Experiment e;
    e.number = 5;
    e.id = "checkpoints";
    e.title = "Checkpoint placement, retention, compression";
    e.component = "prefix caching";
    e.purpose =
        "Where to keep recurrent-state checkpoints, how many, and in what format: token hit, memory and "
        "recompute of a workload replayed through one instance's prefix cache.";
    e.how_it_works =
        "A hybrid model can resume a prompt only from a position where it has both the attention KV and a "
        "saved recurrent state (a checkpoint). The cache is a radix tree over token ids: KV is cached per "
        "page along every path, checkpoints sit on node ends. A lookup returns two lengths: the KV-visible "
        "match and the state-usable match, the deepest checkpoint at or above it. Only the second is "
        "skipped; the rest is recomputed.\n\nPlacement policies:\n- interval: a checkpoint at every "
        "multiple of the interval, a multiple of the kernel chunk so that a resume is bitwise exact "
        "(SGLang's chunk-end tracking, vLLM's block boundaries).\n- end: only where each request ends "
        "(SGLang no_buffer, llama.cpp).\n- branch: request ends plus the junction where a request's KV "
        "match ran deeper than its state, floored to the chunk grid, so the next sibling resumes there "
        "(Marconi, MLSys 2025; SGLang branching seqlen; vLLM #37898).\n\nRetention policies (after each "
        "insert, on the inserted path):\n- cap: at most N states per path, the shallowest interior ones "
        "dropped first; tail, forks, leaves and locked states stay (SGLang --mamba-max-states-per-path, "
        "#31230).\n- segmented: one state per N-token segment plus the latest boundary and the junctions "
        "(vLLM prefix_cache_retention_interval, #43447, #47782).\n- spread: at most N states spread evenly "
        "along the path (mlx-serve #310).\n\nUnder a state capacity the least recently used checkpoint "
        "goes: an interior node keeps its KV as a tombstone, a leaf goes with its KV and its stateless "
        "ancestors (SGLang's MambaRadixCache). A hit refreshes the consumed node only or the whole path: "
        "SGLang #31643 raised a multi-turn hit rate from 0.61 to 0.83 by refreshing only the node. "
        "Checkpoints are never mutated (copy-on-write), and a split never copies one.\n\nCheckpoint "
        "codecs: bf16 and fp16 round to nearest even, int8 keeps one scale per state row; the table gives "
        "bytes and the stated error bound against the error measured on a random state; a second table "
        "measures them on the runnable model's real states and compares the next-token logits after a resume "
        "from the compressed checkpoint with the exact resume.\n\nSources: "
        "reference/serving.md §2 (SGLang mamba_radix_cache.py, vLLM MambaManager and align mode), §6-7; "
        "the Mooncake trace (kvcache-ai/Mooncake FAST25-release/traces, Apache-2.0).";
    e.where_it_does_not_pay =
        "One Kimi-Linear checkpoint (43 MB) weighs as much as about 5,384 tokens of its MLA cache. A "
        "checkpoint every 512 tokens costs ten times the KV it makes usable; on unique prompts every "
        "checkpoint is pure cost.\n\n- On the Mooncake conversation trace most requests share only their "
        "first block with the others: with a checkpoint every 512 tokens about 2 % of the checkpoints are "
        "ever resumed from (the run reports this share for every policy).\n- Under a small state capacity, "
        "dense interval checkpoints evict each other before anyone reuses them (SGLang #36935). On the "
        "Mooncake trace with 1,024 states, a checkpoint every 512 tokens keeps 4.6 % of the tokens usable, "
        "request ends alone 0.6 %, branch points 14 %, a cap of 3 per path 21 % (run this module with "
        "state_capacity=1024 to see the table).\n- Compressing checkpoints multiplies how many fit, but a "
        "resume from a compressed state is no longer exact: the continuation differs from the cold run by "
        "the codec's error, carried forward by the recurrence.";
    e.params = checkpoint_params();
    e.validate = validate_checkpoints;
    e.data_files = [](const Params& p) {
        return p.str("trace") == kMooncakeTraceName ? std::vector<std::string>{kMooncakeTraceFile}
                                                    : std::vector<std::string>{};
    };
    e.start = [](const Params& p) { return std::make_unique<CheckpointsRun>(p); };
    e.live = false;
    return e;
}

K3_REGISTER_EXPERIMENT(make_checkpoints_experiment);

}  // namespace k3
