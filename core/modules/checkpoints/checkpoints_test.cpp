// Module 5 `checkpoints`: defaults, the Mooncake acceptance figures, validation and bad traces.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "core/modules/checkpoints/checkpoints.h"
#include "tests/unit/test_module_util.h"

using namespace k3;

namespace {
Report run(std::vector<std::pair<std::string, std::string>> kv) {
    return test::run_module("checkpoints", kv, false);
}
double scalar(const Report& r, const char* k) { return test::scalar_of(r, k); }
}  // namespace

TEST_CASE("checkpoints: defaults run, every check passes, same report twice") {
    const Experiment* e = find_experiment("checkpoints");
    REQUIRE(e != nullptr);
    CHECK(e->number == 5);
    CHECK(e->component == "prefix caching");
    const Report a = run({});
    for (const Check& c : a.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
    CHECK(a.checks.size() >= 7);
    CHECK(scalar(a, "token_hit_state") <= scalar(a, "token_hit_kv"));
    CHECK(scalar(a, "token_hit_kv") > 0.5);
    CHECK(scalar(a, "recomputed_tokens") > 0);
    const Report b = run({});
    CHECK(test::without_timing(a) == test::without_timing(b));
}

TEST_CASE("checkpoints: the workload group is the shared one, its seed only for synthetic workloads") {
    const Experiment& e = *find_experiment("checkpoints");
    const ParamSpec* seed = nullptr;
    for (const ParamSpec& s : e.params)
        if (s.key == "seed") seed = &s;
    REQUIRE(seed != nullptr);
    CHECK(seed->group == "Workload");
    CHECK(seed->active_key == "trace");
    CHECK(seed->active_value == "synthetic");
    CHECK(seed->help.rfind("Seed of the synthetic workload.", 0) == 0);
}

TEST_CASE("checkpoints: Mooncake trace, unbounded, interval 512") {
    for (const char* policy : {"interval", "interval_end"}) {
        const Report r =
            run({{"trace", "mooncake"}, {"interval", "512"}, {"policy", policy}, {"sweeps", "0"}});
        for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
        CHECK(std::round(scalar(r, "token_hit_kv") * 10000) == 3736);
        CHECK(std::round(scalar(r, "token_hit_state") * 10000) ==
              (std::string(policy) == "interval" ? 3734 : 3736));
        CHECK(test::check_keyed(r, "mooncake_reference_hits").passed);
        CHECK(test::check_keyed(r, "kv_hit_matches_block_count").passed);
        CHECK(test::check_keyed(r, "state_hit_matches_block_count").passed);
    }
}

TEST_CASE("checkpoints: bounded capacity, every policy") {
    for (const char* policy : {"end", "branch", "cap", "segmented", "spread"}) {
        CAPTURE(policy);
        const Report r = run({{"policy", policy},
                              {"state_capacity", "200"},
                              {"kv_capacity_tokens", "400000"},
                              {"lru_refresh", "path"},
                              {"sweeps", "0"},
                              {"sessions", "48"},
                              {"page_size", "16"}});
        for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
        CHECK(test::check_keyed(r, "capacities_hold").passed);
        CHECK(scalar(r, "states_held") <= 200);
        CHECK(scalar(r, "kv_tokens_held") <= 400000);
    }
}

TEST_CASE("checkpoints: bad parameters and bad traces are refused with a reason") {
    const Experiment& e = *find_experiment("checkpoints");
    auto pp = parse_params(e.params, {{"interval", "500"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    auto issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "interval");
    CHECK(issues[0].message.find("multiple of the kernel chunk") != std::string::npos);

    pp = parse_params(e.params, {{"trace", "/nonexistent/x.jsonl"}}, RangePolicy::strict);
    issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "trace");

    // A malformed file is refused before the run, naming the line that is wrong.
    const std::string path = "k3_test_bad_trace.jsonl";
    REQUIRE(test::write_text_file(
        path,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]}\n"
        "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7, 8]}\n"));
    pp = parse_params(e.params, {{"trace", path}}, RangePolicy::strict);
    issues = e.check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "trace");
    CHECK(issues[0].message ==
          path +
              ": line 2, column 1: hash_ids has 2 ids but input_length 10 needs 1 (one per 512-token block)");
    std::remove(path.c_str());
}

TEST_CASE("checkpoints: blocks whose pseudo-tokens share a first value are no hit (the block count agrees)") {
    // Mooncake blocks 17348 and 26151 expand to streams that start with the same 32-bit value.
    const std::string path = "k3_test_colliding_blocks.jsonl";
    REQUIRE(test::write_text_file(
        path,
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [17348]}\n"
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [26151]}\n"));
    const Report r = run({{"trace", path}, {"sweeps", "0"}});
    std::remove(path.c_str());
    CHECK(test::check_keyed(r, "kv_hit_matches_block_count").passed);
    CHECK(scalar(r, "token_hit_kv") == 0);
}

TEST_CASE("checkpoints: the run estimate keeps the defaults within the limits and refuses larger trees") {
    test::estimate_within_limits("checkpoints");
    // The largest synthetic mix at the finest interval of the sweeps: fewer sessions.
    test::estimate_refuses("checkpoints", {{"sessions", "4096"}, {"interval", "64"}}, "sessions");
    // The bundled trace with a checkpoint every 16 tokens: its tree would hold about 3 GiB.
    const std::string refusal = test::estimate_refuses(
        "checkpoints", {{"trace", "mooncake"}, {"interval", "16"}, {"chunk", "16"}, {"sweeps", "0"}},
        "interval");
    CHECK(refusal.find("make interval larger") != std::string::npos);
}

TEST_CASE("checkpoints: the hit recount follows prefixes and checkpoints without the tree") {
    auto request = [](TokenSeqPtr t) {
        Request r;
        r.prompt_len = uint32_t(t->size());
        r.tokens = std::move(t);
        return r;
    };
    const uint64_t doc = 7, other = 8, third = 9;
    Workload w;
    w.requests.push_back(request(TokenSeq::Builder().stream(doc, 0, 1200).build()));
    w.requests.push_back(request(TokenSeq::Builder().stream(doc, 0, 1000).stream(other, 0, 300).build()));
    w.requests.push_back(request(TokenSeq::Builder().stream(doc, 0, 1100).stream(third, 0, 50).build()));
    ReplayConfig c;
    c.policy.kind = PolicyKind::interval;
    c.policy.interval = 512;
    const std::optional<CheckpointHitRecount> n = recount_hits(w, c);
    REQUIRE(n.has_value());
    REQUIRE(n->hits.size() == 3);
    CHECK(n->hits[0].kv_hit == 0);
    CHECK(n->hits[1].kv_hit == 1000);
    CHECK(n->hits[1].state_hit == 512);  // the first request's checkpoints sit at 512 and 1024
    CHECK(n->hits[2].kv_hit == 1100);
    CHECK(n->hits[2].state_hit == 1024);
    CHECK(n->recomputed_tokens == 1200 + (1300 - 512) + (1150 - 1024));
    // The same workload through the radix tree agrees, request by request.
    c.record_requests = true;
    WorkloadReplay replay(w, c);
    replay.run();
    for (size_t i = 0; i < 3; ++i) {
        CHECK(replay.hits()[i].kv_hit == n->hits[i].kv_hit);
        CHECK(replay.hits()[i].state_hit == n->hits[i].state_hit);
    }
    // A capacity may evict what the recount assumes is held: no recount.
    c.cache.state_capacity = 1;
    CHECK_FALSE(recount_hits(w, c).has_value());
}

TEST_CASE("checkpoints: Kimi-K3 is the default model, its checkpoint the accounting's state") {
    CHECK(CheckpointsParams{}.preset == ModelPreset::kimi_k3);
    CHECK(find_experiment("checkpoints")->defaults().str("preset") == "kimi-k3");
    // fp32 codec: one checkpoint is K3's 449,372,160 B of state, as much as 16,253 tokens of its bf16 MLA
    // cache (reference/kimi_k3.md §2.1, §2.4).
    const Report r = test::run_module("checkpoints", {{"sweeps", "0"}});
    test::all_checks_pass(r);
    CHECK(test::scalar_of(r, "checkpoint_bytes") == 449372160);
    CHECK(test::scalar_of(r, "state_equivalent_tokens") == doctest::Approx(16253).epsilon(1e-4));
}

TEST_CASE("checkpoints: engine=sglang reproduces SGLang's figures on the conversation trace") {
    const Report r = run({{"trace", "mooncake"},
                          {"engine", "sglang"},
                          {"sglang_mode", "extra_buffer"},
                          {"chunked_prefill_tokens", "8192"},
                          {"state_capacity", "0"},
                          {"kv_capacity_tokens", "0"}});
    test::all_checks_pass(r);
    CHECK(std::round(scalar(r, "token_hit_kv") * 10000) == 3688);
    CHECK(std::round(scalar(r, "token_hit_state") * 10000) == 3168);
    CHECK(scalar(r, "states_held") == 19715);
    CHECK(scalar(r, "sglang_extend_batches") == 19876);
    CHECK(test::check_keyed(r, "sglang_engine_figures").passed);
    // No ideal-policy recount or block-id reference applies to the engine's placement.
    CHECK(r.find_check("mooncake_reference_hits") == nullptr);
    CHECK(r.find_check("kv_hit_matches_block_count") == nullptr);
    // A configuration engines.md does not list runs without the comparison.
    const Report other =
        run({{"trace", "mooncake"}, {"engine", "sglang"}, {"chunked_prefill_tokens", "4096"}});
    test::all_checks_pass(other);
    CHECK(other.find_check("sglang_engine_figures") == nullptr);
    CHECK(scalar(other, "token_hit_state") <= scalar(other, "token_hit_kv"));
}

TEST_CASE("checkpoints: engine=sglang refuses what SGLang cannot run") {
    const Experiment& e = *find_experiment("checkpoints");
    auto refused = [&](std::vector<std::pair<std::string, std::string>> kv, const char* key) {
        auto pp = parse_params(e.params, kv, RangePolicy::strict);
        REQUIRE(pp.ok());
        const auto issues = e.check(pp.params);
        REQUIRE(issues.size() == 1);
        CHECK(issues[0].key == key);
        return issues[0].message;
    };
    CHECK(refused({{"engine", "sglang"}, {"sglang_mode", "no_buffer"}, {"page_size", "64"}}, "page_size")
              .find("page_size == 1") != std::string::npos);
    CHECK(refused({{"engine", "sglang"}, {"state_capacity", "100"}}, "state_capacity").find("unbounded") !=
          std::string::npos);
    // The same page size runs with the extra buffer, and no_buffer runs at page 1.
    for (const char* mode : {"extra_buffer", "no_buffer"}) {
        auto pp = parse_params(e.params,
                               {{"engine", "sglang"},
                                {"sglang_mode", mode},
                                {"page_size", std::string(mode) == "no_buffer" ? "1" : "64"}},
                               RangePolicy::strict);
        CHECK(e.check(pp.params).empty());
    }
}

TEST_CASE("checkpoints: engine=vllm reproduces vLLM's own figures on the Mooncake trace") {
    const Report r = run({{"trace", "mooncake"},
                          {"preset", "kimi-linear-48b"},
                          {"engine", "vllm"},
                          {"retention_interval", "0"},
                          {"sweeps", "0"}});
    for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
    CHECK(scalar(r, "vllm_block_derived") == 1920);  // module 3's derivation, MLA alignment 128
    CHECK(std::round(scalar(r, "token_hit_state") * 10000) == 2966);
    CHECK(std::round(scalar(r, "token_hit_kv") * 10000) == 3175);
    CHECK(test::check_keyed(r, "vllm_reference_hits").passed);
    CHECK(test::check_keyed(r, "vllm_blocks_consistent").passed);
    CHECK(r.find_check("tree_invariants_hold") == nullptr);  // the radix-tree replay does not run
    // vLLM before PR #50000 (kernel multiple 16): 1888, and its dense row.
    const Report old = run({{"trace", "mooncake"},
                            {"preset", "kimi-linear-48b"},
                            {"engine", "vllm"},
                            {"vllm_mla_align", "0"},
                            {"retention_interval", "dense"},
                            {"sweeps", "0"}});
    CHECK(scalar(old, "vllm_block_size") == 1888);
    CHECK(test::check_keyed(old, "vllm_reference_hits").passed);
    // prefix_match_unit=128: fine-grained partial hits (engines.md's pmu128 row).
    const Report fine = run({{"trace", "mooncake"},
                             {"preset", "kimi-linear-48b"},
                             {"engine", "vllm"},
                             {"prefix_match_unit", "128"},
                             {"retention_interval", "0"},
                             {"sweeps", "0"}});
    CHECK(std::round(scalar(fine, "token_hit_state") * 10000) == 3062);
    CHECK(std::round(scalar(fine, "token_hit_kv") * 10000) == 3270);
    CHECK(test::check_keyed(fine, "vllm_reference_hits").passed);
}

TEST_CASE("checkpoints: retention_interval and engine=vllm are validated") {
    const Experiment& e = *find_experiment("checkpoints");
    const auto issues_of = [&](std::vector<std::pair<std::string, std::string>> kv) {
        const auto pp = parse_params(e.params, kv, RangePolicy::strict);
        return e.check(pp.params);
    };
    CHECK(issues_of({{"retention_interval", "dense"}}).empty());  // unused by policy=interval
    CHECK(!issues_of({{"policy", "segmented"}, {"retention_interval", "dense"}}).empty());
    CHECK(!issues_of({{"retention_interval", "many"}}).empty());
    CHECK(issues_of({{"engine", "vllm"}, {"retention_interval", "0"}}).empty());
    const auto bounded = issues_of({{"engine", "vllm"}, {"state_capacity", "100"}});
    REQUIRE(!bounded.empty());
    CHECK(bounded[0].message.find("unbounded") != std::string::npos);
    CHECK(!issues_of({{"engine", "vllm"}, {"preset", "kimi-linear-48b"}, {"prefix_match_unit", "100"}})
               .empty());
}
