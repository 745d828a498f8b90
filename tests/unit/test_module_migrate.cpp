// Module 10 `migrate`: declaration, every fault detected with its own error, bitwise continuation for
// greedy and sampled requests, determinism outside "timing", refusal of an off-grid checkpoint interval.
#include <doctest/doctest.h>

#include "core/experiments/registry.h"
#include "test_module_util.h"

using namespace k3;

namespace {
using test::check_named;
Report run_migrate(std::vector<std::pair<std::string, std::string>> kv) {
    kv.insert(kv.begin(), {{"prompt", "70"}, {"before", "4"}, {"after", "4"}});  // small and quick
    return test::run_module("migrate", kv, false);
}
}  // namespace

TEST_CASE("migrate module: declared as module 10 with texts, parameters and headlines") {
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
    CHECK(!e->check(pp.params).empty());
}

TEST_CASE("migrate module: the continuation is bitwise, greedy and sampled, for every strategy") {
    for (const char* temp : {"0", "1.1"}) {
        const Report r = run_migrate({{"temperature", temp}});
        for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, (c.name + ": " + c.detail));
        for (const char* s : {"move_all", "move_kv", "recompute"}) {
            const Check* c = check_named(r, std::string("Migrated with ") + s);
            REQUIRE_MESSAGE(c, s);
            CHECK(c->passed);
        }
        REQUIRE(check_named(r, "Paused, freed and resumed"));
        for (const char* key :
             {"blob_bytes", "blob_state_bytes", "blob_kv_bytes", "scale_move_all_bytes", "scale_move_all_s",
              "scale_move_kv_s", "scale_recompute_s", "break_even_distance"})
            CHECK_MESSAGE(r.find_scalar(key), key);
        // Tiny: 6 KDA layers x 74,752 B of state; 74 tokens x 1,280 B of MLA cache.
        CHECK(r.find_scalar("blob_state_bytes")->value == 448512.0);
        CHECK(r.find_scalar("blob_kv_bytes")->value == 74.0 * 1280);
    }
}

TEST_CASE("migrate module: every injected fault is detected with its own error") {
    const struct {
        std::vector<std::pair<std::string, std::string>> kv;
        const char* error;
    } cases[] = {
        {{{"fault", "bit_flip"}, {"fault_offset", "3"}, {"fault_bit", "2"}}, "bad_magic"},
        {{{"fault", "bit_flip"}, {"fault_offset", "20"}, {"fault_bit", "1"}}, "truncated"},
        // The blob is 543,952 = 0x84cd0 B: bit 4 of byte 16 is set, clearing it declares 16 B less.
        {{{"fault", "bit_flip"}, {"fault_offset", "16"}, {"fault_bit", "4"}}, "trailing_bytes"},
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
        const Check* f = check_named(r, "Injected fault detected: ");
        REQUIRE(f);
        CHECK(f->name == std::string("Injected fault detected: ") + c.error);
        CHECK(f->passed);
        CHECK(r.find_scalar("fault_detected")->value == 1);
        CHECK(r.all_checks_passed());
    }
    const Report ok = run_migrate({});
    REQUIRE(check_named(ok, "The intact blob is accepted"));
    CHECK(ok.find_scalar("fault_detected")->value == 0);
}

TEST_CASE("migrate module: everything outside timing is the same on a second run") {
    Report a = run_migrate({{"temperature", "0.7"}}), b = run_migrate({{"temperature", "0.7"}});
    a.timing = {}, b.timing = {};
    CHECK(report_json(a) == report_json(b));
}
