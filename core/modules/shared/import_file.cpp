#include "core/experiments/import.h"

#include <algorithm>

#include "core/base/json_read.h"
#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/experiments/report_read.h"
#include "core/fleet/trace.h"
#include "core/fleet/workload_source.h"
#include "core/model/hf_config.h"

namespace k3 {

namespace {

// The module a config.json applies to: its custom model (core/modules/memory/memory.h).
constexpr const char* kConfigModule = "memory";

std::string base_name(std::string_view name) {
    const size_t slash = name.find_last_of("/\\");
    return std::string(slash == std::string_view::npos ? name : name.substr(slash + 1));
}

ImportResult refused(const std::string& file, const std::string& why) {
    ImportResult r;
    r.error = shown_text(file) + ": " + why;
    return r;
}

// Read with the limits a run reads it with, so that what imports also loads.
ImportResult import_trace(const std::string& file, std::string_view bytes) {
    const TraceResult t = parse_mooncake(bytes, workload_trace_limits());
    if (!t.ok()) return refused(file, t.error);
    ImportResult r;
    r.kind = ImportKind::trace;
    r.data_name = kImportedTracePrefix + file;
    r.summary = "Mooncake trace: " + format_grouped(double(t.trace.requests.size())) + " requests, " +
                format_grouped(double(t.trace.prompt_tokens())) + " prompt tokens";
    return r;
}

// The field a parameter came from, for messages about its value.
std::string source_of(const HfConfigImport& hf, const std::string& key) {
    for (const HfParam& p : hf.params)
        if (p.key == key) return p.source;
    return key;
}

// preset=custom and every custom-model parameter (those active when preset=custom): the config's
// value, or the declared default for what the config's kind of attention does not use, so that
// nothing of an earlier custom model stays.
KeyValues custom_values(const Experiment& e, const HfConfigImport& hf) {
    const Params defaults(&e.params);
    KeyValues kv = {{"preset", "custom"}};
    for (const ParamSpec& s : e.params) {
        if (s.active_key != "preset" || s.active_value != "custom") continue;
        std::string value = defaults.text(s.key);
        for (const HfParam& p : hf.params)
            if (p.key == s.key) value = p.value;
        kv.emplace_back(s.key, value);
    }
    return kv;
}

// Validated as the module validates a link or a CLI line: a value it refuses is an error naming the
// config field it came from.
ImportResult import_config(const std::string& file, const JsonValue& root) {
    const HfConfigImport hf = read_hf_config(root);
    if (!hf.ok()) return refused(file, hf.error);
    const Experiment* e = find_experiment(kConfigModule);
    if (!e)
        return refused(file, std::string("this build has no module '") + kConfigModule + "' to apply it to");
    ImportResult r;
    r.params = custom_values(*e, hf);
    for (const HfParam& p : hf.params) {
        bool declared = false;
        for (const auto& [k, v] : r.params) declared = declared || k == p.key;
        if (!declared) return refused(file, "module " + e->id + " has no parameter '" + p.key + "'");
    }
    ParsedParams pp = parse_params(e->params, r.params, RangePolicy::strict);
    if (pp.ok())
        for (ParamIssue& i : e->check(pp.params)) pp.issues.push_back(std::move(i));
    for (const ParamIssue& i : pp.issues)
        if (i.level == ParamIssue::error) return refused(file, source_of(hf, i.key) + ": " + i.message);
    r.kind = ImportKind::model_config;
    r.module = e->id;
    for (const HfParam& p : hf.params) r.sources.push_back({p.key, p.value, p.source});
    r.summary = hf.name;
    return r;
}

ImportResult import_report(const std::string& file, const JsonValue& root) {
    ReportRead rr = report_from_json(root);
    if (!rr.ok()) return refused(file, rr.error);
    const bool pair = rr.baseline.has_value();
    for (const Report* rep : {&rr.report, pair ? &*rr.baseline : nullptr})
        if (rep && !find_experiment(rep->module))
            return refused(file, std::string(pair ? (rep == &rr.report ? "report." : "baseline.") : "") +
                                     "module: \"" + shown_text(rep->module) +
                                     "\" is not a module of this build");
    ImportResult r;
    r.kind = ImportKind::report;
    r.module = rr.report.module;
    r.summary = "report of module " + r.module + ": " + format_grouped(double(rr.report.scalars.size())) +
                " figures, " + format_grouped(double(rr.report.checks.size())) + " checks" +
                (pair ? ", with its baseline" : "");
    r.report = std::move(rr.report);
    r.baseline = std::move(rr.baseline);
    return r;
}

// A trace's first request: its first line that is not blank parses as a JSON object with a Mooncake
// field (the whole file is not one JSON value).
bool looks_like_trace(std::string_view bytes) {
    if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
    for (size_t start = 0; start < bytes.size();) {
        const size_t end = std::min(bytes.find_first_of("\r\n", start), bytes.size());
        const std::string_view line = bytes.substr(start, end - start);
        start = end + 1;
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
        const JsonParse first = parse_json(line);
        return first.ok() && (first.value.find("input_length") || first.value.find("hash_ids"));
    }
    return false;
}

}  // namespace

ImportResult import_bytes(std::string_view name, std::string_view bytes) {
    const std::string file = base_name(name);
    if (bytes.empty()) return refused(file, "the file is empty");
    const JsonParse whole = parse_json(bytes);
    if (whole.ok()) {
        const JsonValue& v = whole.value;
        if (is_report_json(v)) return import_report(file, v);
        if (is_hf_config(v)) return import_config(file, v);
        if (v.find("input_length") || v.find("hash_ids")) return import_trace(file, bytes);  // one request
        return refused(file,
                       "not a file this import reads: JSON with none of \"module\" (a report), "
                       "\"model_type\" (a config.json), or \"input_length\" and \"hash_ids\" (a trace line)");
    }
    if (looks_like_trace(bytes)) return import_trace(file, bytes);
    return refused(file, whole.error);
}

bool read_import_file(const std::string& path, std::string& bytes, std::string& error) {
    // A trace is the largest file an import takes; a config or a report is far smaller.
    return read_file_bytes(path, workload_trace_limits().max_bytes, bytes, error);
}

}  // namespace k3
