// Module 11 `fleet`: the workload under the chosen router, without prefix reuse, and under every
// other router.
#include "core/base/numfmt.h"
#include "core/modules/fleet/fleet.h"

namespace k3 {

namespace {

class FleetRun final : public FleetModuleRun<FleetResult> {
  public:
    FleetRun(const FleetParams& p, const Params& raw) : FleetModuleRun("fleet", raw) {
        add_step("loading the workload", 1, [this, p] { result_ = setup_fleet(p); });
        add_stage("simulating the fleet", 6, [this](const Deadline& d) { return simulate_main(d); });
        add_simulations("simulating without prefix reuse", 3, &FleetResult::no_reuse);
        add_simulations("comparing routers", 8, &FleetResult::routers);
        add_report([p](const FleetResult& f, Report& r) { report_fleet(p, f, r); });
    }
    std::string stage() const override {
        std::string s = StagedRun::stage();
        if (const FleetSim* main = result_.main.get(); main && s == "simulating the fleet") {
            const double requests = double(main->workload().requests.size());
            s += ": " + format_grouped(main->progress() * requests) + " / " + format_grouped(requests) +
                 " requests";
        }
        return s;
    }

  private:
    double simulate_main(const Deadline& d) {
        FleetSim* s = result_.main.get();
        if (result_.refusal || !s) return 1.0;
        const Stopwatch wall;
        s->run(&d);
        result_.simulate_ms += wall.ms();
        return s->done() ? 1.0 : s->progress();
    }
};

}  // namespace

FleetConfig fleet_module_config(const FleetParams& p) {
    FleetConfig c = fleet_config(p.router, p.cache, p.instances, p.cost);
    c.load = p.load;
    c.seed = p.workload.seed;
    c.falsify = p.sim_falsify;
    return c;
}

FleetResult setup_fleet(const FleetParams& p) {
    FleetResult f;
    f.config = fleet_module_config(p);
    f.workload = load_workload(p.workload);
    const std::shared_ptr<const Workload>& w = f.workload.workload;
    if (!w) {
        f.refusal = Refusal{"workload_loaded", "Workload loaded", f.workload.error};
        return f;
    }
    if (std::string e = check_fleet_size(*w, f.config); !e.empty()) {
        f.refusal = Refusal{"within_memory_budget", "Run within the memory budget", "refused: " + e};
        return f;
    }
    FleetConfig main = f.config;  // what the one-instance reference count assumes, unless falsified
    if (p.falsify == FleetFalsify::wrong_interval) main.policy.interval *= 2;
    f.main = std::make_unique<FleetSim>(w, main);
    if (!f.main->error().empty()) {
        f.refusal = Refusal{"fleet_config_accepted", "Fleet configuration accepted", f.main->error()};
        return f;
    }
    if (p.compare_no_reuse) {
        FleetConfig c = f.config;
        c.caching = false;
        f.no_reuse.push_back(
            {{"without reuse", "without_reuse"}, c.router.kind, std::make_unique<FleetSim>(w, c)});
    }
    if (p.compare_routers)
        for (size_t k = 0; k < router_ids().size(); ++k) {
            if (RouterKind(k) == f.config.router.kind) continue;
            FleetConfig c = f.config;
            c.router.kind = RouterKind(k);
            f.routers.push_back(
                {{router_ids()[k], router_ids()[k]}, c.router.kind, std::make_unique<FleetSim>(w, c)});
        }
    return f;
}

std::unique_ptr<Run> start_fleet(const FleetParams& p, const Params& raw) {
    return std::make_unique<FleetRun>(p, raw);
}

}  // namespace k3
