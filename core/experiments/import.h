// One entry point for the files users bring, in the page, the desktop app and the CLI: a request
// trace in the Mooncake format (JSONL), a hybrid model's Hugging Face config.json, or a report exported
// earlier (report_json, or report_pair_json's report with its baseline). The kind is told from the
// content, not the name; the file is validated in full here, and the result says what to apply. An
// error names the file and the line or the field, and comes with nothing to apply.
// Declared here, in the Experiment API that the page and the desktop app use; implemented in
// core/modules/shared/import_file.cpp, which may use the trace reader, hf_config and the modules.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/experiments/param.h"
#include "core/experiments/report.h"

namespace k3 {

enum class ImportKind { trace, model_config, report };

// A parameter a config.json set: its key and value, and the field it came from.
struct ImportedValue {
    std::string key, value, source;
};

struct ImportResult {
    ImportKind kind = ImportKind::trace;
    std::string error;    // empty on success; "NAME: line 3, column 5: ..." or "NAME: field: ..."
    std::string summary;  // one line for the user ("Mooncake trace: 12,031 requests, ...")

    // A trace: register the bytes under data_name (register_data_file, core/base/data_files.h) and set
    // the module's `trace` parameter to it (kImportedTracePrefix + the file name).
    std::string data_name;

    // A config.json: the module it applies to ("memory") and its parameters (preset=custom and every
    // custom-model dimension, in the module's keys and canonical text), with where each came from.
    std::string module;
    KeyValues params;
    std::vector<ImportedValue> sources;

    // A report (module = its module): the report, and a pair's baseline.
    std::optional<Report> report, baseline;

    bool ok() const { return error.empty(); }
};

// `name` is the file's name or path (only its last component is used), `bytes` its contents.
ImportResult import_bytes(std::string_view name, std::string_view bytes);
// The desktop app's --import and dropped files: reads a regular file of at most the largest size an
// import takes, or says why not.
bool read_import_file(const std::string& path, std::string& bytes, std::string& error);

}  // namespace k3
