// Fuzz target: the files users import (core/experiments/import.h) and the JSON reader under
// them. Any input must give a result or an error naming the file (and, from the reader, the line and
// column), never a crash, and nothing to apply comes with an error. What is accepted must hold up: a
// config.json's parameters are accepted by the memory module as they are, a report written again
// reads back to the same text, a trace is registered under its file name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/base/json_read.h"
#include "core/experiments/import.h"
#include "core/experiments/registry.h"
#include "core/experiments/report_read.h"

static void json_reader(std::string_view in) {
    k3::JsonLimits lim;  // small, so that every limit is reached
    lim.max_depth = 8;
    lim.max_values = 512;
    lim.max_string_bytes = 64;
    const k3::JsonParse p = k3::parse_json(in, lim);
    if (p.ok()) return;
    const std::string where =
        "line " + std::to_string(p.error_line) + ", column " + std::to_string(p.error_column) + ": ";
    if (p.error.rfind(where, 0) != 0 || p.error_line == 0 || p.error_column == 0) std::abort();
    if (p.value.type != k3::JsonType::null || !p.value.items.empty()) std::abort();
}

static void accepted(const k3::ImportResult& r) {
    switch (r.kind) {
        case k3::ImportKind::trace:
            if (r.data_name != "imported:f.json") std::abort();
            break;
        case k3::ImportKind::model_config: {
            const k3::Experiment* e = k3::find_experiment(r.module);
            if (!e || r.params.empty()) std::abort();
            if (!k3::parse_params(e->params, r.params, k3::RangePolicy::strict).ok()) std::abort();
            break;
        }
        case k3::ImportKind::report: {
            if (!r.report || !k3::find_experiment(r.report->module)) std::abort();
            const std::string json =
                r.baseline ? k3::report_pair_json(*r.report, *r.baseline) : k3::report_json(*r.report);
            const k3::ReportRead back = k3::report_from_json(json);
            if (!back.ok() || back.baseline.has_value() != r.baseline.has_value()) std::abort();
            const std::string again = back.baseline ? k3::report_pair_json(back.report, *back.baseline)
                                                    : k3::report_json(back.report);
            if (again != json) std::abort();
            break;
        }
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    json_reader(in);
    const k3::ImportResult r = k3::import_bytes("dir/f.json", in);
    if (r.ok()) {
        accepted(r);
    } else if (r.error.rfind("f.json: ", 0) != 0 || !r.params.empty() || r.report || r.baseline ||
               !r.data_name.empty()) {
        std::abort();
    }
    return 0;
}
