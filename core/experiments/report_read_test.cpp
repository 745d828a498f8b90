// Reports read back from their JSON (core/experiments/report_read.h): the text report_json writes
// comes back the same for real module reports and for a report with every part, pairs with their
// baseline, and bad files refused naming the field.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/experiments/report_read.h"
#include "tests/unit/test_files.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

namespace {

// report_json(report_from_json(report_json(r))) == report_json(r).
void round_trips(const Report& r) {
    const std::string json = report_json(r);
    const ReportRead back = report_from_json(json);
    REQUIRE_MESSAGE(back.ok(), back.error);
    CHECK_FALSE(back.baseline.has_value());
    CHECK(report_json(back.report) == json);
    CHECK(report_json(report_from_json(report_json(r, true)).report) == json);  // pretty reads the same
}

// A report with every part report_json writes, odd values included.
Report every_part() {
    Report r;
    r.module = "memory";
    r.params = {
        {"preset", "kimi-k3", true}, {"context", "131072", false}, {"note", "a \"quoted\"\nline", true}};
    r.scalar("x", "X \xC3\xA9", "B", 1.5, true);
    r.scalar("nan", "not a number", "", std::numeric_limits<double>::quiet_NaN());
    r.scalar("tiny", "denormal", "", 5e-324);
    Series s = make_series("s", "plot", "x", "y", "tokens", "B");
    s.add(1, 2).add(3, std::numeric_limits<double>::infinity());
    s.x_names = {"a", "b"};
    s.style = SeriesStyle::bars;
    s.log_y = true;
    r.add_series(s);
    r.add_table(make_table("t", {{"name", ""}, {"v", "B"}}))
        .add({std::string("a,b"), 1.0})
        .add({std::string(""), -0.25});
    r.check("k", "a check", true, "detail");
    r.check("k2", "another", false, "");
    r.notes = {"n1", ""};
    r.grids.push_back({"grid", 2, {"free", "used"}, {0, 1, -1, 1}, {"a", "b", "c", "d"}});
    r.heatmaps.push_back({"heat", "x", "y", "z", {1, 2}, {3}, {0.5, -0.5}, false, false, 0.0});
    r.trees.push_back({"tree",
                       "tokens",
                       {"kv", "state"},
                       "checkpoint",
                       {{-1, 0, 10, 0, "root", {5}}, {0, 10, 20, 1, "c", {}}}});
    r.rings.push_back({"ring", 8, {{0, 2, "draft 2"}, {2, 0, "flush"}}});
    r.timelines.push_back({"tl", "s", {"i0", "i1"}, {"busy"}, {{1, 0.5, 1.5, 0, "req 1"}}});
    r.timing_scalar("run_ms", "Run time", "ms", 12.5);
    r.timing_text("simd_arch", "SIMD", "avx2");
    r.timing.series.push_back(make_series("ts", "", "n", "ms", "", "ms").add(1, 2));
    r.timing.tables.push_back(make_table("tt", {{"a", ""}}).add({2.0}));
    r.build_check("simd", "SIMD equals scalar", true, "bitwise");
    return r;
}

std::string error_of(const std::string& text) {
    const ReportRead r = report_from_json(text);
    CHECK_FALSE(r.ok());
    CHECK(r.report.module.empty());  // nothing comes with an error
    return r.error;
}

}  // namespace

TEST_CASE("report_read: a report with every part, and real module reports, come back the same") {
    round_trips(every_part());
    const ReportRead odd = report_from_json(report_json(every_part()));
    CHECK(std::isnan(odd.report.scalars[1].value));
    CHECK(odd.report.scalars[2].value == 5e-324);
    CHECK(odd.report.params[2].text == "a \"quoted\"\nline");
    // Real reports, cheap ones: the accounting, the cost model, and the pool's grids (a short stream).
    round_trips(test::run_module("memory", {}));
    round_trips(test::run_module("cost", {}));
    round_trips(test::run_module("pool", {{"requests", "64"}}));
}

TEST_CASE("report_read: a pair gives both reports, in JSON and side by side in CSV") {
    const Report a = test::run_module("memory", {{"preset", "kimi-linear-48b"}});
    const Report b = test::run_module("memory", {{"preset", "qwen3-next-80b"}});
    const std::string pair = report_pair_json(a, b);
    const ReportRead back = report_from_json(pair);
    REQUIRE_MESSAGE(back.ok(), back.error);
    REQUIRE(back.baseline.has_value());
    CHECK(report_json(back.report) == report_json(a));
    CHECK(report_json(*back.baseline) == report_json(b));
    CHECK(report_pair_json(back.report, *back.baseline) == pair);
    CHECK(report_from_json(report_pair_json(a, b, true)).ok());
    const std::string csv = report_pair_csv(a, b);
    CHECK(csv.find("# module: memory (baseline: memory)\n# parameters\nkey,value,baseline\n") == 0);
    CHECK(csv.find("\npreset,kimi-linear-48b,qwen3-next-80b\n") != std::string::npos);
    CHECK(csv.find("\nkey,value,baseline,unit,label\nstate_bytes,43417600,77266944,B,") != std::string::npos);
    // Tables with a baseline column after each numeric one, as compare mode shows them.
    CHECK(
        csv.find("\n# table: Per-sequence memory by part\npart,layers,layers (baseline),bytes per layer,") !=
        std::string::npos);
    CHECK(csv.find("\n# baseline table: ") == std::string::npos);
    CHECK(csv.find("\n# baseline series: hybrid total (Memory per sequence)\n") != std::string::npos);
    CHECK(csv.find("\n# baseline timing (wall clock") != std::string::npos);
    // A check only one of them has sits on its own line, the other side empty.
    CHECK(csv.find(
              "\nkimi_linear_reference_figures,Kimi-Linear reference figures (reference/kda.md §5),true,,") !=
          std::string::npos);
    CHECK(
        csv.find(
            "\nqwen3_next_reference_figures,Qwen3-Next reference figures (reference/serving.md §7),,true,") !=
        std::string::npos);
    CHECK(report_csv(a).find("\n# timing (wall clock") !=
          std::string::npos);  // the single report's CSV unchanged
}

TEST_CASE("report_read: bad files are refused naming the field and its place") {
    const std::string good = report_json(every_part(), true);
    CHECK(error_of("[1]") == "line 1, column 1: expected an object, got an array");
    CHECK(error_of("{\"module\": \"memory\"}") == "line 1, column 1: params: missing");
    CHECK(error_of(test::replaced(good, "\"value\": 1.5", "\"value\": \"x\"")) ==
          "line 10, column 16: scalars.x.value: expected a number, got \"x\"");
    CHECK(error_of(test::replaced(good, "\"unit\": \"B\",\n      \"label\"",
                                  "\"units\": \"B\",\n      \"label\"")) ==
          "line 9, column 10: scalars.x.unit: missing");
    CHECK(error_of(test::replaced(good, "\"style\": \"bars\"", "\"style\": \"dots\"")) ==
          "line 41, column 16: series[0].style: expected line, bars, points or step");
    CHECK(error_of(test::replaced(good, "\"log_x\": false", "\"log_x\": 0")) ==
          "line 39, column 16: series[0].log_x: expected true or false, got 0");
    CHECK(error_of(test::replaced(good, "\"a,b\",\n          1", "\"a,b\"")) ==
          "line 52, column 9: tables[0].rows[0]: 1 cells for 2 columns");
    CHECK(error_of(test::replaced(good, "\"capacity\": 8", "\"capacity\": 8.5")) ==
          "line 142, column 19: rings[0].capacity: expected a whole number, got 8.5");
    CHECK(error_of(test::replaced(good, "\"notes\": [", "\"color\": 1,\n  \"notes\": [")) ==
          "line 77, column 12: color: not a field of a report");
    CHECK(error_of(test::replaced(good, "\"module\": \"memory\"", "\"module\": 2")) ==
          "line 2, column 13: module: expected a string, got 2");
    // In a pair, the path says which of the two.
    const std::string pair = report_pair_json(every_part(), every_part(), true);
    const size_t second = pair.find("\"value\": 1.5", pair.find("\"baseline\""));
    CHECK(error_of(std::string(pair).replace(second, 12, "\"value\": []"))
              .find(": baseline.scalars.x.value: expected a number, got an array") != std::string::npos);
    CHECK(error_of("{\"report\": {}, \"baseline\": 1, \"x\": 2}") ==
          "line 1, column 36: x: not a field of a report");
    CHECK(error_of("{\"module\": \"m\", \"params\"") == "line 1, column 25: expected ':', found end of text");
}
