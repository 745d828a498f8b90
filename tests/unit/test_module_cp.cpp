// Module 9 `cp`: declaration, checks and report keys with defaults and small variations, determinism
// outside "timing", refusal of impossible parameter combinations.
#include <doctest/doctest.h>

#include "core/experiments/registry.h"
#include "test_module_util.h"

using namespace k3;

namespace {
Report run_cp(const std::vector<std::pair<std::string, std::string>>& kv) {
    return test::run_module("cp", kv);
}
}  // namespace

TEST_CASE("cp module: declared as module 9 with texts and parameters") {
    const Experiment* e = find_experiment("cp");
    REQUIRE(e);
    CHECK(e->number == 9);
    CHECK(e->component == "context parallelism");
    for (const char* key :
         {"tokens", "ranks", "split", "chunk", "start", "seed", "preset", "context", "link"}) {
        bool found = false;
        for (const auto& p : e->params) found |= p.key == key;
        CHECK_MESSAGE(found, key);
    }
    CHECK(e->how_it_works.find("reference/kda.md") != std::string::npos);
    CHECK(e->where_it_does_not_pay.find("Sources") != std::string::npos);
    auto pp = parse_params(e->params, {{"tokens", "20"}, {"ranks", "30"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    bool refused = false;
    for (const ParamIssue& i : e->check(pp.params))
        refused |= i.level == ParamIssue::error && i.key == "ranks";
    CHECK(refused);
}

TEST_CASE("cp module: small runs pass every check and report the errors and costs") {
    for (const auto& kv : std::vector<std::vector<std::pair<std::string, std::string>>>{
             {{"tokens", "150"}, {"ranks", "7"}, {"chunk", "16"}},
             {{"tokens", "120"}, {"ranks", "3"}, {"start", "prefix"}, {"chunk", "32"}},
             {{"tokens", "64"}, {"ranks", "1"}},
             {{"tokens", "100"}, {"ranks", "4"}, {"split", "even"}, {"preset", "qwen3-next-80b"}}}) {
        const Report r = run_cp(kv);
        for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, (c.name + ": " + c.detail));
        CHECK(r.checks.size() >= 8);
        for (const char* key : {"rel_err_scan", "rel_err_serial", "rel_err_naive", "naive_state_rel_err",
                                "naive_closed_form_gap", "bytes_per_rank", "bytes_per_rank_preset",
                                "speedup_scan", "halo_rel_err_without", "halo_rel_err_with"})
            CHECK_MESSAGE(r.find_scalar(key), key);
        CHECK(r.find_scalar("rel_err_scan")->value < 1e-5);
        if (r.find_scalar("ranks")->value > 1) {
            CHECK(r.find_scalar("naive_state_rel_err")->value > 1e-2);
            CHECK(r.find_scalar("halo_rel_err_without")->value >
                  100 * r.find_scalar("halo_rel_err_with")->value);
        }
        CHECK(r.tables.size() >= 5);
        CHECK(r.series.size() >= 4);
    }
    const Report k = run_cp({{"tokens", "80"}, {"ranks", "2"}});
    CHECK(k.find_scalar("bytes_per_rank_preset")->value == 4194304.0);  // Kimi Linear, reference/kda.md §4.2
    CHECK(k.find_scalar("bytes_per_rank")->value == 4.0 * 4 * (64 * 64 + 64 * 64));
}

TEST_CASE("cp module: everything outside timing is the same on a second run") {
    const std::vector<std::pair<std::string, std::string>> kv = {
        {"tokens", "90"}, {"ranks", "5"}, {"seed", "3"}};
    Report a = run_cp(kv), b = run_cp(kv);
    a.timing = {}, b.timing = {};
    CHECK(report_json(a) == report_json(b));
}
