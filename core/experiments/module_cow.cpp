// Module 6 `cow`: copy-on-write forks on the runnable model (parallel sampling and branching), against
// eager copies, with every fork's output checked against the same fork run alone.
#include <algorithm>
#include <cstring>
#include <memory>

#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/cache/forks.h"
#include "core/cache/shared_model.h"
#include "core/experiments/registry.h"
#include "core/model/accounting.h"

namespace k3 {

namespace {

using serve::ForkMode;
using serve::ForkOutput;
using serve::ForkRun;
using serve::ForkSpec;

constexpr uint64_t kMaxTokens = 40000;  // tokens the run computes (forks x (prompt + branch + gen), twice)

std::vector<ParamSpec> cow_params() {
    return {
        ParamSpec::choice("scenario", "Scenario", {"sampling", "branching"}, "sampling",
                          {"parallel sampling (n > 1)", "branching (agent tree)"})
            .in_group("Forks")
            .describe(
                "Parallel sampling: n samples of one prompt, each with its own seed. Branching: each fork "
                "appends its own suffix (a tool result, a candidate) to the shared prompt, then samples."),
        ParamSpec::integer("forks", "Forks", "forks", 1, 32, 4)
            .in_group("Forks")
            .describe("Sequences forked from the shared prompt (n of parallel sampling, or branches)."),
        ParamSpec::integer("prompt_tokens", "Shared prompt", "tokens", 1, 2048, 120)
            .log()
            .in_group("Forks")
            .describe(
                "The prefix every fork shares. Not a multiple of the page size: its last page is partly "
                "filled, and the first token each fork writes lands there."),
        ParamSpec::integer("branch_tokens", "Branch suffix", "tokens", 1, 512, 16)
            .log()
            .in_group("Forks")
            .active_when("scenario", "branching")
            .describe("Tokens each fork prefills after the fork (branching only)."),
        ParamSpec::integer("gen", "Tokens sampled per fork", "tokens", 1, 64, 6)
            .in_group("Forks")
            .describe("Decode steps each fork takes after the fork (and its branch suffix)."),
        ParamSpec::real("temperature", "Temperature", "", 0, 2, 0.8)
            .in_group("Forks")
            .describe(
                "Sampling temperature (0 = greedy: every fork of parallel sampling then writes the same "
                "tokens)."),
        ParamSpec::seed("Seed of the prompt, the branch suffixes and each fork's sampler.").in_group("Forks"),
        ParamSpec::integer("page_size", "KV page size", "tokens", 1, 64, 16)
            .log()
            .in_group("Memory")
            .describe("Tokens per KV page: full pages of the prefix are shared, the last partly filled one "
                      "is copied by each fork that writes into it."),
    };
}

uint64_t work_tokens(const Params& p) {
    const uint64_t n = uint64_t(p.i("forks")), P = uint64_t(p.i("prompt_tokens")), G = uint64_t(p.i("gen"));
    const uint64_t B = p.str("scenario") == "branching" ? uint64_t(p.i("branch_tokens")) : 0;
    return 2 * (P + n * (B + G)) + n * (P + B + G);  // both modes, then each fork alone
}

uint64_t pool_bytes(const Params& p, const model::Model* m) {
    const MemoryAccount a = account_memory(m ? m->config() : *model_preset("tiny"));
    const uint64_t n = uint64_t(p.i("forks")), pg = uint64_t(p.i("page_size"));
    const uint64_t B = p.str("scenario") == "branching" ? uint64_t(p.i("branch_tokens")) : 0;
    const uint64_t per = uint64_t(p.i("prompt_tokens")) + B + uint64_t(p.i("gen"));
    const uint64_t pages = (n + 1) * (per / pg + 2);
    return (n + 1) * a.state_bytes + pages * pg * a.kv_bytes_per_token;
}

std::vector<ParamIssue> validate_cow(const Params& p) {
    std::vector<ParamIssue> out;
    if (work_tokens(p) > kMaxTokens)
        out.push_back({ParamIssue::error, "forks",
                       "the run computes about " + format_grouped(double(work_tokens(p))) +
                           " tokens on the tiny model (both modes, then every fork alone); the limit is " +
                           format_grouped(double(kMaxTokens))});
    if (pool_bytes(p, nullptr) > kMaxBackingBytes)
        out.push_back({ParamIssue::error, "forks",
                       "the forks need a pool of " + format_bytes(double(pool_bytes(p, nullptr))) +
                           ", over " + format_bytes(double(kMaxBackingBytes))});
    return out;
}

class CowRun : public StagedRun {
  public:
    explicit CowRun(const Params& p) : StagedRun("cow", p), p_(p) {
        add_step("making the tiny model", 1, [this] { setup(); });
        add_step("eager copies (Model::fork)", 2, [this] { run_mode(0); });
        add_step("copy-on-write", 2, [this] { run_mode(1); });
        add_stage("each fork alone", 3, [this](const Deadline& d) { return alone(d); });
        add_step("report", 0.2, [this] { report_all(); });
    }

  private:
    void setup();
    void run_mode(int k);
    double alone(const Deadline& d);
    void report_all();
    std::unique_ptr<PagePool> new_pool();

    Params p_;
    model::Model* model_ = nullptr;
    std::string failed_;
    std::vector<int32_t> prompt_;
    std::vector<ForkSpec> specs_;
    ForkRun runs_[2];
    double ms_[2] = {0, 0};
    std::vector<ForkOutput> alone_;
    size_t alone_next_ = 0;
    double alone_ms_ = 0;
};

std::unique_ptr<PagePool> CowRun::new_pool() {
    const MemoryAccount a = account_memory(model_->config());
    const uint64_t pg = uint64_t(p_.i("page_size")), n = uint64_t(p_.i("forks"));
    StaticSplitConfig c;
    c.page_tokens = uint32_t(pg);
    c.state_slots = n + 1;
    c.budget_bytes = pool_bytes(p_, model_);
    (void)a;
    PoolResult pr = make_static_pool(model_->pool_model(), c, PoolOptions{true});
    if (!pr.pool) failed_ = "pool: " + pr.error;
    return std::move(pr.pool);
}

void CowRun::setup() {
    std::string err;
    model_ = serve::shared_model("tiny", 1, 64, &err);
    if (!model_) {
        failed_ = "the tiny model: " + err;
        return;
    }
    Rng rng(uint64_t(p_.integer("seed")) * 104729 + 5);
    const int V = model_->vocab();
    for (int i = 0; i < p_.i("prompt_tokens"); ++i) prompt_.push_back(int32_t(rng.below(uint64_t(V))));
    const bool branching = p_.str("scenario") == "branching";
    for (int f = 0; f < p_.i("forks"); ++f) {
        ForkSpec s;
        s.gen = p_.i("gen");
        s.temperature = float(p_.num("temperature"));
        s.seed = mix64(uint64_t(p_.integer("seed")) * 1000003 + uint64_t(f) + 1);
        if (branching)
            for (int i = 0; i < p_.i("branch_tokens"); ++i)
                s.branch.push_back(int32_t(rng.below(uint64_t(V))));
        specs_.push_back(std::move(s));
    }
}

void CowRun::run_mode(int k) {
    if (!failed_.empty()) return;
    std::unique_ptr<PagePool> pool = new_pool();
    if (!pool) return;
    const Stopwatch sw;
    runs_[k] = serve::run_forks(*model_, *pool, k == 0 ? ForkMode::eager : ForkMode::cow, prompt_, specs_);
    ms_[k] = sw.ms();
    if (!runs_[k].error.empty())
        failed_ = std::string(k == 0 ? "eager" : "copy-on-write") + ": " + runs_[k].error;
}

double CowRun::alone(const Deadline& d) {
    if (!failed_.empty()) return 1.0;
    while (alone_next_ < specs_.size()) {
        std::unique_ptr<PagePool> pool = new_pool();
        if (!pool) return 1.0;
        std::string err;
        const Stopwatch sw;
        alone_.push_back(serve::run_alone(*model_, *pool, prompt_, specs_[alone_next_], &err));
        alone_ms_ += sw.ms();
        if (!err.empty()) {
            failed_ = "fork " + std::to_string(alone_next_) + " alone: " + err;
            return 1.0;
        }
        ++alone_next_;
        if (d.passed()) break;
    }
    return double(alone_next_) / double(std::max<size_t>(specs_.size(), 1));
}

bool same(const ForkOutput& a, const ForkOutput& b) {
    return a.tokens == b.tokens && a.logits.size() == b.logits.size() &&
           std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0;
}

void CowRun::report_all() {
    Report& r = report_;
    if (!failed_.empty()) {
        r.check("Run completed", false, failed_);
        return;
    }
    const serve::ForkStats& e = runs_[0].stats;
    const serve::ForkStats& c = runs_[1].stats;
    const size_t n = specs_.size();
    const uint64_t state_bytes = model_->pool_model().state_bytes();
    const bool branching = p_.str("scenario") == "branching";
    const uint64_t pg = uint64_t(p_.i("page_size"));

    r.scalar("peak_bytes_eager", "Peak memory, eager copies", "B", double(e.peak_bytes), true).help =
        "Largest pool footprint (KV pages and state slots) at any step of the run.";
    r.scalar("peak_bytes_cow", "Peak memory, copy-on-write", "B", double(c.peak_bytes), true);
    r.scalar("peak_ratio", "Copy-on-write peak / eager peak", "ratio",
             e.peak_bytes ? double(c.peak_bytes) / double(e.peak_bytes) : 0.0, true);
    r.scalar("bytes_copied_eager", "Bytes copied, eager", "B",
             double(e.state_bytes_copied + e.kv_bytes_copied));
    r.scalar("bytes_copied_cow", "Bytes copied, copy-on-write", "B",
             double(c.state_bytes_copied + c.kv_bytes_copied), true);
    r.scalar("state_copies_eager", "State copies, eager", "copies", double(e.state_copies));
    r.scalar("state_copies_cow", "State copies, copy-on-write", "copies", double(c.state_copies));
    r.scalar("kv_bytes_copied_eager", "KV bytes copied, eager", "B", double(e.kv_bytes_copied));
    r.scalar("kv_bytes_copied_cow", "KV bytes copied, copy-on-write", "B", double(c.kv_bytes_copied));

    Table t{"Eager copies vs copy-on-write",
            {"fork method", "peak memory", "peak KV pages", "peak state slots", "state copies",
             "state bytes copied", "parent's slot taken over", "KV pages copied", "KV bytes copied",
             "bytes copied"},
            {},
            {"", "B", "pages", "states", "copies", "B", "count", "pages", "B", "B"}};
    for (int k = 0; k < 2; ++k) {
        const serve::ForkStats& s = runs_[k].stats;
        t.rows.push_back({std::string(k == 0 ? "eager (Model::fork)" : "copy-on-write"), double(s.peak_bytes),
                          double(s.peak_kv_pages), double(s.peak_states), double(s.state_copies),
                          double(s.state_bytes_copied), double(s.states_taken), double(s.kv_pages_copied),
                          double(s.kv_bytes_copied), double(s.state_bytes_copied + s.kv_bytes_copied)});
    }
    r.tables.push_back(t);

    Table f{
        "Forks", {"fork", "tokens sampled", "eager = alone", "copy-on-write = alone"}, {}, {"", "", "", ""}};
    size_t eq[2] = {0, 0};
    for (size_t i = 0; i < n; ++i) {
        std::string toks;
        for (size_t j = 0; j < alone_[i].tokens.size() && j < 8; ++j)
            toks += (j ? " " : "") + std::to_string(alone_[i].tokens[j]);
        if (alone_[i].tokens.size() > 8) toks += " ...";
        const bool a = same(runs_[0].outputs[i], alone_[i]), b = same(runs_[1].outputs[i], alone_[i]);
        eq[0] += a;
        eq[1] += b;
        f.rows.push_back({double(i + 1), toks, std::string(a ? "bitwise" : "differs"),
                          std::string(b ? "bitwise" : "differs")});
    }
    r.tables.push_back(f);

    for (int k = 0; k < 2; ++k) {
        Series s;
        s.name = k == 0 ? "eager" : "copy-on-write";
        s.plot = "Pool memory held, step by step";
        s.x_label = "round (0: right after the fork; then one model call per fork)";
        s.y_label = "bytes";
        s.x_unit = "";
        s.y_unit = "B";
        s.style = SeriesStyle::step;
        const auto& v = runs_[k].stats.bytes_after_step;
        for (size_t i = 0; i < v.size(); ++i) s.x.push_back(double(i)), s.y.push_back(v[i]);
        r.series.push_back(s);
    }
    {
        Series s;
        s.plot = "Bytes copied";
        s.name = "state";
        s.x_label = "fork method";
        s.y_label = "bytes";
        s.y_unit = "B";
        s.style = SeriesStyle::bars;
        s.x_names = {"eager", "copy-on-write"};
        s.x = {0, 1};
        s.y = {double(e.state_bytes_copied), double(c.state_bytes_copied)};
        Series kv = s;
        kv.name = "KV";
        kv.y = {double(e.kv_bytes_copied), double(c.kv_bytes_copied)};
        r.series.push_back(s);
        r.series.push_back(kv);
    }
    r.timing_scalar("eager_ms", "Eager run (this device)", "ms", ms_[0]);
    r.timing_scalar("cow_ms", "Copy-on-write run (this device)", "ms", ms_[1]);
    r.timing_scalar("alone_ms", "Every fork alone (this device)", "ms", alone_ms_);

    // ---- checks ----
    r.check("Each fork's output equals running it alone (eager)", eq[0] == n,
            format_grouped(double(eq[0])) + " of " + format_grouped(double(n)) +
                " forks: the same tokens and every logit's bits as a fresh sequence with the same prompt" +
                (branching ? ", branch" : "") + " and sampler seed");
    r.check(
        "Each fork's output equals running it alone (copy-on-write)", eq[1] == n,
        format_grouped(double(eq[1])) + " of " + format_grouped(double(n)) + " forks bitwise equal to alone");
    for (int k = 0; k < 2; ++k)
        r.check(std::string("Reference counts and pool bytes return to zero (") +
                    (k == 0 ? "eager" : "copy-on-write") + ")",
                runs_[k].released, runs_[k].release_detail);
    // Who writes: a fork with a branch, or one that samples more than one token.
    size_t writers = 0;
    for (const ForkSpec& s : specs_) writers += !s.branch.empty() || s.gen > 1;
    const uint64_t want_copies = writers > 0 ? writers - 1 : 0;
    r.check("Copy-on-write copies the state once per writing fork but the last",
            c.state_copies == want_copies && c.states_taken == (writers > 0 ? 1u : 0u),
            format_grouped(double(c.state_copies)) + " copies and " + format_grouped(double(c.states_taken)) +
                " slot taken over for " + format_grouped(double(writers)) +
                " writing forks (eager: " + format_grouped(double(e.state_copies)) + " copies at the fork)");
    const bool partial = prompt_.size() % pg != 0;
    const uint64_t max_cow_pages = partial ? writers : 0;
    r.check("Copy-on-write copies only the partly filled page a fork writes into",
            c.kv_pages_copied <= max_cow_pages &&
                c.kv_bytes_copied <= c.kv_pages_copied * (pg - 1) * model_->pool_model().kv_bytes_per_token(),
            format_grouped(double(c.kv_pages_copied)) + " pages, " + format_bytes(double(c.kv_bytes_copied)) +
                " copied (eager: " + format_grouped(double(e.kv_pages_copied)) + " pages, " +
                format_bytes(double(e.kv_bytes_copied)) + "); the shared prompt ends " +
                (partial ? "inside a page" : "on a page boundary, so nothing needs copying"));

    // ---- notes ----
    r.notes.push_back(
        "One state of the tiny model: " + format_bytes(double(state_bytes)) + "; the shared prompt's KV: " +
        format_bytes(double(prompt_.size() * model_->pool_model().kv_bytes_per_token())) + " (" +
        std::to_string(prompt_.size()) + " tokens, pages of " + std::to_string(pg) + ").");
    r.notes.push_back(
        "Forks run round robin, one model call each per round, as a batch would; a fork's memory is "
        "released when it has sampled its last token.");
}

}  // namespace

Experiment make_cow_experiment() {
    Experiment e;
    e.number = 6;
    e.id = "cow";
    e.title = "Copy-on-write forks";
    e.component = "prefix caching";
    e.purpose =
        "Parallel sampling and branching on the runnable model: forks that share the prefix's state and KV "
        "pages and copy on first write, against eager copies.";
    e.how_it_works =
        "A fork (n > 1 sampling, beam or agent branches, a tree of thoughts) starts from one prefix. "
        "Eagerly, each fork gets its own copy of everything at once: the recurrent state and every KV page "
        "(Model::fork). With copy-on-write the forks share them and copy only what they are about to write:\n"
        "- KV pages are shared by reference count (vLLM's block table and SGLang's radix tree do the same). "
        "A fork writes only at its own position, so the full pages of the prefix are never copied; only the "
        "last, partly filled page is copied by each fork that writes into it.\n- The recurrent state is one "
        "slot per sequence, rewritten by every token. Forks read the parent's slot until their first write "
        "(a decode step or a branch prefill), which copies it into the fork's own slot; the last fork to "
        "write takes the parent's slot over without a copy. SGLang copies the branch-point state into each "
        "fork's working slot the same way (reference/serving.md §2.1).\n\n"
        "Here the forks run round robin, one model call per fork per round, as a batch would, in one pool "
        "with backing storage; the pool's byte accounting gives the memory after every step. The KV pages "
        "are lent to whichever fork runs (core/cache/kv_pages.h): the pool keeps exactly one owner per page, "
        "the reference counts say who shares it.\n\n"
        "Every fork's tokens and logits are compared, bit for bit, with the same fork run alone in a fresh "
        "sequence: copying bytes, eagerly or lazily, must not change a result.";
    e.where_it_does_not_pay =
        "The KDA state is rewritten by every token, so copy-on-write only defers its copy: as soon as each "
        "fork has taken one step, n forks hold n states, exactly as with eager copies (one state of the tiny "
        "model is 448,512 B, of Kimi-Linear-48B 43 MB). The only state copies saved are those of forks that "
        "never write (a fork that samples one token and stops); the last fork to write takes the parent's "
        "slot, as the parent itself goes on as one of the eager forks.\n\n"
        "- The lasting saving is in the KV pages of the shared prefix and in checkpoints: for a hybrid those "
        "are the small part of a fork's memory until the prefix is thousands of tokens long (5,384 tokens of "
        "MLA cache weigh as much as one Kimi-Linear state).\n- A fork that starts mid-page copies that page "
        "anyway; with large pages (vLLM's hybrid block of 528+ tokens, module 3) that copy is a large share "
        "of a short prefix.\n- Speculative branches that are discarded after one step pay the state copy for "
        "nothing: module 7's projection replay avoids storing a state per draft instead.";
    e.params = cow_params();
    e.validate = validate_cow;
    e.start = [](const Params& p) { return std::make_unique<CowRun>(p); };
    e.live = false;
    return e;
}

K3_REGISTER_EXPERIMENT(make_cow_experiment);

}  // namespace k3
