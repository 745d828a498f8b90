// Module 8 `ring`: its declaration and refusals, the ring moving in the default run, checks passing,
// determinism outside "timing", shortened steps, commits and the self drafter, and every check proven by
// its falsifier.
#include <doctest/doctest.h>

#include <string>

#include "core/modules/ring/ring.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

TEST_CASE("ring: declared as module 8; a capacity below N is refused with a clear message") {
    const Experiment* e = find_experiment("ring");
    REQUIRE(e);
    CHECK(e->number == 8);
    CHECK(e->component == "speculative decoding");
    for (const char* k : {"draft_len", "ring_capacity", "overflow", "commit_every", "drafter", "accept"})
        CHECK_MESSAGE(e->defaults().spec(k) != nullptr, k);
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

TEST_CASE("ring: the default run passes its checks and draws the ring moving") {
    const Report r = test::run_module("ring", {{"new_tokens", "40"}});
    test::all_checks_pass(r);
    CHECK(test::check_keyed(r, "rebuilds_bitwise").passed);
    CHECK(test::check_keyed(r, "ring_positions_bitwise").passed);
    CHECK(test::check_keyed(r, "final_checkpoint_bitwise").passed);
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
    CHECK(test::scalar_of(r, "flushes") >= 2);
    CHECK(test::scalar_of(r, "ring_bytes_per_request") > 0);
}

TEST_CASE("ring: deterministic outside timing; shorten, commits and the self drafter") {
    const std::vector<std::pair<std::string, std::string>> kv = {
        {"new_tokens", "24"}, {"ring_capacity", "6"}, {"overflow", "shorten"}, {"commit_every", "10"}};
    const Report a = test::run_module("ring", kv), b = test::run_module("ring", kv);
    CHECK(a.all_checks_passed());
    CHECK(test::scalar_of(a, "shortened_steps") > 0);
    CHECK(test::scalar_of(a, "flushes_commit") >= 2);
    CHECK(test::without_timing(a) == test::without_timing(b));
    const Report s =
        test::run_module("ring", {{"new_tokens", "16"}, {"drafter", "self"}, {"drafter_bits", "6"}});
    CHECK(s.all_checks_passed());
    CHECK(test::check_keyed(s, "tokens_equal_greedy").passed);
}

TEST_CASE("ring: RecoverSSM's records in the ring fold exactly; the figures at scale are Kimi-K3's") {
    const Report r = test::run_module("ring", {{"new_tokens", "24"}, {"variant", "recoverssm"}});
    test::all_checks_pass(r);
    CHECK(test::check_keyed(r, "final_checkpoint_bitwise").passed);
    // 69 KDA layers x (state 6,512,640 B + L = 16 x (record 98,304 B + conv column 73,728 B)).
    CHECK(test::scalar_of(r, "kimi_ring_bytes_per_request") == 69.0 * (6512640 + 16 * (98304 + 73728)));
    CHECK(test::scalar_of(r, "kimi_snapshot_bytes_per_request") == 69.0 * 5 * 6512640);  // N = 4
}

TEST_CASE("ring: every check holds intact and fails when falsified" * test::native_only()) {
    test::all_checks_proven("ring", 7);
}

TEST_CASE("ring: the run estimate keeps the defaults within the limits and refuses longer runs") {
    test::estimate_within_limits("ring");
    // The self drafter may accept nothing: 256 tokens of 16-token verifications, each after 16 drafts.
    test::estimate_refuses("ring", {{"new_tokens", "256"}, {"draft_len", "16"}, {"drafter", "self"}},
                           "new_tokens");
}
