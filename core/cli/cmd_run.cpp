#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/cli/commands.h"
#include "core/experiments/import.h"
#include "core/experiments/registry.h"
#include "core/fleet/trace.h"

namespace k3::cli {

static void print_text(const Experiment& e, const Report& r) {
    std::printf("%s: %s\n\n", e.id.c_str(), e.title.c_str());
    for (const auto& s : r.scalars)
        std::printf("  %-44s %s\n", s.label.c_str(), format_with_unit(s.value, s.unit).c_str());
    if (!r.timing.scalars.empty()) {
        std::printf("\n  timing (wall clock)\n");
        for (const auto& s : r.timing.scalars)
            std::printf("  %-44s %s\n", s.label.c_str(), format_with_unit(s.value, s.unit).c_str());
        for (const auto& t : r.timing.texts) std::printf("  %-44s %s\n", t.label.c_str(), t.text.c_str());
    }
    for (const auto& t : r.tables) {
        // Format every cell first so columns can be as wide as their widest entry.
        std::vector<std::vector<std::string>> cells{t.columns};
        for (const auto& row : t.rows) {
            cells.emplace_back();
            for (size_t i = 0; i < row.size(); ++i) {
                if (const double* d = std::get_if<double>(&row[i]))
                    cells.back().push_back(format_with_unit(*d, i < t.units.size() ? t.units[i] : ""));
                else
                    cells.back().push_back(std::get<std::string>(row[i]));
            }
        }
        std::vector<size_t> width;
        for (const auto& row : cells)
            for (size_t i = 0; i < row.size(); ++i) {
                if (width.size() <= i) width.push_back(0);
                width[i] = std::max(width[i], row[i].size());
            }
        std::printf("\n  %s\n", t.name.c_str());
        for (const auto& row : cells) {
            std::printf("   ");
            for (size_t i = 0; i < row.size(); ++i) std::printf(" %-*s", int(width[i]), row[i].c_str());
            std::printf("\n");
        }
    }
    std::printf("\n");
    for (const auto* v : {&r.checks, &r.timing.checks})
        for (const auto& c : *v)
            std::printf("  [%s] %s: %s\n", c.passed ? "pass" : "FAIL", c.name.c_str(), c.detail.c_str());
    for (const auto& n : r.notes) std::printf("  note: %s\n", n.c_str());
}

// The run's cost before it starts (Experiment::estimate) and the limits, as one JSON line.
static void print_estimate(const Experiment& e, const Params& p) {
    const RunCost c = e.cost(p);
    JsonWriter w;
    w.begin_object()
        .field("seconds", c.seconds)
        .field("bytes", c.bytes)
        .field("counted", c.counted)
        .field("key", c.key)
        .field("limit_seconds", kRunSecondsLimit)
        .field("limit_bytes", kRunBytesLimit)
        .end_object();
    std::printf("%s\n", w.str().c_str());
}

// What a run is asked for: parameters, output format, and a file to import (--import).
struct RunRequest {
    enum { text, json, csv } fmt = text;
    bool pretty = false, estimate_only = false;
    KeyValues kv;
    std::string import_path;
};

static bool parse_run_args(const Args& args, RunRequest& q) {
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json")
            q.fmt = RunRequest::json;
        else if (a == "--csv")
            q.fmt = RunRequest::csv;
        else if (a == "--pretty")
            q.pretty = true;
        else if (a == "--estimate")
            q.estimate_only = true;
        else if (a == "--import" && i + 1 < args.size() && q.import_path.empty())
            q.import_path = args[++i];
        else if (a.find('=') != std::string::npos && a[0] != '-')
            q.kv.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
        else {
            std::fprintf(
                stderr,
                "k3cli run: bad argument '%s' (expected key=value, --json, --csv, --pretty, --estimate "
                "or one --import PATH)\n",
                a.c_str());
            return false;
        }
    }
    return true;
}

// --import PATH (core/experiments/import.h): a trace becomes trace=PATH (this build reads the
// disk), a config.json the custom model's parameters, a report the baseline. False with a message
// when the file is refused or does not fit the module.
static bool apply_import(const Experiment& e, const std::string& path, KeyValues& kv,
                         std::optional<Report>& baseline) {
    std::string bytes, error;
    if (!read_file_bytes(path, TraceLimits{}.max_bytes, bytes, error)) {
        std::fprintf(stderr, "k3cli run %s: --import: %s\n", e.id.c_str(), error.c_str());
        return false;
    }
    ImportResult im = import_bytes(path, bytes);
    if (im.ok() && im.kind == ImportKind::trace &&
        std::none_of(e.params.begin(), e.params.end(), [](const ParamSpec& s) { return s.key == "trace"; }))
        im.error = path + ": a request trace, and module " + e.id + " has no trace parameter";
    if (im.ok() && im.kind != ImportKind::trace && im.module != e.id)
        im.error =
            path + ": " +
            (im.kind == ImportKind::report ? "a report of module " : "a model config.json for module ") +
            im.module + ", not " + e.id;
    if (!im.ok()) {
        std::fprintf(stderr, "k3cli run %s: --import: %s\n", e.id.c_str(), im.error.c_str());
        return false;
    }
    std::fprintf(stderr, "k3cli run %s: imported %s\n", e.id.c_str(), im.summary.c_str());
    if (im.kind == ImportKind::trace) kv.emplace_back("trace", path);
    if (im.kind == ImportKind::model_config) kv.insert(kv.end(), im.params.begin(), im.params.end());
    if (im.kind == ImportKind::report) baseline = std::move(im.report);
    return true;
}

// The run's figures beside the baseline's (same key), after the readable summary.
static void print_baseline(const Report& r, const Report& base) {
    std::printf("\n  against the baseline\n");
    for (const auto& s : r.scalars)
        if (const Scalar* b = base.find_scalar(s.key))
            std::printf("  %-44s %s (baseline %s)\n", s.label.c_str(),
                        format_with_unit(s.value, s.unit).c_str(),
                        format_with_unit(b->value, b->unit).c_str());
}

static void print_report(const Experiment& e, const RunRequest& q, const Report& r,
                         const std::optional<Report>& base) {
    if (q.fmt == RunRequest::json)
        std::printf("%s\n", (base ? report_pair_json(r, *base, q.pretty) : report_json(r, q.pretty)).c_str());
    else if (q.fmt == RunRequest::csv)
        std::printf("%s", (base ? report_pair_csv(r, *base) : report_csv(r)).c_str());
    else
        print_text(e, r);
    if (base && q.fmt == RunRequest::text) print_baseline(r, *base);
}

static int cmd_run(const Args& args) {
    if (args.empty()) {
        std::fprintf(stderr, "k3cli run: missing MODULE (k3cli list shows them)\n");
        return 2;
    }
    const Experiment* e = find_experiment(args[0]);
    if (!e) {
        std::fprintf(stderr, "k3cli run: unknown module '%s' (k3cli list shows them)\n", args[0].c_str());
        return 2;
    }
    RunRequest q;
    std::optional<Report> baseline;
    if (!parse_run_args(args, q)) return 2;
    if (!q.import_path.empty() && !apply_import(*e, q.import_path, q.kv, baseline)) return 2;
    ParsedParams pp = parse_params(e->params, q.kv, RangePolicy::strict);
    for (const auto& issue : e->check(pp.params)) pp.issues.push_back(issue);
    bool bad = false;
    for (const auto& issue : pp.issues) {
        std::fprintf(stderr, "k3cli run %s: %s: %s\n", e->id.c_str(),
                     issue.level == ParamIssue::error ? "error" : "warning", issue.message.c_str());
        bad |= issue.level == ParamIssue::error;
    }
    if (q.estimate_only) print_estimate(*e, pp.params);
    if (bad) return 2;
    if (q.estimate_only) return 0;
    const Report r = run_to_end(*e, pp.params);
    print_report(*e, q, r, baseline);
    if (!r.all_checks_passed()) {
        for (const auto* v : {&r.checks, &r.timing.checks})
            for (const auto& c : *v)
                if (!c.passed)
                    std::fprintf(stderr, "k3cli run %s: check failed: %s: %s\n", e->id.c_str(),
                                 c.name.c_str(), c.detail.c_str());
        return 1;
    }
    return 0;
}

K3_REGISTER_COMMAND("run", "MODULE [key=value ...] [--json|--csv] [--pretty] [--estimate] [--import PATH]",
                    "run a module with the given parameters; exit 1 if one of its checks fails (--estimate: "
                    "its cost and the limits, without running; --import: a Mooncake trace sets trace=PATH, a "
                    "model's config.json the memory module's custom model, an exported report the baseline "
                    "that --json and --csv then write beside the run)",
                    cmd_run, 20);

}  // namespace k3::cli
