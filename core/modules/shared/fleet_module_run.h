// The run shape modules 11 fleet, 12 tenants and 13 faults share: a setup step builds the module's
// result (its simulations, or why it cannot run), stages step lists of simulations in turn within
// each slice (run_in_turn), and the report step turns the result into the report.
//
//     class TenantsRun final : public FleetModuleRun<TenantsResult> {
//         TenantsRun(const TenantsParams& p, const Params& raw) : FleetModuleRun("tenants", raw) {
//             add_step("generating tenants", 1, [this, p] { result_ = setup_tenants(p); });
//             add_simulations("simulating", 10, &TenantsResult::runs);
//             add_report([p](const TenantsResult& t, Report& r) { report_tenants(p, t, r); });
//         }
//     };
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/experiments/experiment.h"
#include "core/fleet/fleet_runs.h"

namespace k3 {

// Why a fleet module's run simulates nothing: the one failed check its report then shows.
struct Refusal {
    std::string key, name, detail;
};

// `Result` has `std::optional<Refusal> refusal` and vectors of runs, each with a
// `std::unique_ptr<FleetSim> sim`.
template <class Result>
class FleetModuleRun : public StagedRun {
  protected:
    FleetModuleRun(std::string module, const Params& raw) : StagedRun(std::move(module), raw) {}

    // A stage stepping the simulations of `result_.*runs` one after another (none once refused).
    template <class Sim>
    void add_simulations(std::string name, double weight, std::vector<Sim> Result::*runs) {
        add_stage(std::move(name), weight, [this, runs, next = size_t(0)](const Deadline& d) mutable {
            return result_.refusal ? 1.0 : run_in_turn(result_.*runs, next, d);
        });
    }
    // The last step: the refusal's check alone, or `build(result_, report_)`.
    void add_report(std::function<void(const Result&, Report&)> build) {
        add_step("report", 0.5, [this, build = std::move(build)] {
            if (const std::optional<Refusal>& no = result_.refusal)
                report_.check(no->key, no->name, false, no->detail);
            else
                build(result_, report_);
        });
    }

    Result result_;
};

}  // namespace k3
