// The inverse of report_json (core/experiments/report.h): a report exported earlier, read back to be
// a baseline. Every field report_json writes is restored, so that writing the result again gives the
// same text; a report_pair_json file gives both of its reports. Read strictly: a missing field, one
// of the wrong type or one report_json never writes is an error naming the field and where it is
// ("line 3, column 18: scalars.state_bytes.value: expected a number, got \"x\""), and nothing is
// returned with an error. Non-finite numbers, which the writer writes as null, read back as NaN.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/base/json_read.h"
#include "core/experiments/report.h"

namespace k3 {

struct ReportRead {
    Report report;                   // the report, or a pair's "report"
    std::optional<Report> baseline;  // a pair's "baseline"
    std::string error;               // empty on success
    bool ok() const { return error.empty(); }
};

// Whether a parsed JSON file is a report (it has "module") or a pair ("report" and "baseline").
bool is_report_json(const JsonValue& root);
ReportRead report_from_json(const JsonValue& root);
ReportRead report_from_json(std::string_view text);

}  // namespace k3
