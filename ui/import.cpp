// Files users bring (core/experiments/import.h): a request trace, a hybrid model's
// config.json, a report exported earlier. Dropped on the window or the page, picked with the Import
// button, or given to the desktop app with --import. A refused file changes nothing.
#include "core/experiments/import.h"
#include "core/base/data_files.h"
#include "core/experiments/registry.h"
#include "ui/app.h"

namespace k3::ui {

void App::import_path(const std::string& path) {
    std::string bytes, error;
    if (!read_import_file(path, bytes, error)) {
        set_notice("Import refused, nothing was changed. " + error);
        return;
    }
    import_file(path, std::move(bytes));
}

void App::import_file(const std::string& name, std::string bytes) {
    const ImportResult r = import_bytes(name, bytes);
    if (!r.ok()) {
        set_notice("Import refused, nothing was changed. " + r.error);
        return;
    }
    std::string refused;
    switch (r.kind) {
        case ImportKind::trace: import_trace(r.data_name, std::move(bytes)); break;
        case ImportKind::model_config: open_module(r.module, r.params); break;
        case ImportKind::report: refused = import_baseline(r); break;
    }
    if (!refused.empty())
        set_notice("Import refused, nothing was changed. " + name + ": " + refused);
    else
        notify("Imported " + name + ": " + r.summary);
}

// Registered under its own name (the page has no file system; the desktop app reads it the same
// way), then used by the module on screen if it reads traces, and by any other through `trace`.
void App::import_trace(const std::string& data_name, std::string bytes) {
    register_data_file(data_name, std::move(bytes));
    if (!exp_ || !params_.spec("trace")) return;
    params_.set_text("trace", data_name);
    params_changed(true);
}

static KeyValues params_of(const Report& r) {
    KeyValues kv;
    for (const auto& p : r.params) kv.emplace_back(p.key, p.text);
    return kv;
}

// A report becomes the pinned baseline in its module; a pair's report is opened as the current run
// (its parameters, run again) with the pair's baseline beside it. Its parameters must still read as
// the module declares them, or the pin in the link would stand for another run than the one shown.
std::string App::import_baseline(const ImportResult& r) {
    const Report& base = r.baseline ? *r.baseline : *r.report;
    const Experiment* e = find_experiment(base.module);
    if (!e) return "this build has no module '" + base.module + "'";
    ParsedParams pp = parse_params(e->params, params_of(base), RangePolicy::strict);
    for (const ParamIssue& i : pp.issues)
        if (i.level == ParamIssue::error)
            return "its parameters do not read in module " + e->id + ": " + i.message;
    if (r.baseline)
        open_module(r.report->module, params_of(*r.report));
    else if (exp_ != e)
        select(e);
    set_baseline({e, std::move(pp.params)}, base);
    return {};
}

}  // namespace k3::ui
