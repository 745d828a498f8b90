// Module 6 `cow`: the forks run eagerly, then with copy-on-write, then each alone, on the runnable model.
#include <algorithm>

#include "core/base/clock.h"
#include "core/base/rng.h"
#include "core/cache/shared_model.h"
#include "core/model/accounting.h"
#include "core/modules/cow/cow.h"

namespace k3 {

namespace {

uint64_t branch_tokens(const CowParams& p) {
    return p.scenario == CowScenario::branching ? uint64_t(p.branch_tokens) : 0;
}

// The fault a falsifier plants in the run of one fork mode (none for the other mode).
serve::ForkFault fork_fault(CowFalsify f, serve::ForkMode mode) {
    using serve::ForkFault;
    const bool eager = mode == serve::ForkMode::eager;
    switch (f) {
        case CowFalsify::flip_state_bit: return eager ? ForkFault::flip_state_bit : ForkFault::none;
        case CowFalsify::skip_state_copy: return eager ? ForkFault::none : ForkFault::skip_state_copy;
        case CowFalsify::wrong_page_copy: return eager ? ForkFault::none : ForkFault::wrong_page_copy;
        case CowFalsify::extra_page_copy: return eager ? ForkFault::none : ForkFault::extra_page_copy;
        case CowFalsify::keep_memory: return ForkFault::keep_memory;
        default: return ForkFault::none;
    }
}

class CowRun : public StagedRun {
  public:
    CowRun(const CowParams& p, const Params& raw) : StagedRun("cow", raw), p_(p) {
        add_step("making the runnable model", 1, [this] { setup(); });
        add_step("eager copies (Model::fork)", 2, [this] { run_method(serve::ForkMode::eager, m_.eager); });
        add_step("copy-on-write", 2, [this] { run_method(serve::ForkMode::cow, m_.cow); });
        add_stage("each fork alone", 3, [this](const Deadline& d) { return alone(d); });
        add_step("report", 0.2, [this] {
            if (m_.failed.empty()) compare_with_alone();
            report_cow(p_, m_, report_);
        });
    }

  private:
    void setup();
    void run_method(serve::ForkMode mode, CowMethodRun& out);
    double alone(const Deadline& d);
    void compare_with_alone();
    std::unique_ptr<PagePool> new_pool();

    CowParams p_;
    CowResult m_;
    model::Model* model_ = nullptr;
};

std::unique_ptr<PagePool> CowRun::new_pool() {
    StaticSplitConfig c;
    c.page_tokens = uint32_t(p_.page_size);
    c.state_slots = p_.falsify == CowFalsify::one_state_slot ? 1 : uint64_t(p_.forks) + 1;
    c.budget_bytes = cow_pool_bytes(p_, model_->config());
    PoolResult pool = make_static_pool(model_->pool_model(), c, PoolOptions{true});
    if (!pool.pool) m_.failed = "pool: " + pool.error;
    return std::move(pool.pool);
}

void CowRun::setup() {
    std::string err;
    model_ = serve::shared_model(default_runnable_id(), 1, 64, &err);
    if (!model_) {
        m_.failed = "the runnable model: " + err;
        return;
    }
    m_.state_bytes = model_->pool_model().state_bytes();
    m_.kv_bytes_per_token = model_->pool_model().kv_bytes_per_token();
    Rng rng(p_.seed * 104729 + 5);
    const uint64_t vocab = uint64_t(model_->vocab());
    for (int i = 0; i < p_.prompt_tokens; ++i) m_.prompt.push_back(int32_t(rng.below(vocab)));
    for (int f = 0; f < p_.forks; ++f) {
        serve::ForkSpec s;
        s.gen = p_.gen;
        s.temperature = float(p_.temperature);
        s.seed = mix64(p_.seed * 1000003 + uint64_t(f) + 1);
        if (p_.scenario == CowScenario::branching)
            for (int i = 0; i < p_.branch_tokens; ++i) s.branch.push_back(int32_t(rng.below(vocab)));
        m_.specs.push_back(std::move(s));
    }
    for (const serve::ForkSpec& s : m_.specs) m_.writing_forks += fork_writes(s);
}

void CowRun::run_method(serve::ForkMode mode, CowMethodRun& out) {
    if (!m_.failed.empty()) return;
    std::unique_ptr<PagePool> pool = new_pool();
    if (!pool) return;
    const Stopwatch sw;
    out.run = serve::run_forks(*model_, *pool, mode, m_.prompt, m_.specs, fork_fault(p_.falsify, mode));
    out.ms = sw.ms();
    if (!out.run.error.empty())
        m_.failed =
            std::string(mode == serve::ForkMode::eager ? "eager" : "copy-on-write") + ": " + out.run.error;
}

double CowRun::alone(const Deadline& d) {
    if (!m_.failed.empty()) return 1.0;
    while (m_.alone.size() < m_.specs.size()) {
        std::unique_ptr<PagePool> pool = new_pool();
        if (!pool) return 1.0;
        std::string err;
        const Stopwatch sw;
        m_.alone.push_back(serve::run_alone(*model_, *pool, m_.prompt, m_.specs[m_.alone.size()], &err));
        m_.alone_ms += sw.ms();
        if (!err.empty()) {
            m_.failed = "fork " + std::to_string(m_.alone.size() - 1) + " alone: " + err;
            return 1.0;
        }
        if (d.passed()) break;
    }
    return double(m_.alone.size()) / double(std::max<size_t>(m_.specs.size(), 1));
}

void CowRun::compare_with_alone() {
    for (size_t i = 0; i < m_.specs.size(); ++i) {
        m_.eager_same.push_back(serve::same_output(m_.eager.run.outputs[i], m_.alone[i]));
        m_.cow_same.push_back(serve::same_output(m_.cow.run.outputs[i], m_.alone[i]));
    }
}

}  // namespace

uint64_t cow_pool_bytes(const CowParams& p, const ModelConfig& m) {
    const MemoryAccount a = account_memory(m);
    const uint64_t n = uint64_t(p.forks), page = uint64_t(p.page_size);
    const uint64_t per_fork = uint64_t(p.prompt_tokens) + branch_tokens(p) + uint64_t(p.gen);
    const uint64_t pages = (n + 1) * (per_fork / page + 2);
    return (n + 1) * a.state_bytes + pages * page * a.kv_bytes_per_token;
}

std::unique_ptr<Run> start_cow(const CowParams& p, const Params& raw) {
    return std::make_unique<CowRun>(p, raw);
}

}  // namespace k3
