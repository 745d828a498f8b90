// `k3cli bench fleet`: the Mooncake conversation trace (12,031 requests) on 8 instances with full
// (unbounded) prefix trees, a checkpoint every 512 tokens, Kimi-Linear-48B-A3B on 2 x H100 per
// instance (roofline estimate), prefix-affinity routing. Targets (README, Benchmarks): under 2 s natively,
// under 6 s in WebAssembly. Reports wall time, events per second and the hit rates (so a faster run that
// computes something else shows).
#include <cstdio>

#include "core/base/clock.h"
#include "core/cli/bench.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/workload_source.h"

namespace k3::cli {

static void bench_fleet(BenchContext& ctx) {
    Stopwatch sw;
    WorkloadSpec ws;
    ws.trace = kMooncakeTraceName;
    const LoadedWorkload lw = load_workload(ws);
    if (!lw.workload) {
        std::fprintf(stderr, "bench fleet: %s\n", lw.error.c_str());
        return;
    }
    const double load_ms = sw.ms();
    struct Case {
        const char* name;
        RouterKind router;
        uint32_t instances;
    };
    const Case cases[] = {
        {"8 instances, prefix affinity", RouterKind::prefix, 8},
        {"8 instances, round robin", RouterKind::round_robin, 8},
        {"1 instance", RouterKind::prefix, 1},
    };
    const int reps = ctx.quick ? 1 : 3;
    for (const Case& cs : cases) {
        if (ctx.quick && cs.instances == 1) continue;
        FleetConfig c;
        c.model = *model_preset("kimi-linear-48b");
        c.hardware = *hardware_preset("h100");
        c.instances = cs.instances;
        c.router.kind = cs.router;
        c.cache.page_size = 1;
        c.policy.kind = PolicyKind::interval;
        c.policy.interval = 512;
        double best = 1e300;
        uint64_t events = 0, iterations = 0;
        double hit_kv = 0, hit_state = 0, sim_s = 0;
        for (int i = 0; i < reps; ++i) {
            Stopwatch t;
            FleetSim sim(lw.workload, c);
            sim.run();
            const double ms = t.ms();
            if (ms < best) best = ms;
            events = sim.totals().events;
            iterations = 0;
            for (const InstanceStats& x : sim.instance_stats()) iterations += x.iterations;
            uint64_t p = 0, kv = 0, st = 0;
            for (const RequestOutcome& o : sim.outcomes()) p += o.prompt, kv += o.kv_hit, st += o.state_hit;
            hit_kv = p ? double(kv) / double(p) : 0;
            hit_state = p ? double(st) / double(p) : 0;
            sim_s = sim.totals().end_ms / 1000.0;
        }
        const std::vector<std::pair<std::string, double>> ps = {
            {"requests", double(lw.workload->requests.size())}, {"instances", double(cs.instances)}};
        const std::vector<std::pair<std::string, std::string>> tp = {{"router", router_id(cs.router)}};
        ctx.add({std::string("simulate ms: ") + cs.name, ps, tp, best, "ms"});
        ctx.add({std::string("events/s: ") + cs.name, ps, tp, double(events) / (best / 1000.0), "events/s"});
        ctx.add({std::string("events: ") + cs.name, ps, tp, double(events), "events"});
        // Batch iterations simulated (runs of decode-only iterations are one event each).
        ctx.add({std::string("iterations/s: ") + cs.name, ps, tp, double(iterations) / (best / 1000.0),
                 "iterations/s"});
        ctx.add({std::string("iterations: ") + cs.name, ps, tp, double(iterations), "iterations"});
        ctx.add({std::string("simulated time: ") + cs.name, ps, tp, sim_s, "s"});
        ctx.add({std::string("KV-visible hit: ") + cs.name, ps, tp, hit_kv, "fraction"});
        ctx.add({std::string("state-usable hit: ") + cs.name, ps, tp, hit_state, "fraction"});
    }
    ctx.add({"trace load ms", {{"requests", double(lw.workload->requests.size())}}, {}, load_ms, "ms"});
}

K3_REGISTER_BENCH("fleet", "fleet simulation: Mooncake conversation trace on 8 instances (roofline costs)",
                  bench_fleet);

}  // namespace k3::cli
