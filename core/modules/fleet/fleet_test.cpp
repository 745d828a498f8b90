// Module 11 `fleet`: defaults pass every check, the headline report keys, reproducible reports, the
// Mooncake figure, bad parameters.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "core/modules/fleet/fleet.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

TEST_CASE("fleet: defaults, report keys, same report twice, a timeline") {
    const Experiment* e = find_experiment("fleet");
    REQUIRE(e != nullptr);
    CHECK(e->number == 11);
    CHECK(e->component == "fleet scheduling");
    for (const char* k :
         {"trace", "instances", "router", "interval", "state_capacity", "kv_capacity_tokens", "seed"})
        CHECK_MESSAGE(e->defaults().spec(k) != nullptr, k);
    const Report a = test::run_module("fleet", {});
    test::all_checks_pass(a);
    test::check_keys_unique(a);  // the checks of every router's run and of the run without reuse
    for (const char* k :
         {"token_hit_kv", "token_hit_state", "ttft_p50_ms", "ttft_p99_ms", "throughput_tokens_per_s"})
        CHECK_MESSAGE(a.find_scalar(k) != nullptr, k);
    CHECK(test::scalar_of(a, "token_hit_state") <= test::scalar_of(a, "token_hit_kv"));
    CHECK(test::scalar_of(a, "token_hit_state") > 0);
    CHECK(test::scalar_of(a, "ttft_p99_ms") >= test::scalar_of(a, "ttft_p50_ms"));
    CHECK(test::scalar_of(a, "cost_per_million_tokens") <
          test::scalar_of(a, "cost_per_million_tokens_no_reuse"));
    // What the text says of the defaults: round robin spreads conversations and loses hits.
    CHECK(test::scalar_of(a, "round_robin_token_hit_kv") < test::scalar_of(a, "token_hit_kv"));
    REQUIRE(a.timelines.size() == 1);
    CHECK(a.timelines[0].lanes.size() == 4);
    CHECK(!a.timelines[0].spans.empty());
    CHECK(a.timelines[0].spans.size() <= 3000);
    CHECK(test::without_timing(a) == test::without_timing(test::run_module("fleet", {})));
    // A different seed changes the workload and the report.
    CHECK(test::without_timing(a) != test::without_timing(test::run_module("fleet", {{"seed", "2"}})));
}

TEST_CASE("fleet: one instance on the Mooncake trace gives module 5's 37.36 %") {
    const Report r = test::run_module("fleet", {{"trace", "mooncake"},
                                                {"instances", "1"},
                                                {"state_capacity", "0"},
                                                {"compare_routers", "0"},
                                                {"compare_no_reuse", "0"}});
    test::all_checks_pass(r);
    test::check_keys_unique(r);
    CHECK(std::round(test::scalar_of(r, "token_hit_kv") * 10000) == 3736);
    CHECK(std::round(test::scalar_of(r, "token_hit_state") * 10000) == 3734);
    CHECK(test::check_keyed(r, "mooncake_one_instance_hits").passed);
    CHECK(test::check_keyed(r, "one_instance_hits_match_block_ids").passed);
}

TEST_CASE("fleet: bad parameters are refused with a reason") {
    const Experiment& e = *find_experiment("fleet");
    auto pp = parse_params(e.params, {{"interval", "500"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    auto issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "interval");
    pp = parse_params(e.params, {{"working_gib", "1"}, {"max_running", "256"}}, RangePolicy::strict);
    issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "working_gib");
    pp = parse_params(e.params, {{"trace", "/nonexistent/trace.jsonl"}}, RangePolicy::strict);
    issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "trace");
}

TEST_CASE("fleet: a trace request with no prompt token is refused before the run, naming its line") {
    const Experiment& e = *find_experiment("fleet");
    const std::string path = "k3_test_empty_prompt.jsonl";
    REQUIRE(test::write_text_file(
        path, "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 10, \"hash_ids\": []}\n"));
    const auto pp = parse_params(e.params, {{"trace", path}}, RangePolicy::strict);
    const auto issues = e.check(pp.params);
    std::remove(path.c_str());
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "trace");
    CHECK(issues[0].message ==
          path + ": line 1, column 34: input_length: 0; a request needs at least one prompt token");
}

TEST_CASE("fleet: blocks whose pseudo-tokens share a first value are no hit under any router") {
    // Mooncake blocks 17348 and 26151 expand to streams that start with the same 32-bit value.
    const std::string path = "k3_test_colliding_blocks_fleet.jsonl";
    REQUIRE(test::write_text_file(
        path,
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [17348]}\n"
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [26151]}\n"));
    const Report r = test::run_module("fleet", {{"trace", path}});
    std::remove(path.c_str());
    test::all_checks_pass(r);
    for (const Scalar& s : r.scalars)
        if (s.key.ends_with("token_hit_kv")) CHECK_MESSAGE(s.value == 0, s.key);
    CHECK(test::scalar_of(r, "cache_aware_token_hit_kv") == 0);
}

TEST_CASE("fleet: the hit recount tells apart blocks whose pseudo-tokens share a first value") {
    // The third request extends the second: its 512-token hit is backed by the second, which the
    // recount must keep apart from the first (block 17348 starts with block 26151's first value).
    const std::string path = "k3_test_colliding_recount.jsonl";
    REQUIRE(test::write_text_file(
        path,
        "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [17348]}\n"
        "{\"timestamp\": 10000, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [26151]}\n"
        "{\"timestamp\": 20000, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [26151, 5]}\n"));
    const Report r =
        test::run_module("fleet", {{"trace", path}, {"instances", "1"}, {"compare_routers", "0"}});
    std::remove(path.c_str());
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "token_hit_kv") == 0.25);
}

TEST_CASE("fleet: the module's own defaults reach the fleet configuration") {
    const FleetConfig c = fleet_module_config(FleetParams{});
    CHECK(c.load == 4);
    CHECK(c.cache.state_capacity == 64);
    CHECK(c.router.kind == RouterKind::prefix);
    CHECK(c.instances == 4);
    CHECK(c.hardware.id == "h100");
    CHECK(c.link.id == "ib-ndr");
    CHECK(c.working_bytes == 32ull << 30);
    CHECK(c.policy.chunk == 64);
}

TEST_CASE("fleet: Kimi-K3 runs with its parameter counts and state, and too little memory is refused") {
    FleetParams p;
    p.instances.preset = ModelPreset::kimi_k3;
    const FleetConfig c = fleet_module_config(p);
    CHECK(c.model.total_params == 2.78e12);  // reference/kimi_k3.md §1.3: 2.78T total, 104.2B active
    CHECK(c.model.active_params == 104.2e9);
    const Report r = test::run_module(
        "fleet", {{"preset", "kimi-k3"}, {"hardware", "gb300"}, {"gpus", "8"}, {"compare_routers", "0"}});
    test::all_checks_pass(r);
    bool state_noted = false;  // one checkpoint is K3's 449,372,160 B of state
    for (const std::string& n : r.notes) state_noted |= n.find("428.6 MiB") != std::string::npos;
    CHECK(state_noted);
    // 64 state slots of 428.6 MiB do not fit 16 GiB of working memory: refused, naming both.
    const Experiment& e = *find_experiment("fleet");
    auto pp = parse_params(
        e.params, {{"preset", "kimi-k3"}, {"hardware", "gb300"}, {"gpus", "8"}, {"working_gib", "16"}},
        RangePolicy::strict);
    REQUIRE(pp.ok());
    bool refused = false;
    for (const ParamIssue& i : e.check(pp.params))
        refused |= i.level == ParamIssue::error && i.key == "working_gib" &&
                   i.message.find("428.6 MiB") != std::string::npos;
    CHECK(refused);
}

TEST_CASE("fleet: speculative decoding's state scratch lowers Kimi-K3's running requests") {
    // 32 GiB of working memory, N = 7, prefix caching (align mode): snapshots hold 2 + N pages of
    // 7,028,736 B per KDA layer, RecoverSSM 2 pages of 7,815,168 B (reference/kimi_k3.md §3.3).
    FleetParams p;
    p.instances.preset = ModelPreset::kimi_k3;
    FleetConfig c = fleet_module_config(p);
    CHECK(running_state_slots(c).slots == 64);
    CHECK(running_state_slots(c).bytes() == 449372160);
    const RunningStateSlots snap = running_state_slots(c, SpecState::snapshot);
    CHECK(snap.bytes() == 9ull * 7028736 * 69);
    CHECK(snap.slots == 7);
    const RunningStateSlots rec = running_state_slots(c, SpecState::recoverssm);
    CHECK(rec.bytes() == 2ull * 7815168 * 69);
    CHECK(rec.slots == 31);
    c.caching = false;  // none mode: 1 + N and 1
    CHECK(running_state_slots(c, SpecState::snapshot).pages == 8);
    CHECK(running_state_slots(c, SpecState::recoverssm).pages == 1);
    const Report r = test::run_module("fleet", {{"preset", "kimi-k3"},
                                                {"hardware", "gb300"},
                                                {"gpus", "8"},
                                                {"spec_state", "snapshot"},
                                                {"compare_routers", "0"}});
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "running_slots") == 7);
    // RecoverSSM records KDA's corrections: a Gated DeltaNet model is refused.
    const Experiment& e = *find_experiment("fleet");
    auto pp = parse_params(e.params, {{"preset", "qwen3-next-80b"}, {"spec_state", "recoverssm"}},
                           RangePolicy::strict);
    REQUIRE(pp.ok());
    bool refused = false;
    for (const ParamIssue& i : e.check(pp.params))
        refused |= i.level == ParamIssue::error && i.key == "spec_state";
    CHECK(refused);
}
