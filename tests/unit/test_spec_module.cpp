// Modules 7 `spec-storage` and 8 `ring`: declarations and report keys of DESIGN.md §10, the default
// view's figures, checks passing, determinism outside "timing", and refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/experiments/registry.h"
#include "test_module_util.h"

using namespace k3;

namespace {

Report run(const char* id, const std::vector<std::pair<std::string, std::string>>& kv) {
    return test::run_module(id, kv);
}

bool has_param(const Experiment& e, const char* key) {
    for (const auto& p : e.params)
        if (p.key == key) return true;
    return false;
}

}  // namespace

TEST_CASE("spec-storage module: declared as module 7 with the DESIGN.md §10 keys") {
    const Experiment* e = find_experiment("spec-storage");
    REQUIRE(e);
    CHECK(e->number == 7);
    CHECK(e->component == "speculative decoding");
    for (const char* k : {"preset", "draft_len", "variant", "running_requests"})
        CHECK_MESSAGE(has_param(*e, k), k);
    CHECK(e->how_it_works.find("Sources") != std::string::npos);
    CHECK(e->where_it_does_not_pay.find("N = 1") != std::string::npos);
    REQUIRE(e->headlines.size() == 2);
    CHECK(e->headlines[0].scalar_key == "ratio_n_snapshots");
    CHECK(e->headlines[1].scalar_key == "ratio_counting_confirmed");
    // The defaults are the Kimi-Linear, N = 4 view.
    const Params d = e->defaults();
    CHECK(d.str("preset") == "kimi-linear-48b");
    CHECK(d.i("draft_len") == 4);
    CHECK(d.str("variant") == "minimal_exact");
}

TEST_CASE("spec-storage module: the default run shows the quarter figure under both conventions") {
    const Report r = run("spec-storage", {});
    CHECK(r.all_checks_passed());
    for (const auto& c : r.checks) CHECK_MESSAGE(c.passed, std::string(c.name + ": " + c.detail));
    REQUIRE(r.find_scalar("snapshot_bytes_per_layer"));
    CHECK(r.find_scalar("snapshot_bytes_per_layer")->value == 2170880);
    CHECK(r.find_scalar("record_bytes_per_token_per_layer")->value == 41088);
    CHECK(std::round(r.find_scalar("ratio_n_snapshots")->value * 100) == 372);
    CHECK(std::round(r.find_scalar("ratio_counting_confirmed")->value * 100) == 465);
    CHECK(std::fabs(r.find_scalar("projection_share")->value - 0.269) < 0.001);
    // Both conventions are named in the labels.
    CHECK(r.find_scalar("ratio_n_snapshots")->label.find("N snapshots") != std::string::npos);
    CHECK(r.find_scalar("ratio_counting_confirmed")->label.find("confirmed") != std::string::npos);
    // The runnable-model demo ran: bitwise checks, and restore times under timing only.
    int bitwise = 0;
    for (const auto& c : r.checks) bitwise += c.name.find("bitwise") != std::string::npos;
    CHECK(bitwise >= 2);
    CHECK(r.timing.series.size() == 4);
    for (const auto& s : r.series) CHECK(s.name.find("ms") == std::string::npos);
}

TEST_CASE(
    "spec-storage module: deterministic outside timing; accounting-only runs; every preset and variant") {
    const std::vector<std::pair<std::string, std::string>> kv = {{"draft_len", "3"},
                                                                 {"variant", "delta_conv"}};
    Report a = run("spec-storage", kv), b = run("spec-storage", kv);
    a.timing = {}, b.timing = {};
    CHECK(report_json(a) == report_json(b));
    CHECK(a.all_checks_passed());
    for (const char* preset : {"kimi-linear-48b", "qwen3-next-80b", "tiny", "small"})
        for (const char* v : {"core_only", "layer_input"}) {
            const Report r =
                run("spec-storage", {{"preset", preset}, {"variant", v}, {"demo", "0"}, {"draft_len", "8"}});
            CHECK(r.all_checks_passed());
            CHECK(r.find_scalar("ratio_counting_confirmed")->value >
                  r.find_scalar("ratio_n_snapshots")->value);
        }
    // A variant that claims S only passes its own (different) checks.
    CHECK(run("spec-storage", {{"variant", "core_only"}}).all_checks_passed());
}

TEST_CASE("ring module: declared as module 8; a capacity below N is refused with a clear message") {
    const Experiment* e = find_experiment("ring");
    REQUIRE(e);
    CHECK(e->number == 8);
    CHECK(e->component == "speculative decoding");
    for (const char* k : {"draft_len", "ring_capacity", "overflow", "commit_every", "drafter", "accept"})
        CHECK_MESSAGE(has_param(*e, k), k);
    CHECK(e->check(e->defaults()).empty());
    auto pp = parse_params(e->params, {{"draft_len", "6"}, {"ring_capacity", "5"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const auto issues = e->check(pp.params);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].level == ParamIssue::error);
    CHECK(issues[0].key == "ring_capacity");
    CHECK(issues[0].message.find("L = 5") != std::string::npos);
    CHECK(issues[0].message.find("N = 6") != std::string::npos);
    auto ok = parse_params(e->params, {{"draft_len", "6"}, {"ring_capacity", "6"}}, RangePolicy::strict);
    CHECK(e->check(ok.params).empty());
    // Non-exact variants are not offered (the ring has no other copy of the conv window).
    CHECK(!parse_params(e->params, {{"variant", "core_only"}}, RangePolicy::strict).ok());
}

TEST_CASE("ring module: the default run passes its checks and draws the ring moving") {
    const Report r = run("ring", {{"new_tokens", "40"}});
    for (const auto& c : r.checks) CHECK_MESSAGE(c.passed, std::string(c.name + ": " + c.detail));
    REQUIRE(r.rings.size() == 1);
    const Ring& g = r.rings[0];
    CHECK(g.capacity == 16);
    REQUIRE(g.frames.size() > 10);
    bool tail_moved = false, head_back = false, flush = false;
    for (size_t i = 1; i < g.frames.size(); ++i) {
        tail_moved |= g.frames[i].tail != g.frames[0].tail;
        head_back |= g.frames[i].count < g.frames[i - 1].count && g.frames[i].tail == g.frames[i - 1].tail;
        flush |= g.frames[i].event.find("folded") != std::string::npos;
        CHECK(g.frames[i].count <= g.capacity);
    }
    CHECK(tail_moved);
    CHECK(head_back);
    CHECK(flush);
    CHECK(r.find_scalar("flushes")->value >= 2);
    CHECK(r.find_scalar("ring_bytes_per_request")->value > 0);
}

TEST_CASE("ring module: deterministic outside timing; shorten, commits and the self drafter") {
    const std::vector<std::pair<std::string, std::string>> kv = {
        {"new_tokens", "24"}, {"ring_capacity", "6"}, {"overflow", "shorten"}, {"commit_every", "10"}};
    Report a = run("ring", kv), b = run("ring", kv);
    CHECK(a.all_checks_passed());
    CHECK(a.find_scalar("shortened_steps")->value > 0);
    CHECK(a.find_scalar("flushes_commit")->value >= 2);
    a.timing = {}, b.timing = {};
    CHECK(report_json(a) == report_json(b));
    const Report s = run("ring", {{"new_tokens", "16"}, {"drafter", "self"}, {"drafter_bits", "6"}});
    CHECK(s.all_checks_passed());
}
