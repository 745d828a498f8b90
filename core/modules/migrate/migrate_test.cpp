// Module 10 `migrate`: declaration, every fault detected with its own error, bitwise continuation for
// greedy and sampled requests, determinism outside "timing", refusal of an off-grid checkpoint interval.
#include <doctest/doctest.h>

#include "core/modules/migrate/migrate.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

namespace {
Report run_migrate(std::vector<std::pair<std::string, std::string>> kv) {
    kv.insert(kv.begin(), {{"prompt", "70"}, {"before", "4"}, {"after", "4"}});  // small and quick
    return test::run_module("migrate", kv, false);
}
}  // namespace

TEST_CASE("migrate: declared as module 10 with texts, parameters and headlines") {
    const Experiment* e = find_experiment("migrate");
    REQUIRE(e);
    CHECK(e->number == 10);
    CHECK(e->component == "request lifecycle");
    for (const char* key :
         {"prompt", "before", "after", "temperature", "interval", "seed", "fault", "fault_offset",
          "fault_bit", "preset", "context", "distance", "link", "hardware", "regime"}) {
        bool found = false;
        for (const auto& p : e->params) found |= p.key == key;
        CHECK_MESSAGE(found, key);
    }
    CHECK(e->how_it_works.find("serving.md") != std::string::npos);
    CHECK(e->headlines.size() == 2);
    auto pp = parse_params(e->params, {{"interval", "100"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    const auto issues = e->check(pp.params);
    REQUIRE(!issues.empty());
    CHECK(issues[0].key == "interval");
}

TEST_CASE("migrate: the continuation is bitwise, greedy and sampled, for every strategy") {
    for (const char* temp : {"0", "1.1"}) {
        const Report r = run_migrate({{"temperature", temp}});
        for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, (c.name + ": " + c.detail));
        for (const char* s : {"move_all", "move_kv", "recompute"}) {
            CAPTURE(s);
            CHECK(test::check_keyed(r, std::string("migrated_bitwise_") + s).passed);
        }
        test::check_keyed(r, "same_instance_resumes_bitwise");
        for (const char* key :
             {"blob_bytes", "blob_state_bytes", "blob_kv_bytes", "scale_move_all_bytes", "scale_move_all_s",
              "scale_move_kv_s", "scale_recompute_s", "break_even_distance"})
            CHECK_MESSAGE(r.find_scalar(key), key);
        // k3-tiny: 6 KDA layers x 74,752 B of state; 74 tokens x 1,920 B of MLA cache (3 layers x 160 fp32).
        CHECK(test::scalar_of(r, "blob_state_bytes") == 448512.0);
        CHECK(test::scalar_of(r, "blob_kv_bytes") == 74.0 * 1920);
    }
}

TEST_CASE("migrate: every injected fault is detected with its own error") {
    const struct {
        std::vector<std::pair<std::string, std::string>> kv;
        const char* error;
    } cases[] = {
        {{{"fault", "bit_flip"}, {"fault_offset", "3"}, {"fault_bit", "2"}}, "bad_magic"},
        {{{"fault", "bit_flip"}, {"fault_offset", "20"}, {"fault_bit", "1"}}, "truncated"},
        // The blob is 591,328 = 0x905e0 B: bit 5 of byte 16 is set, clearing it declares 32 B less.
        {{{"fault", "bit_flip"}, {"fault_offset", "16"}, {"fault_bit", "5"}}, "trailing_bytes"},
        {{{"fault", "bit_flip"}, {"fault_offset", "5000"}, {"fault_bit", "7"}}, "checksum_mismatch"},
        {{{"fault", "bit_flip"}, {"fault_offset", "99999999"}},
         "checksum_mismatch"},  // clamped: the CRC itself
        {{{"fault", "truncate"}, {"fault_offset", "0"}}, "truncated"},
        {{{"fault", "truncate"}, {"fault_offset", "4000"}}, "truncated"},
        {{{"fault", "wrong_model"}}, "model_mismatch"},
        {{{"fault", "wrong_layout"}}, "layout_mismatch"},
        {{{"fault", "wrong_position"}}, "position_mismatch"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.error);
        const Report r = run_migrate(c.kv);
        const Check& f = test::check_keyed(r, "injected_fault_detected");
        CHECK(f.name == std::string("Injected fault detected: ") + c.error);
        CHECK(f.passed);
        CHECK(test::scalar_of(r, "fault_detected") == 1);
        CHECK(r.all_checks_passed());
    }
    const Report ok = run_migrate({});
    CHECK(test::check_keyed(ok, "intact_blob_resumes_bitwise").passed);
    CHECK(test::scalar_of(ok, "fault_detected") == 0);
}

TEST_CASE("migrate: each falsifier fails every check it names (a small run)" * test::native_only()) {
    test::falsifiers_fail_their_checks("migrate", {{"prompt", "70"}, {"before", "4"}, {"after", "4"}});
}

TEST_CASE("migrate: everything outside timing is the same on a second run") {
    const Report a = run_migrate({{"temperature", "0.7"}}), b = run_migrate({{"temperature", "0.7"}});
    CHECK(test::without_timing(a) == test::without_timing(b));
}

TEST_CASE("migrate: a failed step is the last check, and what the run did not reach is not reported") {
    MigrateResult m;
    m.paused = PausedRequest{.position = 108, .blob_crc32c = 7, .prompt_tokens = 100};
    StrategyOutcome all;
    all.blob_bytes = all.counted.bytes = 1000;
    all.resumed = all.state_same = all.continuation_same = true;
    m.strategies = {all};
    m.failure = MigrateFailure{"resumed_move_kv", "Resume with move_kv", "resume_failed: the pool is full"};
    Report r;
    report_migrate(MigrateParams{}, m, r);
    REQUIRE(r.checks.size() == 3);
    CHECK(r.checks[0].key == "migrated_bitwise_move_all");
    CHECK(r.checks[1].key == "blob_recount_matches_accounting_move_all");
    CHECK(r.checks[2].key == "resumed_move_kv");
    CHECK_FALSE(r.checks[2].passed);
    CHECK(r.checks[2].detail == "resume_failed: the pool is full");
    CHECK(test::scalar_of(r, "blob_bytes") == 1000);
    CHECK(r.find_scalar("fault_detected") == nullptr);
    CHECK(r.tables.empty());  // the strategy tables need all three strategies
    CHECK(r.series.empty());
}

TEST_CASE("migrate: Kimi-K3 at scale moves its published state and MLA cache, and every check holds") {
    const Report r = run_migrate({{"preset", "kimi-k3"}});
    test::all_checks_pass(r);
    CHECK(test::check_keyed(r, "scale_blob_is_accounted").passed);
    // reference/kimi_k3.md §2.1, §2.3: 449,372,160 B of state, 27,648 B/token of MLA cache in bf16
    CHECK(test::scalar_of(r, "scale_move_all_bytes") > 449372160.0 + 27648.0 * 131072);
    CHECK(test::scalar_of(r, "scale_move_all_bytes") < 449372160.0 + 27648.0 * 131072 + 1e6);
}

TEST_CASE("migrate: the run estimate keeps the defaults within the limits and refuses longer requests") {
    test::estimate_within_limits("migrate");
    // Six continuations of 512 decoded tokens each, and a 2,048-token prompt prefilled four times.
    test::estimate_refuses("migrate", {{"after", "512"}}, "after");
    test::estimate_refuses("migrate", {{"prompt", "2048"}, {"before", "0"}, {"after", "1"}}, "prompt");
}
