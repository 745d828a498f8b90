// Module 4 `prefix`: dual-granularity prefix caching on the runnable model. A seeded workload of
// requests sharing prefixes (system prompt, multi-turn chat, branches) is served five ways through
// the real-state store (core/cache/prefix_server.h) and every output is compared with the same request
// run cold.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/cache/prefix_server.h"
#include "core/cache/shared_model.h"
#include "core/cache/tree_view.h"
#include "core/experiments/registry.h"
#include "core/modules/shared/tree_report.h"
#include "core/model/accounting.h"
#include "core/model/sampler.h"

namespace k3 {

namespace {

using serve::PrefixServer;
using serve::Reuse;
using serve::ServeOutcome;
using serve::ServerConfig;
using serve::ServeRequest;

const std::vector<std::string> kWorkloads = {"mix", "system", "chat", "branches"};
const std::vector<std::string> kWorkloadLabels = {"all three, interleaved", "shared system prompt",
                                                  "multi-turn chat", "branches off one document"};
const std::vector<std::string> kScenario = {"system prompt", "chat", "branch"};
constexpr uint64_t kMaxWorkloadTokens = 20000;  // prompt tokens of the cold pass (the run makes five passes)
constexpr uint64_t kMaxPoolBytes = 192ull << 20;  // backing storage of one method's pool
constexpr double kTolerance = 1e-4;               // |logit diff| <= kTolerance x largest |logit|: rounding

// The methods compared, in table order. The first is the cold run itself.
struct Method {
    const char* id;
    const char* label;
    Reuse reuse;
    PolicyKind policy;
};
const Method kMethods[] = {
    {"none", "no cache", Reuse::none, PolicyKind::interval},
    {"kv_only", "KV-only reuse (wrong)", Reuse::kv_only, PolicyKind::interval},
    {"end", "state at request end only", Reuse::state, PolicyKind::end},
    {"interval", "states every N tokens", Reuse::state, PolicyKind::interval},
    {"branch", "states at branch points", Reuse::state, PolicyKind::branch},
};
constexpr size_t kNumMethods = sizeof(kMethods) / sizeof(kMethods[0]);

std::vector<ParamSpec> prefix_params() {
    return {
        ParamSpec::choice("workload", "Workload", kWorkloads, "mix", kWorkloadLabels)
            .in_group("Workload")
            .describe("Requests sharing a system prompt with different questions; a chat whose next turn "
                      "holds the previous turn and its answer; branches off one document and question. "
                      "\"mix\" interleaves the three."),
        ParamSpec::integer("requests", "Requests per scenario", "requests", 1, 32, 3)
            .in_group("Workload")
            .describe("Requests of each scenario (chat: turns)."),
        ParamSpec::integer("shared_tokens", "Shared prefix", "tokens", 1, 2048, 64)
            .log()
            .in_group("Workload")
            .describe("The system prompt, the document of the branches; the chat opens with half of it."),
        ParamSpec::integer("user_tokens", "Unique part per request", "tokens", 1, 1024, 12)
            .log()
            .in_group("Workload")
            .describe("Each question, turn or branch: this many tokens, +-25 % (seeded)."),
        ParamSpec::integer("gen", "Output tokens", "tokens", 1, 64, 3)
            .in_group("Workload")
            .describe("Tokens each request generates (greedy in the cold run; the other methods are fed "
                      "the cold run's tokens so that every step compares like with like)."),
        ParamSpec::seed("Seed of the workload's tokens (the tiny model's weights are fixed, seed 1).")
            .in_group("Workload"),
        ParamSpec::integer("interval", "Checkpoint interval N", "tokens", 1, 4096, 64)
            .log()
            .in_group("Cache")
            .describe("\"States every N tokens\" takes one at every multiple of N: a multiple of the kernel "
                      "chunk resumes bitwise, any other only within rounding (the run says which)."),
        ParamSpec::integer("chunk", "Kernel chunk", "tokens", 16, 128, 64)
            .log()
            .in_group("Cache")
            .describe("Chunk of the chunked KDA prefill kernel (FLA uses 64). Resumes on this grid are "
                      "bitwise; branch points are floored to it."),
        ParamSpec::integer("page_size", "KV page size", "tokens", 1, 64, 1)
            .log()
            .in_group("Cache")
            .describe(
                "Tokens per KV page; the tree caches whole pages, matches page by page and keeps states only "
                "on page boundaries. 1 is SGLang's default (its no_buffer mode needs it): a request's end "
                "state then sits exactly at its end."),
        ParamSpec::integer("state_capacity", "State capacity", "states", 0, 4096, 0)
            .in_group("Cache")
            .describe("Checkpoints the tree may hold (LRU); 0 = unbounded."),
        ParamSpec::choice("kv_only_start", "KV-only: recurrent state", {"zero", "stale"}, "zero",
                          {"zero (has_initial_states false)", "stale (previous request's)"})
            .in_group("Cache")
            .describe("What the wrong method starts the KDA layers from at its KV match: zeros (vLLM #43090) "
                      "or the state the previous request left in the slot (SGLang #22493)."),
        ParamSpec::choice("codec", "Checkpoint codec", state_codec_ids(), "fp32")
            .in_group("Cache")
            .describe("How checkpoints are stored: fp32 in pool state slots (exact), or bf16 / fp16 / int8 "
                      "encoded outside the pool (smaller, resumes no longer exact; module 5)."),
    };
}

// Rough upper bounds of a run's size, from the parameters alone (validate, pool sizing).
struct Estimate {
    uint64_t prompt_tokens = 0, max_fed = 0, requests = 0, fed_tokens = 0;
};
Estimate estimate(const Params& p) {
    const std::string& w = p.str("workload");
    const uint64_t n = uint64_t(p.i("requests")), S = uint64_t(p.i("shared_tokens"));
    const uint64_t U = uint64_t(p.i("user_tokens")) * 5 / 4 + 1, G = uint64_t(p.i("gen"));
    Estimate e;
    auto add = [&](uint64_t prompt) {
        e.prompt_tokens += prompt;
        e.fed_tokens += prompt + G;
        e.max_fed = std::max(e.max_fed, prompt + G);
        ++e.requests;
    };
    for (uint64_t i = 0; i < n; ++i) {
        if (w == "mix" || w == "system") add(S + U);
        if (w == "mix" || w == "chat") add(std::max<uint64_t>(S / 2, 1) + U + i * (U + G));
        if (w == "mix" || w == "branches") add(S + 2 * U);
    }
    return e;
}

uint64_t pool_bytes_for(const ModelConfig& c, const Estimate& e, uint64_t states, uint32_t page) {
    const MemoryAccount a = account_memory(c);
    const uint64_t pages = e.fed_tokens / page + 2 * e.requests + 4;
    return states * a.state_bytes + pages * page * a.kv_bytes_per_token;
}

uint64_t states_for(const Estimate& e, uint64_t interval, uint64_t capacity) {
    const uint64_t all = e.fed_tokens / std::max<uint64_t>(interval, 1) + 3 * e.requests + 4;
    return capacity ? std::min(all, capacity + e.max_fed / std::max<uint64_t>(interval, 1) + 6) : all;
}

std::vector<ParamIssue> validate_prefix(const Params& p) {
    std::vector<ParamIssue> out;
    const uint64_t I = uint64_t(p.i("interval")), C = uint64_t(p.i("chunk")), P = uint64_t(p.i("page_size"));
    if (I % P != 0)
        out.push_back({ParamIssue::error, "interval",
                       "interval " + p.text("interval") + " is not a multiple of the page size " +
                           p.text("page_size") + ": checkpoints sit on page boundaries"});
    else if (I % C != 0)
        out.push_back(
            {ParamIssue::warning, "interval",
             "interval " + p.text("interval") + " is off the kernel chunk grid (" + p.text("chunk") +
                 "): resumes are exact only within rounding, and requests split their own prefill"});
    const Estimate e = estimate(p);
    if (e.prompt_tokens > kMaxWorkloadTokens)
        out.push_back({ParamIssue::error, "requests",
                       "the workload has up to " + format_grouped(double(e.prompt_tokens)) +
                           " prompt tokens, served five times on the tiny model; the limit is " +
                           format_grouped(double(kMaxWorkloadTokens)) +
                           " (fewer requests or shorter prompts)"});
    const ModelConfig tiny = *model_preset("tiny");
    const uint64_t bytes = pool_bytes_for(
        tiny, e, states_for(e, std::min(I, C), uint64_t(p.integer("state_capacity"))), uint32_t(P));
    if (bytes > kMaxPoolBytes)
        out.push_back({ParamIssue::error, "interval",
                       "the checkpoints and KV of this workload need up to " + format_bytes(double(bytes)) +
                           " of pool, over the " + format_bytes(double(kMaxPoolBytes)) +
                           " limit: raise the interval, set a state capacity or shorten the workload"});
    return out;
}

// One request of the workload. Chat turns are resolved during the cold pass: a turn's prompt holds
// the previous turn's prompt and output.
struct Item {
    int scenario = 0, index = 0;
    std::vector<int32_t> user;     // this request's own tokens
    std::vector<int32_t> prompt;   // resolved
    uint64_t decoded_from = 0;     // first prompt position holding an earlier request's output
    std::vector<int32_t> outputs;  // the cold run's (greedy)
    std::vector<float> logits;     // the cold run's
    double scale = 0;              // largest |cold logit|
    double cold_ms = 0;
    uint64_t shared = 0;  // longest common prefix with an earlier request's tokens
};

struct Row {
    uint64_t kv_hit = 0, state_hit = 0, resumed = 0, recomputed = 0, borrowed = 0, saved = 0;
    bool state_matches = true, off_grid = false, bitwise = false, expected_exact = false;
    double max_diff = 0;
    int first_diff = -1;  // first output step whose greedy token differs from the cold run
    uint64_t held_states = 0, held_state_bytes = 0, held_kv_bytes = 0;
    double ms = 0;
};

struct MethodRun {
    const Method* m = nullptr;
    std::vector<Row> rows;
    std::unique_ptr<PagePool> pool;
    std::unique_ptr<PrefixServer> server;
    // Provenance, to say which outputs must be bitwise: a page's rows and a checkpoint's state were
    // computed exactly as a cold prefill computes them (on the chunk grid, from an exact start).
    std::vector<uint8_t> page_exact;
    std::vector<uint8_t> cp_exact;
    size_t next = 0;
    std::string audit, error, zero_detail;
    bool zero = false;
    CacheStats end_stats;
    uint64_t end_state_bytes = 0, end_kv_bytes = 0, peak_bytes = 0;
    CompressedTree tree;
    double ms = 0, prefill_ms = 0, decode_ms = 0;
};

class PrefixRun : public StagedRun {
  public:
    explicit PrefixRun(const Params& p);

  private:
    void make_model();
    void build_workload();
    double cold(const Deadline& d);
    double serve_method(MethodRun& mr, const Deadline& d);
    void start_method(MethodRun& mr);
    void finish_method(MethodRun& mr);
    void probe_off_grid();
    void report_all();
    ServerConfig config_for(const Method& m) const;

    Params p_;
    model::Model* model_ = nullptr;
    std::string failed_;
    std::vector<Item> items_;
    size_t cold_next_ = 0;
    std::unique_ptr<PagePool> cold_pool_;
    std::unique_ptr<PrefixServer> cold_server_;
    std::vector<MethodRun> runs_;
    uint32_t P_ = 16, chunk_ = 64;
    // Off-grid probe.
    bool probe_done_ = false, probe_bitwise_ = false;
    uint64_t probe_pos_ = 0;
    double probe_diff_ = 0, probe_scale_ = 0;
    std::string probe_note_;
};

PrefixRun::PrefixRun(const Params& p) : StagedRun("prefix", p), p_(p) {
    P_ = uint32_t(p.i("page_size"));
    chunk_ = uint32_t(p.i("chunk"));
    add_step("making the tiny model", 1, [this] { make_model(); });
    add_step("building the workload", 0.2, [this] { build_workload(); });
    add_stage("cold runs (no cache)", 3, [this](const Deadline& d) { return cold(d); });
    runs_.resize(kNumMethods);
    for (size_t k = 1; k < kNumMethods; ++k) {
        runs_[k].m = &kMethods[k];
        add_stage(std::string("serving: ") + kMethods[k].label, 2,
                  [this, k](const Deadline& d) { return serve_method(runs_[k], d); });
    }
    runs_[0].m = &kMethods[0];
    add_step("resuming off the chunk grid", 0.5, [this] { probe_off_grid(); });
    add_step("report", 0.2, [this] { report_all(); });
}

void PrefixRun::make_model() {
    std::string err;
    model_ = serve::shared_model("tiny", 1, int(chunk_), &err);
    if (!model_) failed_ = "the tiny model: " + err;
}

void PrefixRun::build_workload() {
    if (!failed_.empty()) return;
    Rng rng(uint64_t(p_.integer("seed")) * 7919 + 17);
    const int V = model_->vocab();
    auto tokens = [&](uint64_t n) {
        std::vector<int32_t> t;
        for (uint64_t i = 0; i < n; ++i) t.push_back(int32_t(rng.below(uint64_t(V))));
        return t;
    };
    const uint64_t U = uint64_t(p_.i("user_tokens")), S = uint64_t(p_.i("shared_tokens"));
    auto user = [&] {
        const uint64_t n =
            std::max<uint64_t>(1, uint64_t(std::llround(double(U) * (0.75 + 0.5 * rng.uniform()))));
        return tokens(n);
    };
    const std::vector<int32_t> sys = tokens(S), opening = tokens(std::max<uint64_t>(S / 2, 1)),
                               doc = tokens(S);
    const std::vector<int32_t> question = user();
    const std::string& w = p_.str("workload");
    const bool on[3] = {w == "mix" || w == "system", w == "mix" || w == "chat",
                        w == "mix" || w == "branches"};
    const int n = p_.i("requests");
    for (int i = 0; i < n; ++i)
        for (int s = 0; s < 3; ++s) {
            if (!on[s]) continue;
            Item it;
            it.scenario = s;
            it.index = i;
            it.user = user();
            if (s == 0) it.prompt = sys;
            if (s == 1 && i == 0) it.prompt = opening;  // later turns are resolved in the cold pass
            if (s == 2) {
                it.prompt = doc;
                it.prompt.insert(it.prompt.end(), question.begin(), question.end());
            }
            if (!(s == 1 && i > 0)) it.prompt.insert(it.prompt.end(), it.user.begin(), it.user.end());
            items_.push_back(std::move(it));
        }
}

ServerConfig PrefixRun::config_for(const Method& m) const {
    ServerConfig c;
    c.reuse = m.reuse;
    c.kv_only_start =
        p_.str("kv_only_start") == "stale" ? serve::KvOnlyStart::stale : serve::KvOnlyStart::zero;
    c.cache.page_size = P_;
    c.cache.state_capacity = uint64_t(p_.integer("state_capacity"));
    c.policy.kind = m.policy;
    c.policy.interval = uint32_t(p_.i("interval"));
    c.policy.chunk = chunk_;
    c.codec = m.reuse == Reuse::state ? *parse_state_codec(p_.str("codec")) : StateCodec::fp32;
    return c;
}

double PrefixRun::cold(const Deadline& d) {
    if (!failed_.empty() || items_.empty()) return 1.0;
    const int gen = p_.i("gen");
    if (!cold_server_) {
        const Estimate e = estimate(p_);
        StaticSplitConfig sc;
        sc.page_tokens = P_;
        sc.state_slots = 1;
        sc.budget_bytes = model_->pool_model().state_bytes() +
                          (e.max_fed / P_ + 2) * P_ * model_->pool_model().kv_bytes_per_token();
        PoolResult pr = make_static_pool(model_->pool_model(), sc, PoolOptions{true});
        if (!pr.pool) {
            failed_ = "cold pool: " + pr.error;
            return 1.0;
        }
        cold_pool_ = std::move(pr.pool);
        cold_server_ = std::make_unique<PrefixServer>(*model_, *cold_pool_, config_for(kMethods[0]));
    }
    while (cold_next_ < items_.size()) {
        Item& it = items_[cold_next_];
        if (it.scenario == 1 && it.index > 0) {  // the next turn: previous prompt + its answer + a new turn
            const Item* prev = nullptr;
            for (size_t j = cold_next_; j-- > 0;)
                if (items_[j].scenario == 1) {
                    prev = &items_[j];
                    break;
                }
            it.prompt = prev->prompt;
            it.prompt.insert(it.prompt.end(), prev->outputs.begin(), prev->outputs.end());
            it.prompt.insert(it.prompt.end(), it.user.begin(), it.user.end());
            it.decoded_from = prev->index == 0 ? prev->prompt.size() : prev->decoded_from;
        } else {
            it.decoded_from = it.prompt.size();
        }
        for (size_t j = 0; j < cold_next_; ++j) {
            const Item& o = items_[j];
            const size_t n = std::min(it.prompt.size(), o.prompt.size() + o.outputs.size());
            size_t k = 0;
            while (k < n &&
                   it.prompt[k] == (k < o.prompt.size() ? o.prompt[k] : o.outputs[k - o.prompt.size()]))
                ++k;
            it.shared = std::max<uint64_t>(it.shared, k);
        }
        const ServeOutcome o = cold_server_->serve(ServeRequest{it.prompt, {}, gen});
        if (!o.error.empty()) {
            failed_ = "cold run of request " + std::to_string(cold_next_ + 1) + ": " + o.error;
            return 1.0;
        }
        it.outputs = o.outputs;
        it.logits = o.logits;
        for (float x : it.logits) it.scale = std::max(it.scale, std::fabs(double(x)));
        it.cold_ms = o.prefill_ms + o.decode_ms;
        ++cold_next_;
        if (d.passed()) break;
    }
    if (cold_next_ < items_.size()) return double(cold_next_) / double(items_.size());
    cold_server_.reset();
    cold_pool_.reset();
    return 1.0;
}

void PrefixRun::start_method(MethodRun& mr) {
    const ServerConfig c = config_for(*mr.m);
    const Estimate e = estimate(p_);
    const uint64_t states =
        mr.m->reuse == Reuse::state
            ? states_for(e, std::min<uint64_t>(c.policy.interval, chunk_), c.cache.state_capacity)
            : 4;
    StaticSplitConfig sc;
    sc.page_tokens = P_;
    sc.state_slots = states;
    sc.budget_bytes = pool_bytes_for(model_->config(), e, states, P_);
    PoolResult pr = make_static_pool(model_->pool_model(), sc, PoolOptions{true});
    if (!pr.pool) {
        mr.error = "pool: " + pr.error;
        return;
    }
    mr.pool = std::move(pr.pool);
    if (std::string err = PrefixServer::check_config(*model_, *mr.pool, c); !err.empty()) {
        mr.error = err;
        return;
    }
    mr.server = std::make_unique<PrefixServer>(*model_, *mr.pool, c);
}

double PrefixRun::serve_method(MethodRun& mr, const Deadline& d) {
    if (!failed_.empty() || items_.empty()) return 1.0;
    if (!mr.server && mr.error.empty() && mr.next == 0) start_method(mr);
    if (!mr.error.empty()) return 1.0;
    const int V = model_->vocab();
    const ServerConfig& c = mr.server->config();
    const uint64_t chunk = chunk_;
    while (mr.next < items_.size()) {
        const Item& it = items_[mr.next];
        const ServeOutcome o = mr.server->serve(ServeRequest{it.prompt, it.outputs, 0});
        if (!o.error.empty()) {
            mr.error = "request " + std::to_string(mr.next + 1) + ": " + o.error;
            return 1.0;
        }
        Row r;
        r.kv_hit = o.kv_hit;
        r.state_hit = o.state_hit;
        r.resumed = o.resumed_at;
        r.recomputed = o.recomputed;
        r.borrowed = o.pages_borrowed;
        r.saved = o.checkpoints.size();
        r.state_matches = o.state_matches;
        r.off_grid = o.split_off_grid;
        r.ms = o.prefill_ms + o.decode_ms;
        mr.prefill_ms += o.prefill_ms;
        mr.decode_ms += o.decode_ms;
        r.bitwise = o.logits.size() == it.logits.size() &&
                    std::memcmp(o.logits.data(), it.logits.data(), o.logits.size() * sizeof(float)) == 0;
        for (size_t s = 0; s < it.outputs.size(); ++s) {
            const float* a = it.logits.data() + s * size_t(V);
            const float* b = o.logits.data() + s * size_t(V);
            for (int i = 0; i < V; ++i)
                r.max_diff = std::max(r.max_diff, std::fabs(double(a[i]) - double(b[i])));
            if (r.first_diff < 0 && model::argmax(b, V) != it.outputs[s]) r.first_diff = int(s);
        }
        // Provenance: exact start (nothing reused, or an fp32 checkpoint on the chunk grid computed
        // exactly, with exactly computed pages), then exact prefill up to the prompt end or the first
        // split off the grid.
        auto flag = [](const std::vector<uint8_t>& v, uint64_t i) {
            return i < v.size() && v[size_t(i)] != 0;
        };
        bool start = r.resumed == 0;
        if (!start && c.reuse == Reuse::state && c.codec == StateCodec::fp32 && r.resumed % chunk == 0 &&
            flag(mr.cp_exact, o.resumed_from)) {
            start = true;
            for (uint64_t i = 0; i < o.pages_borrowed; ++i)
                start = start && flag(mr.page_exact, o.pages[size_t(i)]);
        }
        r.expected_exact = start && !o.split_off_grid;
        const uint64_t exact_end = !start             ? r.resumed
                                   : o.split_off_grid ? o.first_off_grid_split
                                                      : o.prompt_len;
        for (size_t i = size_t(o.pages_borrowed); i < o.pages.size(); ++i) {
            const PageRef pg = o.pages[i];
            if (pg >= mr.page_exact.size()) mr.page_exact.resize(size_t(pg) + 1, 0);
            mr.page_exact[pg] = uint64_t(i + 1) * P_ <= exact_end;
        }
        for (size_t j = 0; j < o.checkpoints.size(); ++j) {
            const uint64_t h = o.checkpoint_handles[j];
            if (h >= mr.cp_exact.size()) mr.cp_exact.resize(size_t(h) + 1, 0);
            mr.cp_exact[h] = start && o.checkpoints[j] <= exact_end && o.checkpoints[j] % chunk == 0 &&
                             c.codec == StateCodec::fp32;
        }
        r.held_states = mr.server->cache().stats().states;
        r.held_state_bytes = mr.server->held_state_bytes();
        r.held_kv_bytes = mr.server->held_kv_bytes();
        mr.peak_bytes = std::max(mr.peak_bytes, r.held_state_bytes + r.held_kv_bytes);
        mr.ms += r.ms;
        mr.rows.push_back(r);
        if (mr.audit.empty()) {
            const std::string a = mr.server->audit();
            if (!a.empty()) mr.audit = "after request " + std::to_string(mr.next + 1) + ": " + a;
        }
        ++mr.next;
        if (d.passed()) break;
    }
    if (mr.next < items_.size()) return double(mr.next) / double(items_.size());
    finish_method(mr);
    return 1.0;
}

void PrefixRun::finish_method(MethodRun& mr) {
    PrefixServer& s = *mr.server;
    mr.end_stats = s.cache().stats();
    mr.end_state_bytes = s.held_state_bytes();
    mr.end_kv_bytes = s.held_kv_bytes();
    mr.tree = compress_tree(s.cache().nodes(), 200);
    mr.server.reset();  // the tree lets go of every page and checkpoint
    const PoolStats z = mr.pool->stats();
    mr.zero = z.kv_pages == 0 && z.states == 0 && mr.pool->owners().empty() && mr.pool->audit().empty();
    mr.zero_detail = format_grouped(double(z.kv_pages)) + " KV pages, " + format_grouped(double(z.states)) +
                     " state slots, " + format_grouped(double(mr.pool->owners().size())) + " owners";
    mr.pool.reset();
}

void PrefixRun::probe_off_grid() {
    if (!failed_.empty() || items_.empty()) return;
    // The first page boundary past one chunk that is off the chunk grid.
    uint64_t pos = 0;
    for (uint64_t x = chunk_ + 1; x < 4 * uint64_t(chunk_) + P_; ++x)
        if (x % P_ == 0 && x % chunk_ != 0) {
            pos = x;
            break;
        }
    if (!pos) {
        probe_note_ = "every page boundary is on the chunk grid (page " + std::to_string(P_) +
                      " is a multiple of the chunk " + std::to_string(chunk_) +
                      "), so no checkpoint can be off it";
        return;
    }
    const Item* it = nullptr;
    for (const Item& x : items_)
        if (x.prompt.size() > pos + 1) {
            it = &x;
            break;
        }
    if (!it) {
        probe_note_ =
            "no prompt is longer than " + std::to_string(pos + 1) + " tokens: lengthen the workload";
        return;
    }
    // The state and KV after prefilling the first pos tokens, then the rest: what a resume from a
    // checkpoint at pos computes.
    PoolResult pr = model::make_model_pool(*model_, 2, it->prompt.size() + it->outputs.size() + P_, P_);
    if (!pr.pool) return void(probe_note_ = pr.error);
    model::SequenceResult a = model_->new_sequence(*pr.pool, 1), b = model_->new_sequence(*pr.pool, 2);
    if (!a.seq || !b.seq) return void(probe_note_ = "probe sequences: " + a.error + b.error);
    const std::span<const int32_t> prompt(it->prompt);
    std::vector<float> l, rows;
    std::string e = model_->prefill(*a.seq, prompt.first(size_t(pos)));
    if (e.empty()) e = model_->restore(*b.seq, model_->save(*a.seq));
    if (e.empty()) e = model_->prefill(*b.seq, prompt.subspan(size_t(pos)), &l);
    for (size_t s = 0; e.empty() && s < it->outputs.size(); ++s) {
        rows.insert(rows.end(), l.begin(), l.end());
        if (s + 1 < it->outputs.size()) e = model_->decode(*b.seq, it->outputs[s], &l);
    }
    if (!e.empty()) return void(probe_note_ = e);
    probe_done_ = true;
    probe_pos_ = pos;
    probe_bitwise_ = std::memcmp(rows.data(), it->logits.data(), rows.size() * sizeof(float)) == 0;
    for (size_t i = 0; i < rows.size(); ++i)
        probe_diff_ = std::max(probe_diff_, std::fabs(double(rows[i]) - double(it->logits[i])));
    probe_scale_ = it->scale;
}

Series series(std::string name, std::string plot, std::string xl, std::string yl, std::string xu,
              std::string yu) {
    return make_series(std::move(name), std::move(plot), std::move(xl), std::move(yl), std::move(xu),
                       std::move(yu));
}

std::string exactness(const Row& r, double scale) {
    if (r.bitwise) return "bitwise";
    if (r.max_diff <= kTolerance * scale && r.first_diff < 0) return "within rounding";
    return "wrong";
}

void PrefixRun::report_all() {
    Report& rep = report_;
    if (!failed_.empty()) {
        rep.check("Run completed", false, failed_);
        return;
    }
    for (const MethodRun& mr : runs_)
        if (!mr.error.empty()) {
            rep.check(std::string("Served every request (") + mr.m->label + ")", false, mr.error);
            return;
        }
    const size_t N = items_.size();
    const MemoryAccount acc = account_memory(model_->config());
    const double kvb = double(acc.kv_bytes_per_token);
    // The no-cache method is the cold run itself.
    MethodRun& none = runs_[0];
    for (const Item& it : items_) {
        Row r;
        r.recomputed = it.prompt.size();
        r.bitwise = true;
        r.expected_exact = true;
        r.ms = it.cold_ms;
        none.ms += it.cold_ms;
        none.rows.push_back(r);
    }
    none.zero = true;

    uint64_t prompt_tokens = 0;
    for (const Item& it : items_) prompt_tokens += it.prompt.size();
    auto total = [&](const MethodRun& mr, auto f) {
        double s = 0;
        for (const Row& r : mr.rows) s += double(f(r));
        return s;
    };
    const MethodRun& iv = runs_[3];
    const MethodRun& kvo = runs_[1];

    // ---- headline scalars ----
    const double iv_recomputed = total(iv, [](const Row& r) { return r.recomputed; });
    rep.scalar("recomputed_tokens", "Prompt tokens recomputed (states every N)", "tokens", iv_recomputed,
               true)
        .help =
        "Prompt tokens the model prefilled when the tree keeps a state every N tokens, over the whole "
        "workload.";
    rep.scalar("recomputed_tokens_no_cache", "Prompt tokens computed without a cache", "tokens",
               double(prompt_tokens));
    rep.scalar(
           "token_hit_kv", "KV-visible token hit (states every N)", "fraction",
           total(iv, [](const Row& r) { return r.kv_hit; }) / double(std::max<uint64_t>(prompt_tokens, 1)))
        .help = "Prompt tokens whose KV the tree held, over all prompt tokens (the match covers prompt - 1).";
    rep.scalar(
           "token_hit_state", "State-usable token hit (states every N)", "fraction",
           total(iv, [](const Row& r) { return r.resumed; }) / double(std::max<uint64_t>(prompt_tokens, 1)),
           true)
        .help = "Prompt tokens skipped: the deepest checkpoint at or above the KV match.";
    double kv_only_diff = 0;
    int kv_only_first = -1;
    for (size_t i = 0; i < N; ++i) {
        const Row& r = kvo.rows[i];
        kv_only_diff = std::max(kv_only_diff, r.max_diff);
        if (r.first_diff >= 0 && (kv_only_first < 0 || r.first_diff < kv_only_first))
            kv_only_first = r.first_diff;
    }
    rep.scalar("kv_only_max_logit_diff", "KV-only reuse: largest |logit diff| vs cold", "", kv_only_diff,
               true)
        .help =
        "Largest difference of a next-token logit between KV-only reuse and the same request run cold. "
        "Rounding differences are below " +
        format_sig(kTolerance, 2) + " of the largest logit.";
    size_t exact_expected = 0, exact_ok = 0;
    for (size_t k = 2; k < kNumMethods; ++k)
        for (const Row& r : runs_[k].rows)
            if (r.expected_exact && r.resumed > 0) {
                ++exact_expected;
                exact_ok += r.bitwise;
            }
    rep.scalar("bitwise_resumes", "Resumes from aligned checkpoints, bitwise equal to cold", "requests",
               double(exact_ok), true)
        .help =
        "Requests that resumed from an fp32 checkpoint on the chunk grid over exactly computed pages, whose "
        "every logit has the bits of the cold run (all three state methods).";
    rep.scalar("checkpoint_bytes", "One checkpoint", "B", double(acc.state_bytes));
    rep.scalar("state_equivalent_tokens", "One checkpoint weighs as much KV as", "tokens",
               std::round(acc.state_equivalent_tokens()));
    rep.scalar("held_bytes_interval", "Cache held at the end (states every N)", "B",
               double(iv.end_state_bytes + iv.end_kv_bytes));

    // ---- what does a second request actually save ----
    Table save{"What does a second request actually save",
               {"method", "requests that skipped tokens", "prompt tokens computed", "tokens saved",
                "share saved", "checkpoints held", "checkpoint bytes held", "KV bytes held",
                "peak bytes held", "bitwise", "within rounding", "wrong", "largest |logit diff|"},
               {},
               {"", "requests", "tokens", "tokens", "fraction", "count", "B", "B", "B", "requests",
                "requests", "requests", ""}};
    Table timing{"Time on this device",
                 {"method", "prefill", "decode", "total", "time saved vs no cache", "share saved"},
                 {},
                 {"", "ms", "ms", "ms", "ms", "fraction"}};
    double none_total = none.ms;
    for (size_t k = 0; k < kNumMethods; ++k) {
        const MethodRun& mr = runs_[k];
        size_t skipped = 0, bit = 0, tol = 0, wrong = 0;
        double worst = 0;
        for (size_t i = 0; i < N; ++i) {
            const Row& r = mr.rows[i];
            skipped += r.resumed > 0;
            const std::string e = exactness(r, items_[i].scale);
            bit += e == "bitwise";
            tol += e == "within rounding";
            wrong += e == "wrong";
            worst = std::max(worst, r.max_diff);
        }
        const double computed = total(mr, [](const Row& r) { return r.recomputed; });
        save.rows.push_back(
            {std::string(mr.m->label), double(skipped), computed, double(prompt_tokens) - computed,
             (double(prompt_tokens) - computed) / double(std::max<uint64_t>(prompt_tokens, 1)),
             double(mr.end_stats.states), double(mr.end_state_bytes), double(mr.end_kv_bytes),
             double(mr.peak_bytes), double(bit), double(tol), double(wrong), worst});
        const double pf = k == 0 ? none.ms : mr.prefill_ms, dc = k == 0 ? 0.0 : mr.decode_ms;
        timing.rows.push_back({std::string(mr.m->label), pf, dc, mr.ms, none_total - mr.ms,
                               none_total > 0 ? (none_total - mr.ms) / none_total : 0.0});
    }
    rep.tables.push_back(save);
    rep.timing.tables.push_back(timing);
    rep.timing_scalar("time_saved_ms", "Time saved by states every N (this device)", "ms",
                      none_total - iv.ms);
    rep.timing_scalar("cold_ms", "Workload without a cache (this device)", "ms", none_total);

    // ---- per request ----
    Table wl{"Workload",
             {"request", "scenario", "prompt", "shared with earlier requests", "output"},
             {},
             {"", "", "tokens", "tokens", "tokens"}};
    for (size_t i = 0; i < N; ++i)
        wl.rows.push_back(
            {double(i + 1), kScenario[size_t(items_[i].scenario)] + " " + std::to_string(items_[i].index + 1),
             double(items_[i].prompt.size()), double(items_[i].shared), double(items_[i].outputs.size())});
    rep.tables.push_back(wl);
    Table per{"Per request",
              {"method", "request", "KV-visible hit", "state-usable hit", "resumed at", "recomputed",
               "pages borrowed", "checkpoints saved", "bytes held after", "exactness", "largest |logit diff|",
               "first differing token"},
              {},
              {"", "", "tokens", "tokens", "tokens", "tokens", "pages", "count", "B", "", "", ""}};
    for (size_t k = 1; k < kNumMethods; ++k)
        for (size_t i = 0; i < N; ++i) {
            const Row& r = runs_[k].rows[i];
            std::string ex = exactness(r, items_[i].scale);
            if (!r.state_matches)
                ex += " (state of another position)";
            else if (r.off_grid)
                ex += " (own prefill split off the grid)";
            else if (!r.bitwise && r.resumed % chunk_ != 0)
                ex += " (resumed off the chunk grid)";
            else if (!r.bitwise && r.resumed > items_[i].decoded_from)
                ex += " (reused decoded tokens)";
            per.rows.push_back(
                {std::string(runs_[k].m->id), double(i + 1), double(r.kv_hit), double(r.state_hit),
                 double(r.resumed), double(r.recomputed), double(r.borrowed), double(r.saved),
                 double(r.held_state_bytes + r.held_kv_bytes), ex, r.max_diff,
                 r.first_diff < 0 ? std::string("none") : "step " + std::to_string(r.first_diff + 1)});
        }
    rep.tables.push_back(per);

    // ---- plots ----
    for (size_t k = 0; k < kNumMethods; ++k) {
        Series rc = series(runs_[k].m->label, "Prompt tokens computed per request", "request", "tokens", "",
                           "tokens");
        Series hb =
            series(runs_[k].m->label, "Cache bytes held after each request", "request", "bytes", "", "B");
        rc.style = SeriesStyle::points;
        for (size_t i = 0; i < N; ++i) {
            rc.x.push_back(double(i + 1)), rc.y.push_back(double(runs_[k].rows[i].recomputed));
            hb.x.push_back(double(i + 1)),
                hb.y.push_back(double(runs_[k].rows[i].held_state_bytes + runs_[k].rows[i].held_kv_bytes));
        }
        rep.series.push_back(rc);
        if (k > 0) rep.series.push_back(hb);
    }
    // Log scale: rounding differences sit near 1e-6, wrong outputs near 1; bitwise requests (0) are left out.
    for (size_t k = 1; k < kNumMethods; ++k) {
        Series s =
            series(runs_[k].m->label, "Largest |logit diff| vs the cold run (bitwise requests left out)",
                   "request", "|logit diff|", "", "");
        s.style = SeriesStyle::points;
        s.log_y = true;
        for (size_t i = 0; i < N; ++i)
            if (runs_[k].rows[i].max_diff > 0)
                s.x.push_back(double(i + 1)), s.y.push_back(runs_[k].rows[i].max_diff);
        rep.series.push_back(s);
    }

    // ---- radix trees ----
    for (size_t k = 1; k < kNumMethods; ++k) {
        const MethodRun& mr = runs_[k];
        rep.trees.push_back(
            prefix_tree_report(std::string("Radix tree at the end: ") + mr.m->label, mr.tree));
    }

    // ---- checks ----
    if (exact_expected > 0)
        rep.check("A continuation from a checkpoint on the chunk grid is bitwise the cold run",
                  exact_ok == exact_expected,
                  format_grouped(double(exact_ok)) + " of " + format_grouped(double(exact_expected)) +
                      " requests that resumed from an fp32 checkpoint at a multiple of " +
                      std::to_string(chunk_) +
                      " over exactly computed pages have every logit's bits of their cold run");
    else
        rep.notes.push_back(
            "No request resumed from an exact fp32 checkpoint on the chunk grid, so the bitwise check has "
            "nothing to test: use the fp32 codec, an interval that is a multiple of the chunk, and a shared "
            "prefix of at least one chunk (" +
            std::to_string(chunk_) + " tokens).");
    {
        size_t reused = 0, caught = 0;
        double least = -1;
        for (size_t i = 0; i < N; ++i) {
            const Row& r = kvo.rows[i];
            if (r.state_matches) continue;
            ++reused;
            const bool wrong = r.max_diff > kTolerance * items_[i].scale;
            caught += wrong;
            least = least < 0 ? r.max_diff : std::min(least, r.max_diff);
        }
        if (reused == 0)
            rep.notes.push_back(
                "No request had a KV hit, so KV-only reuse had nothing to get wrong: add requests.");
        else
            rep.check("KV-only reuse is flagged incorrect (its outputs diverge)", caught == reused,
                      format_grouped(double(caught)) + " of " + format_grouped(double(reused)) +
                          " requests that skipped KV with the state of another position differ from their "
                          "cold run beyond rounding (largest |logit diff| " +
                          format_sig(kv_only_diff, 3) + ", smallest " + format_sig(least, 3) +
                          "); greedy tokens " +
                          (kv_only_first < 0 ? std::string("agree at every step")
                                             : "differ from step " + std::to_string(kv_only_first + 1)));
    }
    if (probe_done_)
        rep.check("A checkpoint off the chunk grid is exact only within rounding",
                  probe_diff_ <= kTolerance * probe_scale_,
                  "resumed at " + std::to_string(probe_pos_) + " (chunk " + std::to_string(chunk_) + "): " +
                      (probe_bitwise_ ? std::string("bitwise equal this time") : std::string("not bitwise")) +
                      ", largest |logit diff| " + format_sig(probe_diff_, 3) + " against logits up to " +
                      format_sig(probe_scale_, 3) + " (tolerance " + format_sig(kTolerance, 2) + " of it)");
    else
        rep.notes.push_back("Off-grid resume not measured: " + probe_note_ + ".");
    if (p_.str("codec") == "fp32") {
        size_t others = 0, within = 0;
        for (size_t k = 2; k < kNumMethods; ++k)
            for (size_t i = 0; i < N; ++i) {
                const Row& r = runs_[k].rows[i];
                if (r.bitwise) continue;
                ++others;
                within += r.max_diff <= kTolerance * items_[i].scale && r.first_diff < 0;
            }
        rep.check("Every other resume from a state stays within rounding", within == others,
                  others == 0
                      ? "every state resume was bitwise (none off the grid or past decoded tokens)"
                      : format_grouped(double(within)) + " of " + format_grouped(double(others)) +
                            " state resumes that are not bitwise (off the grid, past decoded tokens) differ "
                            "by at most " +
                            format_sig(kTolerance, 2) + " of the largest logit, with the same greedy tokens");
    }
    {
        std::string bad;
        for (size_t k = 1; k < kNumMethods; ++k)
            for (size_t i = 0; i < N && bad.empty(); ++i) {
                const Row& r = runs_[k].rows[i];
                if (r.state_hit > r.kv_hit || r.recomputed + r.resumed != items_[i].prompt.size() ||
                    r.kv_hit >= items_[i].prompt.size() ||
                    r.resumed != (runs_[k].m->reuse == Reuse::kv_only ? r.kv_hit : r.state_hit))
                    bad = std::string(runs_[k].m->id) + " request " + std::to_string(i + 1) + ": KV hit " +
                          std::to_string(r.kv_hit) + ", state hit " + std::to_string(r.state_hit) +
                          ", resumed at " + std::to_string(r.resumed) + ", recomputed " +
                          std::to_string(r.recomputed);
            }
        rep.check("State hit <= KV hit < prompt; recomputed = prompt - resumed", bad.empty(),
                  bad.empty()
                      ? "in every request of every method (KV-only resumes at the KV hit, the others at "
                        "the state hit)"
                      : bad);
    }
    {
        std::string bad;
        for (size_t k = 1; k < kNumMethods; ++k)
            if (!runs_[k].audit.empty() && bad.empty())
                bad = std::string(runs_[k].m->label) + ": " + runs_[k].audit;
        rep.check("Tree, page references and pool agree after every request (audit)", bad.empty(),
                  bad.empty()
                      ? "every page the tree holds is referenced once per holder, every checkpoint is live, "
                        "the pool's own audit passes"
                      : bad);
    }
    {
        bool ok = true;
        std::string detail;
        for (size_t k = 1; k < kNumMethods; ++k) {
            ok = ok && runs_[k].zero;
            if (!runs_[k].zero) detail = std::string(runs_[k].m->label) + ": " + runs_[k].zero_detail;
        }
        rep.check("Reference counts and pool bytes return to zero", ok,
                  ok ? "after each method's cache is dropped: 0 KV pages, 0 state slots, 0 owners in its pool"
                     : detail + " left");
    }

    // ---- notes ----
    rep.notes.push_back("The tiny runnable model (seeded weights), kernel chunk " + std::to_string(chunk_) +
                        ", KV pages of " + std::to_string(P_) + " tokens. One checkpoint is " +
                        format_bytes(double(acc.state_bytes)) + ", one token of KV " + format_bytes(kvb) +
                        ".");
    rep.notes.push_back(
        "Every method is fed the cold run's output tokens (teacher forcing), so each decode step compares "
        "logits of the same inputs. \"Within rounding\": at most " +
        format_sig(kTolerance, 2) + " of the largest logit and the same greedy tokens.");
    if (p_.str("codec") != "fp32")
        rep.notes.push_back("Checkpoints are stored as " + p_.str("codec") +
                            ": resumes from them are not exact (module 5 measures the error).");
}

}  // namespace

Experiment make_prefix_experiment() {
    Experiment e;
    e.number = 4;
    e.id = "prefix";
    e.title = "Dual-granularity prefix cache";
    e.component = "prefix caching";
    e.purpose =
        "What a second request sharing a prefix really saves on a hybrid model, and why reusing the KV alone "
        "gives wrong outputs: served on the runnable model, compared with cold runs bit for bit.";
    e.how_it_works =
        "A hybrid model caches two things for a prefix: the attention layers' KV, which can be cut at any "
        "page, and the recurrent state of the KDA layers, which exists only where a checkpoint was taken. A "
        "request can skip exactly the tokens up to the deepest position where it has both, the state-usable "
        "match; the KV-visible match beyond it says where a checkpoint would have paid (reference/serving.md "
        "§0, §2).\n\nThe module serves one seeded workload on the runnable tiny model five ways and compares "
        "every output with the same request run cold, logit by logit:\n- no cache: every prompt prefilled "
        "from scratch (the reference);\n- KV-only reuse: the tree's KV is reused up to the KV-visible match "
        "and the KDA state starts from zeros (vLLM's has_initial_states false, #43090) or from what the "
        "previous request left in the slot (stale, SGLang #22493). It is wrong: the KDA layers never saw the "
        "skipped tokens. LMCache #2863 reported about 40 % garbled outputs from an attention-only external "
        "cache on a hybrid;\n- state at request end only (SGLang no_buffer's request-end state, llama.cpp's "
        "prompt checkpoints);\n- states every N tokens, N a multiple of the kernel chunk (SGLang "
        "extra_buffer's chunk-end tracking, vLLM align mode's block boundaries);\n- states at branch points: "
        "the request end plus the junction where a request's KV match ran deeper than its state match, "
        "floored to the chunk grid (Marconi, MLSys 2025; SGLang's branching seqlen; vLLM #37898).\n\nServing "
        "a request (core/cache/prefix_server.h): match the prompt in the radix tree (at most prompt - 1 "
        "tokens, so the last prompt token is always computed for the next-token logits; vLLM's "
        "kv_cache_manager.py caps a hit at num_tokens - 1 for the same reason); lend the tree's KV pages of "
        "the resumed prefix to the request (reference counted, never copied) and copy the checkpoint into "
        "the request's working state slot (copy-on-write: a checkpoint in the tree is never written, "
        "SGLang's MambaRadixCache does the same); prefill the rest, split at the policy's checkpoint "
        "positions, saving a state at each; decode; insert prompt and output with the new checkpoints. The "
        "tree adopts the request's pages for the part it did not hold; the rest return to the pool.\n\nWhy a "
        "resume on the chunk grid is bitwise: the chunked KDA kernel restarts at every call, so prefill(A) "
        "then prefill(B) has the bits of prefill(A + B) when |A| is a multiple of the chunk. A resume "
        "anywhere else chunks the rest differently and differs by rounding, which the run measures. For the "
        "same reason a request-end state that falls inside the prompt is taken at the chunk boundary below "
        "it (vLLM's align mode keeps the last block-aligned state before the prompt end).\n\nEach method is "
        "fed the cold run's output tokens (teacher forcing) so that every decode step compares logits of the "
        "same inputs; the first step whose greedy token would differ is reported too. Times are measured on "
        "this device and reported apart from the counts.";
    e.where_it_does_not_pay =
        "A checkpoint pays only when a later request resumes from it, and it is heavy: one state of the tiny "
        "model (448,512 B) weighs as much as 350 tokens of its attention KV; one Kimi-Linear-48B state (43 "
        "MB) as much as about 5,384 tokens of MLA cache (module 2).\n\n- Unique prompts: every checkpoint, "
        "and the KV, is pure cost.\n- States every N tokens: one state per N tokens of every path, most "
        "never resumed from (module 5 counts the share on the Mooncake trace: about 2 % at N = 512).\n- "
        "Request-end states miss prefixes shared only in part: requests with one system prompt and different "
        "questions share no end state, so each recomputes everything (vLLM #45238: one checkpoint in "
        "request-unique tokens gives 0 % hits).\n- Branch points pay from the third request of a branch on: "
        "the second finds KV but no state, recomputes, and plants the junction.\n- Multi-turn chat resumes "
        "at the previous turn's end, past tokens that were decoded with the recurrent kernel where a cold "
        "prefill uses the chunked one: exact only within rounding.\n- KV-only reuse saves the most tokens "
        "and is wrong: a hit without the state must count as a miss (vLLM intersects the hits to zero on "
        "purpose, #43090, #47491).\n- The time saved is the prefill of the skipped tokens (copying a state "
        "is a memcpy of its bytes); the price is the memory held between requests, which the table puts next "
        "to the tokens saved: per token saved, states at every N hold far more than the KV they make usable.";
    e.params = prefix_params();
    e.validate = validate_prefix;
    e.headlines = {
        {"KV-only reuse on a hybrid: largest next-token logit error against a cold run",
         {{"workload", "system"}, {"requests", "2"}, {"shared_tokens", "64"}, {"gen", "2"}},
         "kv_only_max_logit_diff"},
    };
    e.start = [](const Params& p) { return std::make_unique<PrefixRun>(p); };
    e.live = false;
    return e;
}

K3_REGISTER_EXPERIMENT(make_prefix_experiment);

}  // namespace k3
