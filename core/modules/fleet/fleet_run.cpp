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
        add_simulations("serving colocated on the same GPUs", 4, &FleetResult::colocated);
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
    apply_host_tier(p.host, c);
    apply_pd(p.pd, c);
    c.load = p.load;
    c.seed = p.workload.seed;
    c.falsify = p.sim_falsify;
    return c;
}

std::vector<FleetConfig> fleet_sim_configs(const FleetParams& p) {
    std::vector<FleetConfig> v{fleet_module_config(p)};
    if (p.falsify == FleetFalsify::wrong_interval) v[0].policy.interval *= 2;
    if (p.compare_no_reuse) {
        v.push_back(fleet_module_config(p));
        v.back().caching = false;
    }
    if (v[0].pd.on()) {  // the same instances serving colocated: what disaggregation is measured against
        v.push_back(fleet_module_config(p));
        v.back().pd.prefill_instances = 0;
    }
    if (p.compare_routers)
        for (size_t k = 0; k < router_ids().size(); ++k) {
            if (RouterKind(k) == v[0].router.kind) continue;
            v.push_back(fleet_module_config(p));
            v.back().router.kind = RouterKind(k);
        }
    return v;
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
    // The main run (what the one-instance reference count assumes, unless falsified), then the
    // variants in fleet_sim_configs' order.
    const std::vector<FleetConfig> configs = fleet_sim_configs(p);
    f.main = std::make_unique<FleetSim>(w, configs[0]);
    if (!f.main->error().empty()) {
        f.refusal = Refusal{"fleet_config_accepted", "Fleet configuration accepted", f.main->error()};
        return f;
    }
    for (size_t i = 1; i < configs.size(); ++i) {
        const FleetConfig& c = configs[i];
        if (!c.caching)
            f.no_reuse.push_back(
                {{"without reuse", "without_reuse"}, c.router.kind, std::make_unique<FleetSim>(w, c)});
        else if (configs[0].pd.on() && !c.pd.on())
            f.colocated.push_back(
                {{"colocated", "colocated"}, c.router.kind, std::make_unique<FleetSim>(w, c)});
        else {
            const std::string id = router_ids()[size_t(c.router.kind)];
            f.routers.push_back({{id, id}, c.router.kind, std::make_unique<FleetSim>(w, c)});
        }
    }
    return f;
}

std::unique_ptr<Run> start_fleet(const FleetParams& p, const Params& raw) {
    return std::make_unique<FleetRun>(p, raw);
}

}  // namespace k3
