// Module 4 `prefix`: the run. The runnable model, the seeded workload, a cold pass (no cache) that fixes
// every request's outputs and logits, then the workload served by each caching method with those
// outputs fed back (teacher forcing), and one resume off the chunk grid; the result is typed, the
// report is built from it (prefix_report.cpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <span>

#include "core/base/bytes.h"
#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/cache/shared_model.h"
#include "core/model/sampler.h"
#include "core/modules/prefix/prefix.h"

namespace k3 {

using serve::PrefixServer;
using serve::Reuse;
using serve::ServeOutcome;
using serve::ServerConfig;
using serve::ServeRequest;

namespace {

bool serves(PrefixWorkload w, PrefixScenario s) {
    switch (s) {
        case PrefixScenario::system: return w == PrefixWorkload::mix || w == PrefixWorkload::system;
        case PrefixScenario::chat: return w == PrefixWorkload::mix || w == PrefixWorkload::chat;
        case PrefixScenario::branch: return w == PrefixWorkload::mix || w == PrefixWorkload::branches;
    }
    return false;
}

constexpr PrefixScenario kScenarioOrder[kPrefixScenarios] = {PrefixScenario::system, PrefixScenario::chat,
                                                             PrefixScenario::branch};

}  // namespace

void for_each_prefix_request(const PrefixParams& p, const std::function<void(const PrefixRequestSize&)>& fn) {
    const uint64_t n = uint64_t(p.requests), shared = p.shared_tokens;
    const uint64_t user = p.user_tokens * 5 / 4 + 1, gen = uint64_t(p.gen);
    for (uint64_t i = 0; i < n; ++i) {
        // The system prompt, an earlier turn with its output, the document and question: reused from the
        // second request on.
        if (serves(p.workload, PrefixScenario::system))
            fn({PrefixScenario::system, i, shared + user, i ? shared : 0});
        const uint64_t turn = std::max<uint64_t>(shared / 2, 1) + user + i * (user + gen);
        if (serves(p.workload, PrefixScenario::chat))
            fn({PrefixScenario::chat, i, turn, i ? turn - user : 0});
        if (serves(p.workload, PrefixScenario::branch))
            fn({PrefixScenario::branch, i, shared + 2 * user, i ? shared + user : 0});
    }
}

PrefixEstimate estimate_prefix(const PrefixParams& p) {
    const uint64_t gen = uint64_t(p.gen);
    PrefixEstimate e;
    for_each_prefix_request(p, [&](const PrefixRequestSize& r) {
        const uint64_t prompt = r.prompt;
        e.prompt_tokens += prompt;
        e.fed_tokens += prompt + gen;
        e.max_fed = std::max(e.max_fed, prompt + gen);
        ++e.requests;
    });
    return e;
}

uint64_t prefix_pool_bytes(const ModelConfig& c, const PrefixEstimate& e, uint64_t states, uint32_t page) {
    const MemoryAccount a = account_memory(c);
    const uint64_t pages = e.fed_tokens / page + 2 * e.requests + 4;
    return states * a.state_bytes + pages * page * a.kv_bytes_per_token;
}

uint64_t prefix_state_grid(const PrefixParams& p) {
    uint64_t grid = std::min(p.interval, p.chunk);
    if (p.engine == CacheEngine::sglang) grid = std::min<uint64_t>(grid, p.chunked_prefill_tokens);
    if (p.engine == CacheEngine::vllm) grid = std::min<uint64_t>(grid, p.vllm_block_tokens);
    return grid;
}

uint64_t prefix_states(const PrefixEstimate& e, uint64_t interval, uint64_t capacity) {
    const uint64_t all = e.fed_tokens / std::max<uint64_t>(interval, 1) + 3 * e.requests + 4;
    return capacity ? std::min(all, capacity + e.max_fed / std::max<uint64_t>(interval, 1) + 6) : all;
}

namespace {

// Owner of the state slots the pool falsifiers take behind the tree's back.
constexpr OwnerId kFalsifierOwner = (OwnerId(1) << 40) - 7;

// One request served by a caching method, against its cold run.
PrefixRow served_row(const PrefixRequest& it, const ServeOutcome& o, int vocab) {
    PrefixRow r;
    r.kv_hit = o.kv_hit;
    r.state_hit = o.state_hit;
    r.resumed = o.resumed_at;
    r.recomputed = o.recomputed;
    r.prefilled = o.prefilled;
    r.cached = o.insert.len;
    r.branching = o.branching;
    r.steps = o.steps;
    r.borrowed = o.pages_borrowed;
    r.saved = o.checkpoints.size();
    r.saved_at = o.checkpoints;
    r.state_matches = o.state_matches;
    r.off_grid = o.split_off_grid;
    r.expected_exact = o.exactness == serve::ResumeExactness::bitwise;
    r.ms = o.prefill_ms + o.decode_ms;
    r.bitwise = bitwise_equal(o.logits, it.logits);
    const size_t V = size_t(vocab);
    for (size_t s = 0; s < it.outputs.size(); ++s) {
        const float* a = it.logits.data() + s * V;
        const float* b = o.logits.data() + s * V;
        for (size_t i = 0; i < V; ++i)
            r.max_diff = std::max(r.max_diff, std::fabs(double(a[i]) - double(b[i])));
        if (r.first_diff < 0 && model::argmax(b, vocab) != it.outputs[s]) r.first_diff = int(s);
    }
    const bool rounding = r.max_diff <= kPrefixTolerance * it.scale && r.first_diff < 0;
    r.exactness = r.bitwise  ? PrefixExactness::bitwise
                  : rounding ? PrefixExactness::within_rounding
                             : PrefixExactness::wrong;
    return r;
}

// The longest common prefix of `prompt` with an earlier request's prompt and outputs.
uint64_t common_prefix(const std::vector<int32_t>& prompt, const PrefixRequest& o) {
    const size_t n = std::min(prompt.size(), o.prompt.size() + o.outputs.size());
    size_t k = 0;
    while (k < n && prompt[k] == (k < o.prompt.size() ? o.prompt[k] : o.outputs[k - o.prompt.size()])) ++k;
    return k;
}

// A method's pool and server while it serves the workload.
struct Serving {
    std::unique_ptr<PagePool> pool;
    std::unique_ptr<PrefixServer> server;
    size_t next = 0;  // the next request to serve
};

class PrefixRun final : public StagedRun {
  public:
    PrefixRun(const PrefixParams& p, const Params& raw);

  private:
    void make_model();
    void build_workload();
    double cold(const Deadline& d);
    bool start_cold();
    void resolve(size_t i);
    void fill_no_cache();
    void start_method(PrefixMethod m);
    double serve_method(PrefixMethod m, const Deadline& d);
    void finish_method(PrefixMethod m);
    void probe_off_grid();
    std::string measure_probe(const PrefixRequest& it, uint64_t pos);
    ServerConfig config_for(const PrefixMethodInfo& m) const;
    bool stopped() const { return !result_.failed.empty() || result_.requests.empty(); }
    bool falsified(PrefixFalsify f) const { return params_.falsify == f; }
    void damage_after_request(Serving& sv, PrefixRow& row) const;

    PrefixParams params_;
    model::Model* model_ = nullptr;
    PrefixResult result_;
    size_t cold_next_ = 0;
    std::unique_ptr<PagePool> cold_pool_;
    std::unique_ptr<PrefixServer> cold_server_;
    std::array<Serving, kPrefixMethodCount> serving_;
};

PrefixRun::PrefixRun(const PrefixParams& p, const Params& raw) : StagedRun("prefix", raw), params_(p) {
    for (const PrefixMethodInfo& m : kPrefixMethods) {
        PrefixMethodResult& res = result_.method(m.method);
        res.info = &m;
        res.label = m.label;
        if (m.method == PrefixMethod::engine) {
            res.active = p.engine != CacheEngine::ideal;
            res.label = prefix_engine_label(p);
        }
    }
    add_step("making the runnable model", 1, [this] { make_model(); });
    add_step("building the workload", 0.2, [this] { build_workload(); });
    add_stage("cold runs (no cache)", 3, [this](const Deadline& d) { return cold(d); });
    for (const PrefixMethodInfo& m : kPrefixMethods)
        if (m.method != PrefixMethod::none && result_.method(m.method).active)
            add_stage("serving: " + result_.method(m.method).label, 2,
                      [this, k = m.method](const Deadline& d) { return serve_method(k, d); });
    add_step("resuming off the chunk grid", 0.5, [this] { probe_off_grid(); });
    add_step("report", 0.2, [this] { report_prefix(params_, result_, report_); });
}

void PrefixRun::make_model() {
    std::string err;
    model_ = serve::shared_model(default_runnable_id(), 1, int(params_.chunk), &err);
    if (!model_) return void(result_.failed = "the runnable model: " + err);
    result_.account = account_memory(model_->config());
}

void PrefixRun::build_workload() {
    if (!result_.failed.empty()) return;
    Rng rng(params_.seed * 7919 + 17);
    const uint64_t vocab = uint64_t(model_->vocab());
    auto tokens = [&](uint64_t n) {
        std::vector<int32_t> t;
        for (uint64_t i = 0; i < n; ++i) t.push_back(int32_t(rng.below(vocab)));
        return t;
    };
    const uint64_t shared = params_.shared_tokens;
    auto user = [&] {
        const uint64_t n = std::max<uint64_t>(
            1, uint64_t(std::llround(double(params_.user_tokens) * (0.75 + 0.5 * rng.uniform()))));
        return tokens(n);
    };
    const std::vector<int32_t> sys = tokens(shared), opening = tokens(std::max<uint64_t>(shared / 2, 1)),
                               doc = tokens(shared);
    const std::vector<int32_t> question = user();
    for (int i = 0; i < params_.requests; ++i)
        for (PrefixScenario s : kScenarioOrder) {
            if (!serves(params_.workload, s)) continue;
            PrefixRequest it;
            it.scenario = s;
            it.index = i;
            it.user = user();
            if (s == PrefixScenario::system) it.prompt = sys;
            if (s == PrefixScenario::chat && i == 0) it.prompt = opening;  // later turns: resolve()
            if (s == PrefixScenario::branch) {
                it.prompt = doc;
                it.prompt.insert(it.prompt.end(), question.begin(), question.end());
            }
            if (!(s == PrefixScenario::chat && i > 0))
                it.prompt.insert(it.prompt.end(), it.user.begin(), it.user.end());
            result_.requests.push_back(std::move(it));
        }
    if (falsified(PrefixFalsify::bad_prompt_token) && !result_.requests.empty())
        result_.requests[0].prompt[0] = int32_t(vocab);
}

ServerConfig PrefixRun::config_for(const PrefixMethodInfo& m) const {
    ServerConfig c;
    c.reuse = m.reuse;
    c.kv_only_start = params_.kv_only_start;
    c.cache.page_size = params_.page_size;
    c.cache.state_capacity = params_.state_capacity;
    c.policy.kind = m.policy;
    c.policy.interval = params_.interval;
    c.policy.chunk = params_.chunk;
    c.codec = m.reuse == Reuse::state ? params_.codec : StateCodec::fp32;
    if (m.method == PrefixMethod::engine) prefix_engine_config(params_, c);
    if (falsified(PrefixFalsify::engine_misplaced)) c.falsify = serve::ResumeFalsify::engine_misplaced;
    // The server applies each to the reuse it names only.
    if (falsified(PrefixFalsify::flip_resumed_state)) c.falsify = serve::ResumeFalsify::flip_state_bit;
    if (falsified(PrefixFalsify::zero_resumed_state)) c.falsify = serve::ResumeFalsify::zero_state;
    if (falsified(PrefixFalsify::exact_kv_only)) c.falsify = serve::ResumeFalsify::exact_kv_only;
    return c;
}

bool PrefixRun::start_cold() {
    const PrefixEstimate e = estimate_prefix(params_);
    const uint32_t P = params_.page_size;
    StaticSplitConfig sc;
    sc.page_tokens = P;
    sc.state_slots = 1;
    sc.budget_bytes = model_->pool_model().state_bytes() +
                      (e.max_fed / P + 2) * P * model_->pool_model().kv_bytes_per_token();
    PoolResult pr = make_static_pool(model_->pool_model(), sc, PoolOptions{true});
    if (!pr.pool) {
        result_.failed = "cold pool: " + pr.error;
        return false;
    }
    cold_pool_ = std::move(pr.pool);
    cold_server_ = std::make_unique<PrefixServer>(*model_, *cold_pool_, config_for(kPrefixMethods[0]));
    return true;
}

// Request i's prompt (a later chat turn: the previous turn's prompt, its answer and a new turn) and
// what it shares with the requests before it.
void PrefixRun::resolve(size_t i) {
    std::vector<PrefixRequest>& requests = result_.requests;
    PrefixRequest& it = requests[i];
    if (it.scenario == PrefixScenario::chat && it.index > 0) {
        const PrefixRequest* prev = nullptr;
        for (size_t j = i; j-- > 0;)
            if (requests[j].scenario == PrefixScenario::chat) {
                prev = &requests[j];
                break;
            }
        it.prompt = prev->prompt;
        it.prompt.insert(it.prompt.end(), prev->outputs.begin(), prev->outputs.end());
        it.prompt.insert(it.prompt.end(), it.user.begin(), it.user.end());
        it.decoded_from = prev->index == 0 ? prev->prompt.size() : prev->decoded_from;
    } else {
        it.decoded_from = it.prompt.size();
    }
    for (size_t j = 0; j < i; ++j)
        it.shared = std::max<uint64_t>(it.shared, common_prefix(it.prompt, requests[j]));
}

double PrefixRun::cold(const Deadline& d) {
    if (stopped()) return 1.0;
    if (!cold_server_ && !start_cold()) return 1.0;
    std::vector<PrefixRequest>& requests = result_.requests;
    while (cold_next_ < requests.size()) {
        resolve(cold_next_);
        PrefixRequest& it = requests[cold_next_];
        const ServeOutcome o = cold_server_->serve(ServeRequest{it.prompt, {}, params_.gen});
        if (!o.error.empty()) {
            result_.failed = "cold run of request " + std::to_string(cold_next_ + 1) + ": " + o.error;
            return 1.0;
        }
        it.outputs = o.outputs;
        it.logits = o.logits;
        for (float x : it.logits) it.scale = std::max(it.scale, std::fabs(double(x)));
        it.cold_ms = o.prefill_ms + o.decode_ms;
        ++cold_next_;
        if (d.passed()) break;
    }
    if (cold_next_ < requests.size()) return double(cold_next_) / double(requests.size());
    cold_server_.reset();
    cold_pool_.reset();
    fill_no_cache();
    return 1.0;
}

// The no-cache method is the cold run itself.
void PrefixRun::fill_no_cache() {
    PrefixMethodResult& none = result_.method(PrefixMethod::none);
    for (const PrefixRequest& it : result_.requests) {
        PrefixRow r;
        r.recomputed = it.prompt.size();
        r.bitwise = true;
        r.expected_exact = true;
        r.ms = it.cold_ms;
        none.ms += it.cold_ms;
        none.rows.push_back(r);
    }
    none.zero = true;
}

void PrefixRun::start_method(PrefixMethod m) {
    PrefixMethodResult& res = result_.method(m);
    Serving& sv = serving_[size_t(m)];
    const ServerConfig c = config_for(*res.info);
    const PrefixEstimate e = estimate_prefix(params_);
    const uint64_t states =
        c.reuse == Reuse::state ? prefix_states(e, prefix_state_grid(params_), c.cache.state_capacity) : 4;
    StaticSplitConfig sc;
    sc.page_tokens = params_.page_size;
    sc.state_slots = states;
    sc.budget_bytes = prefix_pool_bytes(model_->config(), e, states, params_.page_size);
    PoolResult pr = make_static_pool(model_->pool_model(), sc, PoolOptions{true});
    if (!pr.pool) return void(res.error = "pool: " + pr.error);
    sv.pool = std::move(pr.pool);
    if (std::string err = PrefixServer::check_config(*model_, *sv.pool, c); !err.empty())
        return void(res.error = err);
    sv.server = std::make_unique<PrefixServer>(*model_, *sv.pool, c);
}

double PrefixRun::serve_method(PrefixMethod m, const Deadline& d) {
    if (stopped()) return 1.0;
    PrefixMethodResult& res = result_.method(m);
    Serving& sv = serving_[size_t(m)];
    if (!sv.server && res.error.empty() && sv.next == 0) start_method(m);
    if (!res.error.empty()) return 1.0;
    const std::vector<PrefixRequest>& requests = result_.requests;
    while (sv.next < requests.size()) {
        const PrefixRequest& it = requests[sv.next];
        std::vector<int32_t> outputs = it.outputs;
        if (falsified(PrefixFalsify::bad_output_token) && m == PrefixMethod::kv_only) outputs[0] = -1;
        const ServeOutcome o = sv.server->serve(ServeRequest{it.prompt, outputs, 0});
        if (!o.error.empty()) {
            res.error = "request " + std::to_string(sv.next + 1) + ": " + o.error;
            return 1.0;
        }
        PrefixRow r = served_row(it, o, model_->vocab());
        res.prefill_ms += o.prefill_ms;
        res.decode_ms += o.decode_ms;
        damage_after_request(sv, r);
        r.held_states = sv.server->cache().stats().states;
        r.held_state_bytes = sv.server->held_state_bytes();
        r.held_kv_bytes = sv.server->held_kv_bytes();
        res.peak_bytes = std::max(res.peak_bytes, r.held_state_bytes + r.held_kv_bytes);
        res.ms += r.ms;
        res.rows.push_back(r);
        if (res.audit.empty()) {
            const std::string a = sv.server->audit();
            if (!a.empty()) res.audit = "after request " + std::to_string(sv.next + 1) + ": " + a;
        }
        ++sv.next;
        if (d.passed()) break;
    }
    if (sv.next < requests.size()) return double(sv.next) / double(requests.size());
    finish_method(m);
    return 1.0;
}

// The falsifiers that damage a method's cache or its records between two requests.
void PrefixRun::damage_after_request(Serving& sv, PrefixRow& row) const {
    RadixCache& tree = sv.server->cache();
    if (falsified(PrefixFalsify::states_dropped))
        for (const NodeView& n : tree.nodes())
            if (n.has_state) tree.drop_state(n.id);
    if (falsified(PrefixFalsify::kv_evicted)) tree.evict_kv(tree.stats().kv_tokens / 2);
    if (falsified(PrefixFalsify::recomputed_skewed) && row.resumed > 0) --row.recomputed;
    StateRef stray = kNoRef;
    if (falsified(PrefixFalsify::stray_state_slot) && sv.next == 0)
        (void)sv.pool->alloc_state(kFalsifierOwner, &stray);  // never freed
}

void PrefixRun::finish_method(PrefixMethod m) {
    PrefixMethodResult& res = result_.method(m);
    Serving& sv = serving_[size_t(m)];
    PrefixServer& s = *sv.server;
    res.end_stats = s.cache().stats();
    res.end_state_bytes = s.held_state_bytes();
    res.end_kv_bytes = s.held_kv_bytes();
    res.tree = compress_tree(s.cache().nodes(), 200);
    sv.server.reset();  // the tree lets go of every page and checkpoint
    StateRef leaked = kNoRef;
    if (falsified(PrefixFalsify::leaked_slot)) (void)sv.pool->alloc_state(kFalsifierOwner, &leaked);
    res.recount = recount_prefix_hits(params_, result_, m);
    const PoolStats z = sv.pool->stats();
    res.zero = z.kv_pages == 0 && z.states == 0 && sv.pool->owners().empty() && sv.pool->audit().empty();
    res.zero_detail = format_grouped(double(z.kv_pages)) + " KV pages, " + format_grouped(double(z.states)) +
                      " state slots, " + format_grouped(double(sv.pool->owners().size())) + " owners";
    sv.pool.reset();
}

void PrefixRun::probe_off_grid() {
    if (stopped()) return;
    PrefixOffGridProbe& probe = result_.probe;
    const uint64_t P = params_.page_size, chunk = params_.chunk;
    // The first page boundary past one chunk that is off the chunk grid.
    uint64_t pos = 0;
    for (uint64_t x = chunk + 1; x < 4 * chunk + P; ++x)
        if (x % P == 0 && x % chunk != 0) {
            pos = x;
            break;
        }
    if (pos && falsified(PrefixFalsify::probe_on_grid)) pos = chunk * P;
    if (!pos) {
        probe.note = "every page boundary is on the chunk grid (page " + std::to_string(P) +
                     " is a multiple of the chunk " + std::to_string(chunk) +
                     "), so no checkpoint can be off it";
        return;
    }
    for (const PrefixRequest& it : result_.requests)
        if (it.prompt.size() > pos + 1) return void(probe.note = measure_probe(it, pos));
    probe.note = "no prompt is longer than " + std::to_string(pos + 1) + " tokens: lengthen the workload";
}

// The state and KV after prefilling the first pos tokens, then the rest: what a resume from a
// checkpoint at pos computes. Returns why it could not be measured ("" when it was).
std::string PrefixRun::measure_probe(const PrefixRequest& it, uint64_t pos) {
    const uint32_t P = params_.page_size;
    PoolResult pr = model::make_model_pool(*model_, 2, it.prompt.size() + it.outputs.size() + P, P);
    if (!pr.pool) return pr.error;
    model::SequenceResult a = model_->new_sequence(*pr.pool, 1), b = model_->new_sequence(*pr.pool, 2);
    if (!a.seq || !b.seq) return "probe sequences: " + a.error + b.error;
    const std::span<const int32_t> prompt(it.prompt);
    std::vector<float> l, rows;
    std::string e = model_->prefill(*a.seq, prompt.first(size_t(pos)));
    if (e.empty()) e = model_->restore(*b.seq, model_->save(*a.seq));
    if (e.empty() && falsified(PrefixFalsify::probe_zero_state))
        e = model_->restore_state(*b.seq, std::vector<std::byte>(size_t(model_->pool_model().state_bytes())));
    if (e.empty()) e = model_->prefill(*b.seq, prompt.subspan(size_t(pos)), &l);
    for (size_t s = 0; e.empty() && s < it.outputs.size(); ++s) {
        rows.insert(rows.end(), l.begin(), l.end());
        if (s + 1 < it.outputs.size()) e = model_->decode(*b.seq, it.outputs[s], &l);
    }
    if (!e.empty()) return e;
    PrefixOffGridProbe& probe = result_.probe;
    probe.done = true;
    probe.pos = pos;
    probe.bitwise = bitwise_equal(rows.data(), it.logits.data(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i)
        probe.diff = std::max(probe.diff, std::fabs(double(rows[i]) - double(it.logits[i])));
    probe.scale = it.scale;
    return {};
}

}  // namespace

std::unique_ptr<Run> start_prefix(const PrefixParams& p, const Params& raw) {
    return std::make_unique<PrefixRun>(p, raw);
}

}  // namespace k3
