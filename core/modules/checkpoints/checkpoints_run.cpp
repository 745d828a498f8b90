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
    c.policy.retention_interval = segment_tokens(p);
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
    void load_vllm();
    double replay_vllm(const Deadline& d);
    double replay_main(const Deadline& d);
    void start_sglang();
    double replay_sglang(const Deadline& d);
    void finish_sglang();
    void finish_main();
    void plan_sweeps();
    void plan_interval_sweep();
    void measure_codecs();
    void finish();
    bool falsified(CheckpointsFalsify f) const { return params_.falsify == f; }
    void damage_tree_midway(RadixCache& c) const;
    void damage_after_replay(RadixCache& c);

    CheckpointsParams params_;
    MemoryAccount account_;
    LoadedWorkload loaded_;
    std::unique_ptr<WorkloadReplay> main_;
    std::unique_ptr<SglangReplay> sglang_;  // engine=sglang replaces main_
    size_t sglang_next_ = 0;
    std::unique_ptr<VllmKvCacheManager> vllm_;  // engine=vllm, instead of main_ and the sweeps
    size_t vllm_next_ = 0;
    ReplayQueue intervals_, capacities_, policies_;
    std::shared_ptr<const Workload> capacity_workload_;  // what the capacity sweep replays
    CheckpointsResult result_;
};

CheckpointsRun::CheckpointsRun(const CheckpointsParams& p, const Params& raw)
    : StagedRun("checkpoints", raw), params_(p) {
    result_.model = *model_preset(p.preset);
    account_ = account_memory(result_.model);
    result_.config = replay_config(p, result_.model, account_);

    const auto sweep = [this](ReplayQueue& q, const std::shared_ptr<const Workload>& w) {
        return [this, &q, &w](const Deadline& d) {
            return result_.refused() || q.empty() ? 1.0 : q.step(*w, d);
        };
    };
    add_step("loading the workload", 1, [this] { load(); });
    add_stage("replaying the workload", 4, [this](const Deadline& d) { return replay_main(d); });
    add_step("checking the tree", 1, [this] { finish_main(); });
    add_stage("sweeping checkpoint intervals", 4, sweep(intervals_, loaded_.workload));
    add_stage("sweeping state capacity", 6, sweep(capacities_, capacity_workload_));
    add_stage("comparing policies", 4, sweep(policies_, loaded_.workload));
    add_step("measuring codecs", 0.5, [this] { measure_codecs(); });
    add_step("report", 0.5, [this] { finish(); });
}

void CheckpointsRun::load() {
    WorkloadSpec spec = params_.workload;
    if (falsified(CheckpointsFalsify::missing_trace)) spec.trace = "k3-falsified/no-such-trace.jsonl";
    loaded_ = load_workload(spec);
    if (!loaded_.workload) {
        result_.load_error = loaded_.error;
        return;
    }
    const Workload& w = *loaded_.workload;
    result_.workload_name = w.name;
    result_.workload_requests = w.requests.size();
    result_.from_trace = loaded_.trace != nullptr;
    result_.bundled_trace = loaded_.bundled;
    if (params_.engine == CacheEngine::vllm) return load_vllm();
    if (params_.engine == CacheEngine::sglang) return start_sglang();
    ReplayConfig headline = result_.config;
    headline.record_requests = true;  // the per-request hits the recount is compared with
    if (falsified(CheckpointsFalsify::capacity_lie)) headline.cache.state_capacity *= 2;
    main_ = std::make_unique<WorkloadReplay>(w, headline);
    capacity_workload_ = loaded_.workload;
    if (falsified(CheckpointsFalsify::sweep_drops_request) && !w.requests.empty()) {
        auto fewer = std::make_shared<Workload>(w);
        fewer->requests.pop_back();
        capacity_workload_ = std::move(fewer);
    }
    plan_sweeps();
}

void CheckpointsRun::load_vllm() {
    CheckpointsVllm& v = result_.vllm.emplace(vllm_setup(params_));
    vllm_ = std::make_unique<VllmKvCacheManager>(v.config, vllm_fault(params_.falsify));
    if (result_.bundled_trace) v.reference = vllm_reference_row(v.config);
}

double CheckpointsRun::replay_vllm(const Deadline& d) {
    const Stopwatch sw;
    const std::vector<Request>& requests = loaded_.workload->requests;
    while (vllm_next_ < requests.size()) {
        const Request& q = requests[vllm_next_++];
        vllm_->serve(q.tokens, q.prompt_len);
        if ((vllm_next_ & 255) == 0 && d.passed()) break;
    }
    result_.vllm->replay_ms += sw.ms();
    if (vllm_next_ < requests.size()) return double(vllm_next_) / double(requests.size());
    result_.vllm->totals = vllm_->totals();
    result_.vllm->audit = vllm_->audit();
    vllm_.reset();
    return 1.0;
}

double CheckpointsRun::replay_main(const Deadline& d) {
    if (result_.refused()) return 1.0;
    if (sglang_) return replay_sglang(d);
    if (vllm_) return replay_vllm(d);
    if (!main_) return 1.0;
    const Stopwatch sw;
    const size_t n = loaded_.workload->requests.size();
    while (!main_->done()) {
        main_->run(nullptr, 1);
        if (main_->processed() == n / 2) damage_tree_midway(main_->cache());
        const CacheStats& s = main_->cache().stats();
        result_.max_states_held = std::max(result_.max_states_held, s.states);
        result_.max_kv_held = std::max(result_.max_kv_held, s.kv_tokens);
        if ((main_->processed() & 63) == 0 && d.passed()) break;
    }
    result_.replay_ms += sw.ms();
    return n ? double(main_->processed()) / double(n) : 1.0;
}

// The falsifiers that damage the headline tree while it serves (between two requests).
void CheckpointsRun::damage_tree_midway(RadixCache& c) const {
    if (falsified(CheckpointsFalsify::kv_evicted)) c.evict_kv(c.stats().kv_tokens / 2);
    if (falsified(CheckpointsFalsify::states_dropped))
        for (const NodeView& n : c.nodes())
            if (n.has_state) c.drop_state(n.id);
    if (falsified(CheckpointsFalsify::tree_miscount)) c.miscount_kv_token();
}

// The falsifiers that damage what the headline replay left: its counters, its leases.
void CheckpointsRun::damage_after_replay(RadixCache& c) {
    if (falsified(CheckpointsFalsify::recompute_skewed) && result_.totals.recomputed_tokens > 0)
        --result_.totals.recomputed_tokens;
    const std::vector<Request>& requests = loaded_.workload->requests;
    if (falsified(CheckpointsFalsify::leaked_lease) && !requests.empty())
        (void)c.acquire(*requests.back().tokens, requests.back().prompt_len);  // never released
}

void CheckpointsRun::finish_main() {
    if (result_.refused() || (!main_ && !sglang_)) return;
    RadixCache& c = sglang_ ? sglang_->cache() : main_->cache();
    if (sglang_) {
        finish_sglang();
    } else {
        result_.totals = main_->totals();
        result_.replay_hits = main_->hits();
    }
    result_.stats = c.stats();
    result_.audit = c.audit();
    damage_after_replay(c);
    const std::vector<NodeView> all = c.nodes();
    result_.view = compress_tree(all, 400);
    result_.tree = summarise_tree(all);
    // Everything a request held is released; dropping the cache must bring every count to zero.
    result_.leases_after_replay = c.stats().leases;
    c.clear();
    result_.after_clear = c.stats();
    main_.reset();
    sglang_.reset();
}

// engine=sglang: SGLang's own replay of the same requests (core/cache/engine_sglang.h).
void CheckpointsRun::start_sglang() {
    sglang_ = std::make_unique<SglangReplay>(sglang_config(params_, result_.config.state_bytes));
    using F = CheckpointsFalsify;
    if (falsified(F::sglang_slot_leak)) sglang_->slip(SglangSlip::mamba_slot_leak);
    if (falsified(F::sglang_kv_tail_kept)) sglang_->slip(SglangSlip::kv_tail_kept);
    if (falsified(F::sglang_lock_left)) sglang_->slip(SglangSlip::lock_left);
}

double CheckpointsRun::replay_sglang(const Deadline& d) {
    const Stopwatch sw;
    const std::vector<Request>& requests = loaded_.workload->requests;
    const size_t n = requests.size();
    while (sglang_next_ < n) {
        const Request& q = requests[sglang_next_++];
        const SglangRequest h = sglang_->serve(q.tokens, q.prompt_len);
        result_.replay_hits.push_back({h.kv_hit, h.state_hit});
        if (sglang_next_ == n / 2) damage_tree_midway(sglang_->cache());
        const CacheStats& s = sglang_->cache().stats();
        result_.max_states_held = std::max(result_.max_states_held, s.states);
        result_.max_kv_held = std::max(result_.max_kv_held, s.kv_tokens);
        if ((sglang_next_ & 63) == 0 && d.passed()) break;
    }
    result_.replay_ms += sw.ms();
    return n ? double(sglang_next_) / double(n) : 1.0;
}

void CheckpointsRun::finish_sglang() {
    sglang_->sanity_check();  // at the end, beside every 2,000 requests
    SglangOutcome o;
    o.config = sglang_->config();
    o.totals = sglang_->totals();
    o.slots = sglang_->mamba_slots_check();
    o.kv = sglang_->kv_check();
    o.locks = sglang_->locks_check();
    const CacheStats& s = sglang_->cache().stats();
    o.states_in_tree = s.states;
    // The declared configuration (no parameter turns branching-point tracking off: SGLang has none).
    SglangConfig declared = o.config;
    declared.track_branching = true;
    if (loaded_.bundled) o.reference = sglang_reference_row(declared);
    result_.totals = sglang_headline_totals(o.totals, s, result_.config.kv_bytes_per_token);
    result_.sglang = std::move(o);
}

void CheckpointsRun::plan_sweeps() {
    if (!params_.sweeps || params_.engine != CacheEngine::ideal) return;
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
        if (falsified(CheckpointsFalsify::sweep_wrong_interval) && x == intervals.front())
            ic.policy.interval = uint32_t(intervals.back());
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
        const bool flip = falsified(CheckpointsFalsify::codec_bit_random);
        m.random.push_back(
            {c, measure_codec(c, x.data(), m.rows, m.cols, flip), checkpoint_bytes(model, account_, c)});
    }
    m.effect_config.flip_encoded_bit = falsified(CheckpointsFalsify::codec_bit_runnable);
    m.effect_config.flip_checkpoint_bit = falsified(CheckpointsFalsify::checkpoint_bit);
    if (falsified(CheckpointsFalsify::no_codec_prompts)) m.effect_config.prompts = 0;
    // The same codecs on the runnable model: the error on its real KDA states, and the next-token logits
    // after a resume from the compressed checkpoint against the exact one (core/cache/codec_effect.h).
    if (model::Model* runnable = serve::shared_model(default_runnable_id(), 1, 64, &m.effect_error))
        m.effects = serve::measure_codec_effects(*runnable, m.effect_config, &m.effect_error);
}

void CheckpointsRun::finish() {
    if (!result_.refused() && !result_.vllm) {
        result_.intervals = intervals_.results();
        result_.capacities = capacities_.results();
        result_.policies = policies_.results();
        const CacheConfig& cache = result_.config.cache;
        const bool unbounded = cache.state_capacity == 0 && cache.kv_capacity_tokens == 0;
        const bool ideal = params_.engine == CacheEngine::ideal;  // the recounts follow the ideal policies
        if (ideal && loaded_.trace && unbounded && cache.page_size == 1)
            result_.reference = trace_reference_hits(*loaded_.trace, result_.config.policy.interval);
        if (ideal) result_.recount = recount_hits(*loaded_.workload, result_.config);
    }
    report_checkpoints(params_, result_, report_);
}

}  // namespace

std::unique_ptr<Run> start_checkpoints(const CheckpointsParams& p, const Params& raw) {
    return std::make_unique<CheckpointsRun>(p, raw);
}

}  // namespace k3
