// A module with typed parameters, as every module in core/modules/ declares itself:
//
//     Experiment make_memory_experiment() {
//         return make_experiment(Module<MemoryParams>{
//             .number = 2, .id = "memory", .title = "Fixed state vs growing KV", .component = "foundation",
//             .purpose = "...", .params = memory_params(), .validate = validate_memory,
//             .start = [](const MemoryParams& p, const Params& raw) { return start_memory(p, raw); }});
//     }
//     K3_REGISTER_EXPERIMENT(make_memory_experiment);
//
// make_experiment() turns it into the generic Experiment the UI, URL, CLI and tests use: the
// ParamList gives the declarations, the validator and the run get the parsed struct, and the
// module's Markdown (core/modules/<id>/<id>.md, module_doc.h) gives the texts and the long help.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/experiments/experiment.h"
#include "core/experiments/module_doc.h"
#include "core/experiments/param_list.h"

namespace k3 {

// A falsifier of a module with parameters P: `corrupt` marks the parameters of a run so that the
// run damages its own data at one point (P has a `falsify` member the run reads; it is no declared
// parameter, so links, the CLI and reports never see it). See FalsifierInfo.
template <class P>
struct Falsifier {
    std::string id, does;
    std::vector<std::string> keys;
    std::function<void(P&)> corrupt;
    std::vector<std::pair<std::string, std::string>> params;  // on top of the defaults
};

// What a run with parameters P will cost (Experiment::estimate, RunCost): native seconds and peak
// bytes, what was counted, and `on`, the field of P a refusal names (the parameter driving the cost).
struct RunEstimate {
    double seconds = 0, bytes = 0;
    std::string counted;
    const void* on = nullptr;
    bool larger_is_cheaper = false;  // the refusal says "make it larger" (a budget, an interval)
};

template <class P>
struct Module {
    int number = 0;  // sidebar and list order (README's module table)
    std::string id, title, component, purpose;
    ParamList<P> params;
    std::function<void(const P&, Issues&)> validate;  // optional
    std::function<RunEstimate(const P&)> estimate;    // what a run costs (every module)
    // `raw` is what the report's "params" records (StagedRun takes it).
    std::function<std::unique_ptr<Run>(const P&, const Params& raw)> start;
    std::function<std::vector<std::string>(const P&)> data_files;  // optional
    bool live = true;
    std::vector<Headline> headlines;
    std::vector<Falsifier<P>> falsifiers;
    std::vector<std::vector<std::pair<std::string, std::string>>> audit_params;
};

// Applies the module's doc to its declaration: texts, and help of the parameters that have none.
void apply_module_doc(Experiment& e);

template <class P>
Experiment make_experiment(Module<P> m) {
    auto list = std::make_shared<const ParamList<P>>(std::move(m.params));
    Experiment e;
    e.number = m.number;
    e.id = std::move(m.id);
    e.title = std::move(m.title);
    e.component = std::move(m.component);
    e.purpose = std::move(m.purpose);
    e.params = list->specs();
    e.live = m.live;
    e.headlines = std::move(m.headlines);
    if (auto v = std::move(m.validate))
        e.validate = [list, v](const Params& raw) {
            const P p = list->read(raw);
            Issues issues([&](const void* field) { return list->key_at(p, field); });
            v(p, issues);
            return issues.take();
        };
    if (auto est = std::move(m.estimate))
        e.estimate = [list, est](const Params& raw) {
            const P p = list->read(raw);
            const RunEstimate r = est(p);
            const std::string* key = r.on ? list->key_at(p, r.on) : nullptr;
            if (r.on && !key) throw std::logic_error("RunEstimate: `on` is not a declared parameter");
            return RunCost{r.seconds, r.bytes, r.counted, key ? *key : std::string(), r.larger_is_cheaper};
        };
    std::vector<std::function<void(P&)>> corruptions;
    for (Falsifier<P>& f : m.falsifiers) {
        e.falsifiers.push_back({std::move(f.id), std::move(f.does), std::move(f.keys), std::move(f.params)});
        corruptions.push_back(std::move(f.corrupt));
    }
    e.audit_params = std::move(m.audit_params);
    e.start_falsified = [list, start = m.start, corruptions](const Params& raw, size_t i) {
        P p = list->read(raw);
        corruptions.at(i)(p);
        return start(p, raw);
    };
    e.start = [list, start = std::move(m.start)](const Params& raw) { return start(list->read(raw), raw); };
    if (auto files = std::move(m.data_files))
        e.data_files = [list, files](const Params& raw) { return files(list->read(raw)); };
    apply_module_doc(e);
    return e;
}

}  // namespace k3
