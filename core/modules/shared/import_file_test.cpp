// Importing the files users bring (core/experiments/import.h): a published config.json gives
// the memory module the same figures as the preset of the same model; traces and reports are told
// apart by their content; every refusal names the file and the line or field, and applies nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/base/data_files.h"
#include "core/experiments/import.h"
#include "core/fleet/trace.h"
#include "core/fleet/workload_source.h"
#include "tests/unit/test_files.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

namespace {

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Every figure of the two memory reports equal: scalars, plotted points and table numbers (names and
// labels may differ: a custom model is "custom").
void same_figures(const Report& imported, const Report& preset) {
    REQUIRE(imported.scalars.size() == preset.scalars.size());
    for (size_t i = 0; i < preset.scalars.size(); ++i) {
        CHECK(imported.scalars[i].key == preset.scalars[i].key);
        CHECK_MESSAGE(same(imported.scalars[i].value, preset.scalars[i].value), preset.scalars[i].key);
    }
    REQUIRE(imported.series.size() == preset.series.size());
    for (size_t i = 0; i < preset.series.size(); ++i) {
        CHECK(imported.series[i].x == preset.series[i].x);
        CHECK(imported.series[i].y == preset.series[i].y);
    }
    REQUIRE(imported.tables.size() == preset.tables.size());
    for (size_t t = 0; t < preset.tables.size(); ++t) {
        REQUIRE(imported.tables[t].rows.size() == preset.tables[t].rows.size());
        for (size_t r = 0; r < preset.tables[t].rows.size(); ++r)
            for (size_t c = 0; c < preset.tables[t].rows[r].size(); ++c)
                if (const double* d = std::get_if<double>(&preset.tables[t].rows[r][c]))
                    CHECK(same(std::get<double>(imported.tables[t].rows[r][c]), *d));
    }
}

ImportResult imported(const std::string& name, const std::string& bytes) {
    ImportResult r = import_bytes(name, bytes);
    REQUIRE_MESSAGE(r.ok(), r.error);
    return r;
}

std::string error_of(const std::string& name, const std::string& bytes) {
    const ImportResult r = import_bytes(name, bytes);
    CHECK_FALSE(r.ok());
    CHECK(r.params.empty());  // nothing to apply comes with an error
    CHECK_FALSE(r.report.has_value());
    CHECK(r.data_name.empty());
    return r.error;
}

const char* kTrace =
    "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 8, \"hash_ids\": [1, 2]}\n"
    "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 8, \"hash_ids\": [1, 3]}\n";

}  // namespace

TEST_CASE("import: a published config.json gives the same figures as the preset of that model") {
    const struct {
        const char* file;
        const char* preset;
    } cases[] = {{"Kimi-Linear-48B-A3B-Instruct.config.json", "kimi-linear-48b"},
                 {"Kimi-K3.config.json", "kimi-k3"},
                 {"Qwen3-Next-80B-A3B-Instruct.config.json", "qwen3-next-80b"}};
    for (const auto& c : cases) {
        CAPTURE(c.file);
        const ImportResult im =
            imported(std::string("/some/dir/") + c.file, test::data_file(std::string("configs/") + c.file));
        CHECK(im.kind == ImportKind::model_config);
        CHECK(im.module == "memory");
        REQUIRE(!im.params.empty());
        CHECK(im.params[0] == std::pair<std::string, std::string>{"preset", "custom"});
        same_figures(test::run_module("memory", im.params, false),
                     test::run_module("memory", {{"preset", c.preset}}));
        // At another context and on 8 GPUs too.
        KeyValues more = im.params;
        more.insert(more.end(), {{"context", "1048576"}, {"tp", "8"}});
        same_figures(test::run_module("memory", more, false),
                     test::run_module("memory", {{"preset", c.preset}, {"context", "1048576"}, {"tp", "8"}}));
    }
}

TEST_CASE("import: every custom-model parameter is set, and a value the module refuses names its field") {
    const ImportResult q = imported("q.json", test::data_file("configs/Qwen3.5-0.8B.config.json"));
    CHECK(q.summary == "Qwen3.5, 24 layers (18 Gated DeltaNet + 6 attention)");
    size_t custom = 0;
    for (const ParamSpec& s : find_experiment("memory")->params) custom += s.active_value == "custom";
    CHECK(q.params.size() == custom + 1);  // MLA's dimensions too, at their defaults, and preset
    // No preset has Qwen3.5-0.8B: 18 GDN layers of 16 x 128 x 128 fp32 state and a 3 x 6,144 bf16 conv
    // window; 6 attention layers of 2 KV heads of 256 in bf16 (tests/data/configs/README.md).
    const Report r = test::run_module("memory", q.params, false);
    CHECK(test::scalar_of(r, "state_bytes") == 18 * (16 * 128 * 128 * 4 + 3 * 6144 * 2));
    CHECK(test::scalar_of(r, "kv_bytes_per_token") == 6 * 2 * 2 * 256 * 2);
    const std::string qwen = test::data_file("configs/Qwen3-Next-80B-A3B-Instruct.config.json");
    CHECK(error_of("q.json", test::replaced(qwen, "\"linear_num_value_heads\": 32",
                                            "\"linear_num_value_heads\": 24")) ==
          "q.json: linear_num_value_heads: value heads (24) must be a multiple of q/k heads (16)");
    CHECK(error_of("q.json", test::replaced(qwen, "\"num_hidden_layers\": 48", "\"num_hidden_layers\": 300"))
              .find("q.json: num_hidden_layers: bad value '300' for parameter 'layers': out of range") == 0);
    CHECK(error_of("dir/q.json", test::replaced(qwen, "\"head_dim\": 256", "\"head_dim\": \"x\"")) ==
          "q.json: head_dim: expected a positive integer, got \"x\" (line 10, column 15)");
}

TEST_CASE("import: a trace is validated in full and registered under its own name") {
    const ImportResult t = imported("C:\\traces\\mine.jsonl", kTrace);
    CHECK(t.kind == ImportKind::trace);
    CHECK(t.data_name == "imported:mine.jsonl");
    CHECK(t.summary == "Mooncake trace: 2 requests, 1,624 prompt tokens");
    CHECK(imported("one.jsonl",
                   "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [7]}")
              .kind == ImportKind::trace);  // one request is one JSON value
    CHECK(imported("blank.jsonl", std::string("\xEF\xBB\xBF \r\n\n") + kTrace).kind == ImportKind::trace);
    CHECK(error_of("bad.jsonl", std::string(kTrace) + "{\"timestamp\": 9, \"input_length\": 5}\n") ==
          "bad.jsonl: line 3, column 36: missing key 'output_length'");
    // Where no file can be read (the page), the registered bytes are the trace.
    set_disk_files(false);
    CHECK(check_trace_param(t.data_name).find("is not available here") != std::string::npos);
    register_data_file(t.data_name, kTrace);
    CHECK(check_trace_param(t.data_name).empty());
    WorkloadSpec w;
    w.trace = t.data_name;
    CHECK(load_workload(w).trace->requests.size() == 2);
    CHECK(check_trace_param("imported:other.jsonl").find("a trace imported in this session") !=
          std::string::npos);
    set_disk_files(true);
    w.trace = "imported:other.jsonl";
    CHECK(load_workload(w).error ==
          "trace 'imported:other.jsonl' was imported in another session: import the file again");
}

TEST_CASE("import: reports and pairs become baselines; other files are refused by name") {
    const Report a = test::run_module("memory", {{"preset", "kimi-linear-48b"}});
    const ImportResult r = imported("run.json", report_json(a));
    CHECK(r.kind == ImportKind::report);
    CHECK(r.module == "memory");
    CHECK(report_json(*r.report) == report_json(a));
    CHECK_FALSE(r.baseline.has_value());
    const ImportResult p = imported("pair.json", report_pair_json(a, a, true));
    REQUIRE(p.baseline.has_value());
    CHECK(p.summary.find(", with its baseline") != std::string::npos);
    CHECK(error_of("r.json",
                   test::replaced(report_json(a), "\"module\":\"memory\"", "\"module\":\"nosuch\"")) ==
          "r.json: module: \"nosuch\" is not a module of this build");
    CHECK(error_of("x.json", "{\"name\": 1}") ==
          "x.json: not a file this import reads: JSON with none of \"module\" (a report), \"model_type\" (a "
          "config.json), or \"input_length\" and \"hash_ids\" (a trace line)");
    CHECK(error_of("x.bin",
                   "\x7f"
                   "ELF\x02\x01") == "x.bin: line 1, column 1: expected a value, found '\\x7f'");
    CHECK(error_of("e.json", "") == "e.json: the file is empty");
    CHECK(error_of("c.json", "{\"model_type\": \"kimi_linear\",\n \"num_hidden_layers\": }") ==
          "c.json: line 2, column 23: expected a value, found '}'");
}
