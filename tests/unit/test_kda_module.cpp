// Module 1 `kda`: the report keys of DESIGN.md §10, its checks, determinism of everything outside
// "timing", and the refusal of runs beyond the memory and work limits.
#include <doctest/doctest.h>

#include <string>

#include "core/experiments/registry.h"

using namespace k3;

static Report run_kda(const std::vector<std::pair<std::string, std::string>>& kv) {
    const Experiment& e = *find_experiment("kda");
    auto pp = parse_params(e.params, kv, RangePolicy::strict);
    REQUIRE(pp.ok());
    REQUIRE(e.check(pp.params).empty());
    return run_to_end(e, pp.params);
}

TEST_CASE("kda module: declared as module 1 with the parameter keys of DESIGN.md §10") {
    const Experiment* e = find_experiment("kda");
    REQUIRE(e);
    CHECK(e->number == 1);
    CHECK(e->component == "foundation");
    for (const char* key : {"heads", "k", "v", "tokens", "chunk", "seed", "gate_strength", "group"}) {
        bool found = false;
        for (const auto& p : e->params) found |= p.key == key;
        CHECK_MESSAGE(found, key);
    }
    CHECK(!e->how_it_works.empty());
    CHECK(!e->where_it_does_not_pay.empty());
}

TEST_CASE("kda module: a small run passes its checks and reports the §10 keys") {
    const Report r = run_kda(
        {{"heads", "2"}, {"group", "2"}, {"k", "20"}, {"v", "36"}, {"tokens", "70"}, {"chunk", "16"}});
    CHECK(r.all_checks_passed());
    CHECK(r.checks.size() >= 7);
    for (const char* key :
         {"rel_err_recurrent", "rel_err_chunked", "max_abs_chunked_vs_recurrent", "bits_digest"})
        CHECK_MESSAGE(r.find_scalar(key), key);
    CHECK(r.find_scalar("rel_err_recurrent")->value < 1e-5);
    CHECK(r.find_scalar("rel_err_chunked")->value < 1e-5);
    CHECK(r.find_scalar("rel_err_recurrent")->value > 0);  // fp32 is not fp64: a real comparison
    bool rec = false, ch = false, arch = false;
    for (const auto& s : r.timing.scalars) {
        rec |= s.key == "head_tokens_per_s_recurrent" && s.value > 0;
        ch |= s.key == "head_tokens_per_s_chunked" && s.value > 0;
    }
    for (const auto& t : r.timing.texts) arch |= t.key == "simd_arch" && !t.text.empty();
    CHECK(rec);
    CHECK(ch);
    CHECK(arch);
    REQUIRE(!r.series.empty());
    CHECK(r.series[0].x.size() >= 5);  // error against chunk size: 1, 2, 4, ..., 64, 70
    CHECK(r.timing.series.size() >= 2);
}

TEST_CASE("kda module: everything outside timing is the same on a second run") {
    const std::vector<std::pair<std::string, std::string>> kv = {
        {"heads", "1"}, {"k", "16"},       {"v", "16"},  {"tokens", "40"},
        {"chunk", "8"}, {"gate", "model"}, {"seed", "7"}};
    Report a = run_kda(kv), b = run_kda(kv);
    a.timing = {}, b.timing = {};
    CHECK(report_json(a) == report_json(b));
    // and a different seed changes the digest
    auto kv2 = kv;
    kv2.back().second = "8";
    const Report c = run_kda(kv2);
    CHECK(c.find_scalar("bits_digest")->value != a.find_scalar("bits_digest")->value);
}

TEST_CASE("kda module: extreme gates still pass (stress of the chunked kernel)") {
    const Report r = run_kda({{"heads", "1"},
                              {"k", "32"},
                              {"v", "32"},
                              {"tokens", "130"},
                              {"chunk", "64"},
                              {"gate_strength", "60"}});
    CHECK(r.all_checks_passed());
}

TEST_CASE("kda module: refuses runs beyond the memory and work limits, naming the estimate") {
    const Experiment& e = *find_experiment("kda");
    auto big = parse_params(
        e.params, {{"heads", "64"}, {"group", "8"}, {"k", "256"}, {"v", "256"}, {"tokens", "65536"}},
        RangePolicy::strict);
    REQUIRE(big.ok());
    const auto issues = e.check(big.params);
    REQUIRE(!issues.empty());
    bool mem = false, work = false;
    for (const auto& i : issues) {
        mem |= i.level == ParamIssue::error && i.message.find("GiB") != std::string::npos &&
               i.message.find("limit") != std::string::npos;
        work |= i.level == ParamIssue::error && i.message.find("exceeds the limit") != std::string::npos;
    }
    CHECK(mem);
    CHECK(work);
    // the defaults are well within both
    CHECK(e.check(e.defaults()).empty());
}
