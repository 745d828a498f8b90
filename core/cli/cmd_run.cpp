#include <algorithm>
#include <cstdio>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/cli/commands.h"
#include "core/experiments/registry.h"

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
    enum { text, json, csv } fmt = text;
    bool pretty = false, estimate_only = false;
    std::vector<std::pair<std::string, std::string>> kv;
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json")
            fmt = json;
        else if (a == "--csv")
            fmt = csv;
        else if (a == "--pretty")
            pretty = true;
        else if (a == "--estimate")
            estimate_only = true;
        else if (a.find('=') != std::string::npos && a[0] != '-')
            kv.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
        else {
            std::fprintf(stderr,
                         "k3cli run: bad argument '%s' (expected key=value, --json, --csv, --pretty or "
                         "--estimate)\n",
                         a.c_str());
            return 2;
        }
    }
    ParsedParams pp = parse_params(e->params, kv, RangePolicy::strict);
    for (const auto& issue : e->check(pp.params)) pp.issues.push_back(issue);
    bool bad = false;
    for (const auto& issue : pp.issues) {
        std::fprintf(stderr, "k3cli run %s: %s: %s\n", e->id.c_str(),
                     issue.level == ParamIssue::error ? "error" : "warning", issue.message.c_str());
        bad |= issue.level == ParamIssue::error;
    }
    if (estimate_only) print_estimate(*e, pp.params);
    if (bad) return 2;
    if (estimate_only) return 0;
    const Report r = run_to_end(*e, pp.params);
    if (fmt == json)
        std::printf("%s\n", report_json(r, pretty).c_str());
    else if (fmt == csv)
        std::printf("%s", report_csv(r).c_str());
    else
        print_text(*e, r);
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

K3_REGISTER_COMMAND("run", "MODULE [key=value ...] [--json|--csv] [--pretty] [--estimate]",
                    "run a module with the given parameters; exit 1 if one of its checks fails (--estimate: "
                    "its cost and the limits, without running)",
                    cmd_run, 20);

}  // namespace k3::cli
