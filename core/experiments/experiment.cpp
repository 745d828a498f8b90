#include "core/experiments/experiment.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "core/base/numfmt.h"

namespace k3 {

StagedRun::StagedRun(std::string module, const Params& p) {
    report_.module = std::move(module);
    report_.set_params(p);
}

void StagedRun::add_stage(std::string name, double weight, StageFn fn) {
    stages_.push_back({std::move(name), weight, std::move(fn)});
}

void StagedRun::add_step(std::string name, double weight, std::function<void()> fn) {
    add_stage(std::move(name), weight, [fn = std::move(fn)](const Deadline&) {
        fn();
        return 1.0;
    });
}

double StagedRun::step(double budget_ms) {
    const Stopwatch sw;
    const Deadline deadline(budget_ms);
    while (current_ < stages_.size()) {
        Stage& s = stages_[current_];
        s.progress = std::clamp(s.fn(deadline), 0.0, 1.0);
        if (s.progress >= 1.0) ++current_;
        if (deadline.passed()) break;
    }
    wall_ms_ += sw.ms();
    double total = 0, done = 0;
    for (const auto& s : stages_) {
        total += s.weight;
        done += s.weight * s.progress;
    }
    if (current_ >= stages_.size()) {
        bool have = false;
        for (const auto& t : report_.timing.scalars) have |= t.key == "run_ms";
        if (!have) report_.timing_scalar("run_ms", "Run time (wall clock)", "ms", wall_ms_);
        return 1.0;
    }
    return total > 0 ? std::min(done / total, 0.999) : 0.0;
}

std::string StagedRun::stage() const { return current_ < stages_.size() ? stages_[current_].name : "done"; }

namespace {
class OneStepRun final : public StagedRun {
  public:
    OneStepRun(std::string module, const Params& raw, std::string stage, std::function<void(Report&)> fill)
        : StagedRun(std::move(module), raw) {
        add_step(std::move(stage), 1, [this, fill = std::move(fill)] { fill(report_); });
    }
};
}  // namespace

std::unique_ptr<Run> one_step_run(std::string module, const Params& raw, std::string stage,
                                  std::function<void(Report&)> fill) {
    return std::make_unique<OneStepRun>(std::move(module), raw, std::move(stage), std::move(fill));
}

static Report finish(std::unique_ptr<Run> run) {
    while (run->step(1000.0) < 1.0) {
    }
    return run->report();
}

Report run_to_end(const Experiment& e, const Params& p) { return finish(e.start(p)); }

Report run_falsified_to_end(const Experiment& e, const Params& p, size_t falsifier) {
    return finish(e.start_falsified(p, falsifier));
}

bool key_matches(const std::string& pattern, const std::string& key) {
    if (!pattern.empty() && pattern.back() == '*')
        return key.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
    return pattern == key;
}

// How far past the limits a cost is: 1 at the nearer limit, above 1 past it.
static double over_limits(const RunCost& c) {
    return std::max(c.seconds / kRunSecondsLimit, c.bytes / kRunBytesLimit);
}

// The parameter a user changed from its default to name in a refusal, since the module's own key is
// often not the one that was moved (`sessions=4096` against a key of `event_block_tokens`): of those
// whose default alone lowers the cost, first one that brings the run within the limits, then a number
// before a choice (a smaller number is advice; "another trace" rarely is), then the lowest cost. The
// cost unchanged when none lowers it.
static RunCost with_moved_cause(const Experiment& e, const Params& p, RunCost c) {
    const double now = over_limits(c);
    auto rank = [](const ParamSpec& s, double over) { return std::tuple(over > 1, s.is_textual(), over); };
    const ParamSpec* best = nullptr;
    RunCost at_default;
    for (const ParamSpec& s : p.specs()) {
        if (p.is_default(s.key) || !p.is_active(s)) continue;
        Params q = p;
        q.reset(s.key);
        const RunCost r = e.estimate(q);
        if (over_limits(r) >= now * 0.999) continue;
        if (!best || rank(s, over_limits(r)) < rank(*best, over_limits(at_default)))
            best = &s, at_default = r;
    }
    if (!best) return c;
    const std::string& key = best->key;
    c.fix = best->is_textual()       ? "choose another " + key
            : p.num(key) > best->def ? "make " + key + " smaller than " + p.text(key)
                                     : "make " + key + " larger than " + p.text(key);
    c.fix += " (at its default, " + Params(&p.specs()).text(key) +
             (over_limits(at_default) > 1 ? ", still " : ", ") + "about " +
             format_sig(at_default.seconds, 2) + " s and " + format_bytes(at_default.bytes) + ")";
    c.key = key;
    return c;
}

RunCost Experiment::cost(const Params& p) const {
    if (!estimate) return {};
    RunCost c = estimate(p);
    return over_limits(c) > 1 ? with_moved_cause(*this, p, std::move(c)) : c;
}

std::vector<ParamIssue> run_budget_issues(const RunCost& c) {
    std::vector<ParamIssue> v;
    const std::string what = c.counted.empty() ? "" : " (" + c.counted + ")";
    const std::string fix = !c.fix.empty() ? ": " + c.fix
                            : c.key.empty()
                                ? ""
                                : ": make " + c.key + (c.larger_is_cheaper ? " larger" : " smaller");
    if (!(c.seconds <= kRunSecondsLimit))
        v.push_back({ParamIssue::error, c.key,
                     "the run would take about " + format_sig(c.seconds, 3) + " s natively" + what +
                         ", above the limit of " + format_sig(kRunSecondsLimit, 3) + " s" + fix});
    if (!(c.bytes <= kRunBytesLimit))
        v.push_back({ParamIssue::error, c.key,
                     "the run would hold about " + format_bytes(c.bytes) + what + ", above the limit of " +
                         format_bytes(kRunBytesLimit) + fix});
    return v;
}

std::vector<ParamIssue> Experiment::check(const Params& p) const {
    std::vector<ParamIssue> v = validate ? validate(p) : std::vector<ParamIssue>{};
    for (const ParamIssue& i : v)
        if (i.level == ParamIssue::error) return v;
    if (estimate)
        for (ParamIssue& i : run_budget_issues(cost(p))) v.push_back(std::move(i));
    return v;
}

const FalsifierInfo* Experiment::falsifier_for(const std::string& key) const {
    for (const FalsifierInfo& f : falsifiers)
        for (const std::string& k : f.keys)
            if (key_matches(k, key)) return &f;
    return nullptr;
}

}  // namespace k3
