// The report's JSON and CSV: the contract between core, page, CLI and tests; the builders.
#include <doctest/doctest.h>

#include <stdexcept>

#include "core/experiments/report.h"

using namespace k3;

static Report sample() {
    std::vector<ParamSpec> specs = {ParamSpec::integer("n", "N", "tokens", 1, 10, 3),
                                    ParamSpec::choice("mode", "Mode", {"a", "b"}, "b")};
    static const auto keep = specs;
    Report r;
    r.module = "demo";
    r.set_params(Params(&keep));
    r.scalar("bytes", "Bytes", "B", 43417600, true);
    r.timing_scalar("run_ms", "Run time", "ms", 1.5);
    r.timing_text("simd_arch", "SIMD", "avx2");
    Series& s = r.add_series(make_series("line", "P", "x", "y", "", ""));
    s.add(1, 0.5).add(2, 0.25);
    s.log_x = true;
    r.add_table(make_table("T", {{"a", ""}, {"b", ""}})).add({1.0, std::string("x,y")});
    r.check("c_key", "c", true, "detail");
    r.notes.push_back("note \"quoted\"");
    r.trees.push_back({"tree", "tokens", {"kv"}, "state", {{-1, 0, 512, 0, "root", {256, 512}}}});
    r.rings.push_back({"ring", 8, {{0, 3, "draft 3"}, {3, 0, "flush"}}});
    r.timelines.push_back({"tl", "s", {"i0"}, {"prefill"}, {{0, 0.5, 1.25, 0, "req 1"}}});
    return r;
}

TEST_CASE("report JSON: every part, stable key order, numbers as numbers") {
    const std::string j = report_json(sample());
    auto has = [&](const std::string& part) { return j.find(part) != std::string::npos; };
    CHECK(j.rfind(R"({"module":"demo","params":{"n":3,"mode":"b"},)"
                  R"("scalars":{"bytes":{"value":43417600,"unit":"B","label":"Bytes"}})",
                  0) == 0);
    CHECK(has(R"("series":[{"name":"line","plot":"P","x_label":"x","y_label":"y","x":[1,2],"y":[0.5,0.25],)"
              R"("log_x":true,"log_y":false,"style":"line"}])"));
    CHECK(has(R"("tables":[{"name":"T","columns":["a","b"],"rows":[[1,"x,y"]]}])"));
    CHECK(has(R"("checks":[{"key":"c_key","name":"c","passed":true,"detail":"detail"}])"));
    CHECK(has(R"("notes":["note \"quoted\""])"));
    CHECK(has(
        R"("trees":[{"name":"tree","x_label":"tokens","marker_label":"state","categories":["kv"],)"
        R"("nodes":[{"parent":-1,"start":0,"end":512,"category":0,"label":"root","markers":[256,512]}]}])"));
    CHECK(has(R"("rings":[{"name":"ring","capacity":8,"frames":[{"tail":0,"count":3,"event":"draft 3"},)"
              R"({"tail":3,"count":0,"event":"flush"}]}])"));
    CHECK(has(R"("timelines":[{"name":"tl","time_label":"s","lanes":["i0"],"categories":["prefill"],)"
              R"("spans":[{"lane":0,"start":0.5,"end":1.25,"category":0,"label":"req 1"}]}])"));
    // timing is last and holds the clock figures and build facts
    CHECK(has(R"("timing":{"run_ms":{"value":1.5,"unit":"ms","label":"Run time"},)"
              R"("simd_arch":{"text":"avx2","label":"SIMD"}}})"));
}

TEST_CASE("report CSV: blocks with quoted fields") {
    const std::string c = report_csv(sample());
    CHECK(c.find("# scalars\nkey,value,unit,label\nbytes,43417600,B,Bytes\n") != std::string::npos);
    CHECK(c.find("# table: T\na,b\n1,\"x,y\"\n") != std::string::npos);
    CHECK(c.find("# series: line (P)\nx,y\n1,0.5\n2,0.25\n") != std::string::npos);
    CHECK(c.find("simd_arch,avx2,,SIMD") != std::string::npos);
}

TEST_CASE("report CSV: checks with their keys") {
    CHECK(report_csv(sample()).find("# checks\nkey,name,passed,detail\nc_key,c,true,detail\n") !=
          std::string::npos);
}

TEST_CASE("report builders: a table row must fit its columns; checks are found by key") {
    Table t = make_table("T", {{"a", "B"}, {"b", ""}});
    CHECK(t.units == std::vector<std::string>{"B", ""});
#ifndef __EMSCRIPTEN__  // the WebAssembly builds have no exceptions: a throw aborts there
    CHECK_THROWS_AS(t.add({1.0}), std::logic_error);
    CHECK(t.rows.empty());
#endif
    const Report r = sample();
    REQUIRE(r.find_check("c_key") != nullptr);
    CHECK(r.find_check("c_key")->name == "c");
    CHECK(r.find_check("c") == nullptr);  // the display text is not a key
}
