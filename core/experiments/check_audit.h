// Whether every check can fail: each module's falsifiers (Experiment::falsifiers) run against the
// intact run with the same parameters. A check is proven when it held on the intact run and failed
// on a falsified one. A check that only reports a failure (a run that could not complete) holds by
// being absent. Keys come from the intact runs: the defaults, every falsifier's parameters and
// Experiment::audit_params.
#pragma once

#include <string>
#include <vector>

#include "core/experiments/experiment.h"

namespace k3 {

struct CheckProof {
    std::string module, key;
    std::string falsifier;  // what the proving falsifier does ("" if the check has none)
    bool held_intact = false, failed_when_falsified = false;
    bool proven() const { return held_intact && failed_when_falsified; }
};

struct CheckAudit {
    std::vector<CheckProof> checks;
    std::vector<std::string> problems;  // falsifiers that name no reported check, refused parameters
    size_t proven() const;
    bool ok() const { return problems.empty() && proven() == checks.size(); }
};

CheckAudit audit_checks(const Experiment& e);
std::string check_audit_json(const CheckAudit& a);

}  // namespace k3
