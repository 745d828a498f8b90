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
    switch (r.kind) {
        case ImportKind::trace: import_trace(r.data_name, std::move(bytes)); break;
        case ImportKind::model_config: open_module(r.module, r.params); break;
        case ImportKind::report: import_baseline(r); break;
    }
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

// A report becomes the pinned baseline in its module; a pair's report is opened as the current run
// (its parameters, run again) with the pair's baseline beside it.
void App::import_baseline(const ImportResult& r) {
    const Report& base = r.baseline ? *r.baseline : *r.report;
    const Experiment* e = find_experiment(base.module);
    if (!e) return;
    KeyValues kv;
    for (const auto& p : base.params) kv.emplace_back(p.key, p.text);
    ParsedParams pp = parse_params(e->params, kv, RangePolicy::clamp);
    if (r.baseline) {
        KeyValues now;
        for (const auto& p : r.report->params) now.emplace_back(p.key, p.text);
        open_module(r.report->module, now);
    } else if (exp_ != e) {
        select(e);
    }
    pin_ = {e, pp.params};
    baseline_params_ = pp.params;
    baseline_ = base;
    has_baseline_ = true;
    baseline_run_.reset();
    refresh_baseline();
    publish_hash();
}

}  // namespace k3::ui
