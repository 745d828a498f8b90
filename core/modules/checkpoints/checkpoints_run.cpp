// Module 5 `checkpoints`: the headline replay, the sweeps and the codec measurements.
#include <algorithm>
#include <memory>
#include <numeric>

#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/cache/shared_model.h"
#include "core/model/accounting.h"
#include "core/modules/checkpoints/checkpoints.h"

namespace k3 {

namespace {

constexpr uint64_t kMaxNodesEstimate = 3000000;  // about 300 MB of tree: the page's budget

// Bytes of one checkpoint of the preset with its recurrent state encoded by `codec`.
uint64_t checkpoint_bytes(const ModelConfig& c, const MemoryAccount& a, StateCodec codec) {
    const uint64_t rows = uint64_t(c.lin_v_heads) * uint64_t(c.head_k);
    const uint64_t rec = c.state_dtype == DType::fp32 ? encoded_bytes(codec, rows, uint64_t(c.head_v))
                                                      : a.recurrent_bytes_per_layer;
    return uint64_t(a.linear_layers) * (rec + a.conv_bytes_per_layer);
}

ReplayConfig replay_config(const CheckpointsParams& p, const ModelConfig& model, const MemoryAccount& a) {
    ReplayConfig c;
    c.cache.page_size = p.page_size;
    c.cache.state_capacity = p.state_capacity;
    c.cache.kv_capacity_tokens = p.kv_capacity_tokens;
    c.cache.refresh = p.lru_refresh;
    c.policy.kind = p.policy;
    c.policy.interval = p.interval;
    c.policy.chunk = p.chunk;
    c.policy.max_states_per_path = p.policy == PolicyKind::spread ? p.spread_states : p.max_states_per_path;
    c.policy.retention_interval = p.retention_interval;
    c.state_bytes = checkpoint_bytes(model, a, p.codec);
    c.kv_bytes_per_token = a.kv_bytes_per_token;
    return c;
}

TreeSummary summarise_tree(const std::vector<NodeView>& all) {
    TreeSummary t;
    for (const NodeView& n : all) {
        t.max_fan_out = std::max<uint64_t>(t.max_fan_out, n.children);
        if (n.id == kRoot) continue;
        ++t.nodes;
        t.leaves += n.children == 0;
        t.with_state += n.has_state;
        t.tombstones += n.tombstone;
        t.never_had_state += !n.has_state && !n.tombstone;
        t.max_depth = std::max<uint64_t>(t.max_depth, n.depth);
        t.forks += n.children >= 2;
    }
    return t;
}

class CheckpointsRun : public StagedRun {
  public:
    CheckpointsRun(const CheckpointsParams& p, const Params& raw);

  private:
    void load();
    double replay_main(const Deadline& d);
    void finish_main();
    void plan_sweeps();
    void plan_interval_sweep();
    void measure_codecs();
    void finish();

    CheckpointsParams params_;
    MemoryAccount account_;
    LoadedWorkload loaded_;
    std::unique_ptr<WorkloadReplay> main_;
    ReplayQueue intervals_, capacities_, policies_;
    CheckpointsResult result_;
};

CheckpointsRun::CheckpointsRun(const CheckpointsParams& p, const Params& raw)
    : StagedRun("checkpoints", raw), params_(p) {
    result_.model = *model_preset(p.preset);
    account_ = account_memory(result_.model);
    result_.config = replay_config(p, result_.model, account_);

    const auto sweep = [this](ReplayQueue& q) {
        return
            [this, &q](const Deadline& d) { return result_.refused() ? 1.0 : q.step(*loaded_.workload, d); };
    };
    add_step("loading the workload", 1, [this] { load(); });
    add_stage("replaying the workload", 4, [this](const Deadline& d) { return replay_main(d); });
    add_step("checking the tree", 1, [this] { finish_main(); });
    add_stage("sweeping checkpoint intervals", 4, sweep(intervals_));
    add_stage("sweeping state capacity", 6, sweep(capacities_));
    add_stage("comparing policies", 4, sweep(policies_));
    add_step("measuring codecs", 0.5, [this] { measure_codecs(); });
    add_step("report", 0.5, [this] { finish(); });
}

void CheckpointsRun::load() {
    loaded_ = load_workload(params_.workload);
    if (!loaded_.workload) {
        result_.load_error = loaded_.error;
        return;
    }
    const Workload& w = *loaded_.workload;
    result_.workload_name = w.name;
    result_.workload_requests = w.requests.size();
    result_.from_trace = loaded_.trace != nullptr;
    result_.bundled_trace = loaded_.bundled;
    // Refuse what the page cannot hold: one node per distinct checkpoint or branch.
    NodeEstimate e;
    for (const Request& r : w.requests) e.tokens += r.cache_len();
    const uint64_t interval = result_.config.policy.interval;
    e.finest = std::min<uint64_t>(interval, params_.sweeps ? 256 : interval);
    e.nodes = e.tokens / std::max<uint64_t>(e.finest, 1) + w.requests.size() * 2;
    e.limit = kMaxNodesEstimate;
    if (e.nodes > e.limit) {
        result_.too_big = e;
        return;
    }
    main_ = std::make_unique<WorkloadReplay>(w, result_.config);
    plan_sweeps();
}

double CheckpointsRun::replay_main(const Deadline& d) {
    if (result_.refused()) return 1.0;
    const Stopwatch sw;
    const size_t n = loaded_.workload->requests.size();
    while (!main_->done()) {
        main_->run(nullptr, 1);
        const CacheStats& s = main_->cache().stats();
        result_.max_states_held = std::max(result_.max_states_held, s.states);
        result_.max_kv_held = std::max(result_.max_kv_held, s.kv_tokens);
        if ((main_->processed() & 63) == 0 && d.passed()) break;
    }
    result_.replay_ms += sw.ms();
    return n ? double(main_->processed()) / double(n) : 1.0;
}

void CheckpointsRun::finish_main() {
    if (result_.refused()) return;
    RadixCache& c = main_->cache();
    result_.totals = main_->totals();
    result_.stats = c.stats();
    result_.audit = c.audit();
    const std::vector<NodeView> all = c.nodes();
    result_.view = compress_tree(all, 400);
    result_.tree = summarise_tree(all);
    // Everything a request held is released; dropping the cache must bring every count to zero.
    result_.leases_after_replay = c.stats().leases;
    c.clear();
    result_.after_clear = c.stats();
    main_.reset();
}

void CheckpointsRun::plan_sweeps() {
    if (!params_.sweeps) return;
    plan_interval_sweep();
    const ReplayConfig& cfg = result_.config;
    // State capacity, under both LRU refresh modes.
    for (LruRefresh r : {LruRefresh::node, LruRefresh::path})
        for (uint64_t cap : {16u, 64u, 256u, 1024u, 4096u, 16384u, 0u}) {
            ReplayConfig cc = cfg;
            cc.cache.state_capacity = cap;
            cc.cache.refresh = r;
            capacities_.add(r == LruRefresh::node ? "node" : "path", double(cap), cc);
        }
    // Every policy under the chosen capacities and interval.
    for (size_t k = 0; k < policy_ids().size(); ++k) {
        ReplayConfig pc = cfg;
        pc.policy.kind = PolicyKind(k);
        if (pc.policy.kind == PolicyKind::spread) pc.policy.max_states_per_path = params_.spread_states;
        if (pc.policy.kind == PolicyKind::cap) pc.policy.max_states_per_path = params_.max_states_per_path;
        policies_.add(policy_labels()[k], double(k), pc);
    }
}

// Checkpoint intervals: the chosen one and powers of two from 256, on the chunk and page grid.
void CheckpointsRun::plan_interval_sweep() {
    const ReplayConfig& cfg = result_.config;
    const uint64_t grid = std::lcm<uint64_t>(params_.chunk, params_.page_size);
    ReplayConfig ic = cfg;
    if (!cfg.policy.places_interval()) {
        ic.policy.kind = PolicyKind::interval_end;
        result_.interval_sweep_uses_interval_end = true;
    }
    std::vector<uint64_t> intervals;
    for (uint64_t x = 256; x <= 16384; x *= 2)
        if (x % grid == 0) intervals.push_back(x);
    intervals.push_back(cfg.policy.interval);
    std::sort(intervals.begin(), intervals.end());
    intervals.erase(std::unique(intervals.begin(), intervals.end()), intervals.end());
    for (uint64_t x : intervals) {
        ic.policy.interval = uint32_t(x);
        intervals_.add(format_grouped(double(x)), double(x), ic);
    }
}

void CheckpointsRun::measure_codecs() {
    if (result_.refused()) return;
    CodecMeasurements& m = result_.codecs;
    const ModelConfig& model = result_.model;
    // Random states shaped like one KDA head of the preset ([K][V], rows of different scales, as the
    // decayed key channels of a real state have).
    m.rows = size_t(model.head_k) * 4;
    m.cols = size_t(model.head_v);
    std::vector<float> x(m.rows * m.cols);
    Rng rng(20260);
    for (size_t r = 0; r < m.rows; ++r) {
        const double scale = rng.lognormal(-2.0, 1.0);
        for (size_t i = 0; i < m.cols; ++i) x[r * m.cols + i] = float(rng.normal() * scale);
    }
    m.fp32_checkpoint_bytes = checkpoint_bytes(model, account_, StateCodec::fp32);
    for (const std::string& id : state_codec_ids()) {
        const StateCodec c = *parse_state_codec(id);
        m.random.push_back(
            {c, measure_codec(c, x.data(), m.rows, m.cols), checkpoint_bytes(model, account_, c)});
    }
    // The same codecs on the runnable model: the error on its real KDA states, and the next-token logits
    // after a resume from the compressed checkpoint against the exact one (core/cache/codec_effect.h).
    if (model::Model* runnable = serve::shared_model("tiny", 1, 64, &m.effect_error))
        m.effects = serve::measure_codec_effects(*runnable, m.effect_config, &m.effect_error);
}

void CheckpointsRun::finish() {
    if (!result_.refused()) {
        result_.intervals = intervals_.results();
        result_.capacities = capacities_.results();
        result_.policies = policies_.results();
        const CacheConfig& cache = result_.config.cache;
        const bool unbounded = cache.state_capacity == 0 && cache.kv_capacity_tokens == 0;
        if (loaded_.trace && unbounded && cache.page_size == 1)
            result_.reference = trace_reference_hits(*loaded_.trace, result_.config.policy.interval);
    }
    report_checkpoints(params_, result_, report_);
}

}  // namespace

std::unique_ptr<Run> start_checkpoints(const CheckpointsParams& p, const Params& raw) {
    return std::make_unique<CheckpointsRun>(p, raw);
}

}  // namespace k3
