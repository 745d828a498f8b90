// `k3cli audit-checks [--json] [MODULE...]`: runs every module's falsifiers (core/experiments/
// check_audit.h) and lists, for every check its runs can report, whether it held on the intact run
// and failed on the falsified one. Exit 0 when every check is proven, 1 otherwise (a check without a
// falsifier, or one that did not fail), 2 on an unknown module.
#include <cstdio>

#include "core/cli/commands.h"
#include "core/experiments/check_audit.h"
#include "core/experiments/registry.h"

namespace k3::cli {

namespace {

const char* yes_no(bool b) { return b ? "yes" : "NO"; }

void print_text(const CheckAudit& a) {
    std::printf("%-14s %-52s %-6s %-9s %s\n", "module", "check", "intact", "falsified", "falsifier");
    for (const CheckProof& c : a.checks)
        std::printf("%-14s %-52s %-6s %-9s %s\n", c.module.c_str(), c.key.c_str(), yes_no(c.held_intact),
                    yes_no(c.failed_when_falsified), c.falsifier.empty() ? "(none)" : c.falsifier.c_str());
    for (const std::string& p : a.problems) std::printf("problem: %s\n", p.c_str());
    std::printf("%zu of %zu checks proven: held on the intact run, failed when falsified\n", a.proven(),
                a.checks.size());
}

int cmd_audit_checks(const Args& args) {
    bool json = false;
    std::vector<const Experiment*> mods;
    for (const auto& a : args) {
        if (a == "--json") {
            json = true;
        } else if (const Experiment* e = find_experiment(a)) {
            mods.push_back(e);
        } else {
            std::fprintf(stderr, "k3cli audit-checks: unknown module '%s'\n", a.c_str());
            return 2;
        }
    }
    if (mods.empty())
        for (const Experiment& e : experiments()) mods.push_back(&e);
    CheckAudit all;
    for (const Experiment* e : mods) {
        CheckAudit one = audit_checks(*e);
        all.checks.insert(all.checks.end(), one.checks.begin(), one.checks.end());
        all.problems.insert(all.problems.end(), one.problems.begin(), one.problems.end());
    }
    if (json)
        std::printf("%s\n", check_audit_json(all).c_str());
    else
        print_text(all);
    return all.ok() ? 0 : 1;
}

}  // namespace

K3_REGISTER_COMMAND("audit-checks", "[--json] [MODULE...]",
                    "run every check's falsifier: does each check hold intact and fail when falsified?",
                    cmd_audit_checks, 35);

}  // namespace k3::cli
