// Module 13 `faults`: zero violations with the guard and some without, live migration loses nothing,
// reproducible reports, a fault on an instance that does not exist is refused; the resume audit
// sees what the guard prevents, and every falsifier fails every check it names.
#include <doctest/doctest.h>

#include "core/experiments/check_audit.h"
#include "core/modules/faults/faults.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

TEST_CASE("faults: zero violations with the guard, some without; migration loses nothing") {
    const Experiment* e = find_experiment("faults");
    REQUIRE(e != nullptr);
    CHECK(e->number == 13);
    const Report r = test::run_module("faults", {});
    test::all_checks_pass(r);
    test::check_keys_unique(r);  // the checks of every recovery's run, with and without the guard
    CHECK(test::scalar_of(r, "requests_moved") > 0);
    CHECK(test::scalar_of(r, "consistency_violations") == 0);
    CHECK(test::check_keyed(r, "guard_no_violations").passed);
    const Report loose = test::run_module("faults", {{"guard", "0"}, {"compare", "0"}});
    test::all_checks_pass(loose);
    CHECK(test::scalar_of(loose, "consistency_violations") > 0);
    const Report m =
        test::run_module("faults", {{"fault", "drain"}, {"recovery", "migrate"}, {"compare", "0"}});
    test::all_checks_pass(m);
    CHECK(test::check_keyed(m, "migration_lost_nothing").passed);
    CHECK(test::scalar_of(m, "migrated_bytes") > 0);
    CHECK(test::without_timing(r) == test::without_timing(test::run_module("faults", {})));
    // Here some requests find their whole context cached with a state at its end; the guard used to
    // resume them one token before that state (the audit caught it), now from a checkpoint before it.
    const Report three = test::run_module("faults", {{"instances", "3"}, {"compare", "0"}});
    CHECK(test::check_keyed(three, "guard_no_violations").passed);

    auto pp = parse_params(e->params, {{"fault_instance", "9"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    bool found = false;
    for (const ParamIssue& i : e->check(pp.params))
        found |= i.key == "fault_instance" && i.level == ParamIssue::error;
    CHECK(found);
}

// The audit does not know whether the guard was on: without it, it finds every resume the simulator
// counts as a violation (the simulator's own rule, KV past the state), and with it none.
TEST_CASE("faults: the resume audit finds without the guard what the guard prevents") {
    for (bool guard : {true, false}) {
        FaultsParams p;
        p.guard = guard;
        p.compare = false;
        FaultsResult f = setup_faults(p);
        for (FaultRun& x : f.runs) {
            x.sim->run();
            const ResumeAudit& a = x.sim->resume_audit();
            CAPTURE(x.label);
            CHECK(a.resumes > 1000);
            CHECK(a.mismatched == x.sim->totals().violations);
            CHECK((a.inconsistent() > 0) == !guard);
        }
    }
}

TEST_CASE("faults: every falsifier fails every check it names, which held intact" * test::native_only()) {
    test::falsifiers_fail_their_checks("faults", {});
}

TEST_CASE("faults: Kimi-K3's instances pass every check") {
    const Report r = test::run_module(
        "faults", {{"preset", "kimi-k3"}, {"hardware", "gb300"}, {"gpus", "8"}, {"compare", "0"}});
    test::all_checks_pass(r);
    bool state_noted = false;  // one checkpoint is K3's 449,372,160 B of state (reference/kimi_k3.md §2.1)
    for (const std::string& n : r.notes) state_noted |= n.find("428.6 MiB") != std::string::npos;
    CHECK(state_noted);
}

// Disaggregated (issue 17): a crash on either stage passes every check, the report names the stage the
// instance served, and the crashed decoder's requests went back through the prefill stage.
TEST_CASE("faults: a crash on either stage of a disaggregated fleet") {
    for (const char* k : {"0", "3"}) {
        CAPTURE(k);
        const Report r = test::run_module(
            "faults",
            {{"architecture", "pd"}, {"prefill_instances", "2"}, {"fault_instance", k}, {"compare", "0"}});
        test::all_checks_pass(r);
        CHECK(test::check_keyed(r, "pd_cut_transfers_accounted").passed);
        CHECK(test::check_keyed(r, "pd_transfer_bytes_conserved").passed);
        const std::string stage = k[0] == '0' ? "(a prefill instance, of 2)" : "(a decode instance, of 2)";
        bool named = false;
        for (const std::string& n : r.notes) named |= n.find(stage) != std::string::npos;
        CHECK(named);
        CHECK(test::scalar_of(r, "requests_moved") > 0);
        CHECK(test::scalar_of(r, "resumed_recompute") + test::scalar_of(r, "resumed_remote_tier") > 0);
    }
}

// The fleet-wide tier is remote_tier_gib; host_tier_gib is each instance's own (module 11's), which a
// crash loses with its instance. What is not modelled is refused on the parameter it is about.
TEST_CASE("faults: the remote tier and each instance's host tier are two parameters") {
    const Report r =
        test::run_module("faults", {{"host_tier_gib", "64"}, {"remote_tier_gib", "256"}, {"compare", "0"}});
    test::all_checks_pass(r);
    CHECK(test::check_keyed(r, "host_tier_bytes_conserved").passed);
    CHECK(test::scalar_of(r, "host_tokens_lost") > 0);
    const Experiment* e = find_experiment("faults");
    REQUIRE(e != nullptr);
    auto refused_on = [&](const KeyValues& given, const char* key) {
        auto pp = parse_params(e->params, given, RangePolicy::strict);
        REQUIRE(pp.ok());
        bool found = false;
        for (const ParamIssue& i : e->check(pp.params)) found |= i.key == key && i.level == ParamIssue::error;
        return found;
    };
    CHECK(refused_on(
        {{"architecture", "pd"}, {"engine", "sglang"}, {"recovery", "recompute"}, {"compare", "0"}},
        "architecture"));
    CHECK(refused_on({{"architecture", "pd"}, {"prefill_instances", "4"}}, "prefill_instances"));
    CHECK(
        refused_on({{"host_tier_gib", "64"}, {"engine", "vllm"}, {"recovery", "recompute"}, {"compare", "0"}},
                   "host_tier_gib"));
}
