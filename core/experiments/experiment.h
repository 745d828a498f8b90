// The Experiment API: a module is one declaration (id, texts, parameters) plus a function that
// starts a run. Runs advance in time-boxed slices so the page stays responsive; the CLI steps a run
// to the end. Nothing else (UI, URL, CLI, tests) needs to know anything about a module.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/experiments/param.h"
#include "core/experiments/report.h"

namespace k3 {

class Run {
  public:
    virtual ~Run() = default;
    // Work for about budget_ms, return progress in [0, 1]; 1 means finished and report() is final.
    virtual double step(double budget_ms) = 0;
    virtual const Report& report() const = 0;
    // What the run is doing now, for the progress bar ("replaying trace: 4,100 / 12,031").
    virtual std::string stage() const { return {}; }
};

// A run made of stages executed in order. A stage gets a deadline and returns its own progress in
// [0, 1]; it is called again until it returns 1. Stage weights set their share of the progress bar.
class StagedRun : public Run {
  public:
    using StageFn = std::function<double(const Deadline&)>;
    double step(double budget_ms) override;
    const Report& report() const override { return report_; }
    std::string stage() const override;

  protected:
    explicit StagedRun(std::string module, const Params& p);
    void add_stage(std::string name, double weight, StageFn fn);
    // A stage that does all its work in one call.
    void add_step(std::string name, double weight, std::function<void()> fn);
    Report report_;

  private:
    struct Stage {
        std::string name;
        double weight;
        StageFn fn;
        double progress = 0;
    };
    std::vector<Stage> stages_;
    size_t current_ = 0;
    double wall_ms_ = 0;
};

// A run of one step that builds the whole report (a closed-form module): `fill(report)`.
std::unique_ptr<Run> one_step_run(std::string module, const Params& raw, std::string stage,
                                  std::function<void(Report&)> fill);

// A figure the Overview page computes live and links to its module: run the module with `params`
// (on top of its defaults) and show scalar `scalar_key` with a caption. `lead`: shown first, before
// the other modules' figures (the flagship model's).
struct Headline {
    std::string caption;
    std::vector<std::pair<std::string, std::string>> params;
    std::string scalar_key;
    bool lead = false;
};

// How a check can be made to fail: a deliberate corruption of a run's data or inputs (flip a byte of a
// state, drop a page, skew a counter, lie about a size) that the checks `keys` must catch. `params`
// (on top of the defaults) set up the run it is applied to; the same values make the intact run it
// is compared with (k3cli audit-checks, core/experiments/check_audit.h).
struct FalsifierInfo {
    std::string id;
    std::string does;               // one line: "flips one bit of the resumed state" ("fails if: ...")
    std::vector<std::string> keys;  // check keys; a trailing '*' matches any rest ("work_ledgers_agree*")
    std::vector<std::pair<std::string, std::string>> params;
};

// Problems with a parameter combination that single-parameter ranges cannot express
// (a ring smaller than the draft length, a run that would exceed the page's memory budget).
using Validator = std::function<std::vector<ParamIssue>(const Params&)>;

// The limits of an accepted run, natively (issue 20): every run is estimated before it starts and
// refused past them, so none takes longer or holds more. The page steps the same runs in slices.
inline constexpr double kRunSecondsLimit = 10.0;
inline constexpr double kRunBytesLimit = 1024.0 * 1024.0 * 1024.0;

// What a run will cost, estimated from its parameters alone before it starts: native seconds of work
// and bytes held at its peak, with what was counted ("1.2 M request-iterations") and the parameter a
// refusal names (the one that drives the cost most).
struct RunCost {
    double seconds = 0, bytes = 0;
    std::string counted, key;
    bool larger_is_cheaper = false;  // of the key's parameter: a budget or an interval
    std::string fix;  // what a refusal tells the user to change, when the key is one they moved
};
// The refusals of a run past the limits ("the run would take about 37 s natively (...), above the
// limit of 10 s"), each on the cost's key; none within them.
std::vector<ParamIssue> run_budget_issues(const RunCost& c);

struct Experiment {
    int number = 0;  // module number (README's module table): sidebar and list order
    std::string id, title, component, purpose;
    std::string how_it_works, where_it_does_not_pay;  // Markdown (core/base/markdown.h), from module_doc.h
    std::vector<ParamSpec> params;
    Validator validate;  // optional
    std::function<std::unique_ptr<Run>(const Params&)> start;
    // The run's cost before it starts (every module has one: a unit test checks).
    std::function<RunCost(const Params&)> estimate;
    bool live = true;  // cheap enough to rerun while a slider moves
    // Data files (core/base/data_files.h) a run with these parameters reads; the web page fetches
    // them from its own server before starting the run. Optional.
    std::function<std::vector<std::string>(const Params&)> data_files;
    std::vector<Headline> headlines;  // figures for the Overview page (cheap runs only)
    // Every check's falsifiers, and a run with falsifier i applied.
    std::vector<FalsifierInfo> falsifiers;
    std::function<std::unique_ptr<Run>(const Params&, size_t falsifier)> start_falsified;
    // More parameter sets under which checks appear that the defaults do not reach (audit-checks).
    std::vector<std::vector<std::pair<std::string, std::string>>> audit_params;

    Params defaults() const { return Params(&params); }
    // The first falsifier naming check `key` (null if none).
    const FalsifierInfo* falsifier_for(const std::string& key) const;
    // The validator's issues, then, if it found no error, the run budget's refusals (run_budget_issues):
    // what the CLI (exit 2) and the page show before a run starts.
    std::vector<ParamIssue> check(const Params& p) const;
    // The estimate; past the limits, its key is the moved parameter whose default lowers it most.
    RunCost cost(const Params& p) const;
};

// Runs to completion (CLI, tests); with a falsifier (an index into e.falsifiers) applied.
Report run_to_end(const Experiment& e, const Params& p);
Report run_falsified_to_end(const Experiment& e, const Params& p, size_t falsifier);

// Whether check key `key` is one that falsifier key pattern `pattern` names.
bool key_matches(const std::string& pattern, const std::string& key);

}  // namespace k3
