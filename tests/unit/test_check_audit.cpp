// The check audit (core/experiments/check_audit.h) and live text figures (doc_figures.h): a check
// that cannot fail, or has no falsifier, is caught; a falsifier naming no check is a problem.
#include <doctest/doctest.h>

#include "core/experiments/check_audit.h"
#include "core/experiments/doc_figures.h"
#include "core/experiments/module.h"

using namespace k3;

namespace {

// A toy module: its `sum` check recounts the items; `tautology` compares the total with itself.
struct Toy {
    int64_t items = 4;
    int falsify = 0;  // 1: the total is skewed by one; 2: nothing is damaged
};

Experiment toy_experiment(std::vector<Falsifier<Toy>> falsifiers) {
    ParamList<Toy> l;
    l.integer(&Toy::items, "items", "Items", "count", 1, 100);
    return make_experiment(Module<Toy>{.id = "toy",
                                       .title = "Toy",
                                       .params = std::move(l),
                                       .start = [](const Toy& p, const Params& raw) -> std::unique_ptr<Run> {
                                           return one_step_run("toy", raw, "count", [p](Report& r) {
                                               int64_t recount = 0;
                                               for (int64_t i = 0; i < p.items; ++i) ++recount;
                                               const int64_t total = p.items + (p.falsify == 1 ? 1 : 0);
                                               r.scalar("total", "Total", "count", double(total));
                                               r.check("sum", "Total equals a recount", total == recount, "");
                                               r.check("tautology", "Total equals itself", total == total,
                                                       "");
                                           });
                                       },
                                       .falsifiers = std::move(falsifiers)});
}

const CheckProof& proof_of(const CheckAudit& a, const std::string& key) {
    for (const CheckProof& c : a.checks)
        if (c.key == key) return c;
    FAIL("no proof for " << key);
    return a.checks.front();
}

}  // namespace

TEST_CASE("check audit: proves a real check, catches one that cannot fail and one without a falsifier") {
    const Experiment e = toy_experiment({
        {"skew", "the total is skewed by one", {"sum", "tautology"}, [](Toy& t) { t.falsify = 1; }},
    });
    const CheckAudit a = audit_checks(e);
    CHECK(a.checks.size() == 2);
    CHECK(proof_of(a, "sum").proven());
    CHECK(proof_of(a, "tautology").held_intact);
    CHECK_FALSE(proof_of(a, "tautology").failed_when_falsified);
    CHECK_FALSE(a.ok());

    const CheckAudit none = audit_checks(toy_experiment({}));
    CHECK_FALSE(none.ok());
    CHECK(none.proven() == 0);
    CHECK(none.problems.size() == 1);  // the module declares no falsifiers
}

TEST_CASE("check audit: a falsifier naming no reported check, or refused parameters, is a problem") {
    const Experiment e = toy_experiment({
        {"skew", "the total is skewed by one", {"sum"}, [](Toy& t) { t.falsify = 1; }},
        {"ghost", "names a check nobody reports", {"no_such_check"}, [](Toy& t) { t.falsify = 2; }},
        {"refused",
         "runs with an item count out of range",
         {"sum"},
         [](Toy& t) { t.falsify = 1; },
         {{"items", "1000"}}},
    });
    const CheckAudit a = audit_checks(e);
    CHECK(proof_of(a, "sum").proven());
    CHECK(a.problems.size() == 2);
    CHECK_FALSE(a.ok());
    const std::string json = check_audit_json(a);
    CHECK(json.find("\"total\": 2") != std::string::npos);
    CHECK(json.find("\"proven\": 1") != std::string::npos);
}

TEST_CASE("doc figures: placeholders are filled from the report, and say when they cannot be") {
    Report r;
    r.scalar("state_bytes", "State", "B", 43417600);
    r.scalar("hit", "Hit", "fraction", 0.3736);
    const std::string text = "A state of {state_bytes} and a hit of {hit}; {missing}; M_{r-1} stays.";
    CHECK(figure_placeholders(text) == std::vector<std::string>{"state_bytes", "hit", "missing"});
    CHECK(fill_figures(text, &r) ==
          std::string("A state of 41.41 MiB and a hit of 37.36 %; ") + kFigureAbsent + "; M_{r-1} stays.");
    CHECK(fill_figures("{hit}", nullptr) == kFigureNotRun);
    r.scalar("efficiency", "Efficiency", "fraction", 0.5);
    r.scalar("size", "Size", "B", 1024 * 1024 * 2.5);
    CHECK(fill_figures("{efficiency} of {size}", &r) == "50 % of 2.5 MiB");
}
