// `k3cli bench cache`: replay of the Mooncake conversation trace (12,031 requests) through one
// instance's prefix cache in metadata mode, unbounded, a checkpoint every 512 tokens.
#include <cstdio>

#include "core/base/clock.h"
#include "core/cli/bench.h"
#include "core/fleet/workload_replay.h"
#include "core/model/accounting.h"

namespace k3::cli {

static void bench_cache(BenchContext& ctx) {
    const std::string path = resolve_trace_path(kMooncakeTraceName);
    Stopwatch sw;
    const TraceResult tr = path.empty() ? TraceResult{{}, "bundled trace not found", 0} : load_mooncake(path);
    if (!tr.ok()) {
        std::fprintf(stderr, "bench cache: %s\n", tr.error.c_str());
        return;
    }
    const double parse_ms = sw.ms();
    sw.restart();
    const Workload w = mooncake_workload(tr.trace);
    const double expand_ms = sw.ms();
    const MemoryAccount acc = account_memory(*model_preset("kimi-linear-48b"));

    struct Case {
        const char* name;
        PolicyKind policy;
        LruRefresh refresh;
        uint64_t states, kv;
    };
    const Case cases[] = {
        {"unbounded, interval 512", PolicyKind::interval, LruRefresh::node, 0, 0},
        {"unbounded, interval + end", PolicyKind::interval_end, LruRefresh::node, 0, 0},
        {"1024 states, node refresh", PolicyKind::interval_end, LruRefresh::node, 1024, 0},
        {"1024 states, path refresh", PolicyKind::interval_end, LruRefresh::path, 1024, 0},
        {"16M KV tokens, 4096 states", PolicyKind::interval_end, LruRefresh::node, 4096, 16u << 20},
    };
    const int reps = ctx.quick ? 1 : 3;
    for (const Case& c : cases) {
        ReplayConfig rc;
        rc.cache.page_size = 1;
        rc.cache.state_capacity = c.states;
        rc.cache.kv_capacity_tokens = c.kv;
        rc.cache.refresh = c.refresh;
        rc.policy.kind = c.policy;
        rc.policy.interval = 512;
        rc.state_bytes = acc.state_bytes;
        rc.kv_bytes_per_token = acc.kv_bytes_per_token;
        double best = 1e300, hit = 0;
        for (int i = 0; i < reps; ++i) {
            Stopwatch t;
            WorkloadReplay rp(w, rc);
            rp.run();
            best = std::min(best, t.ms());
            hit = rp.totals().token_hit_state();
        }
        const std::vector<std::pair<std::string, double>> ps = {{"requests", double(w.requests.size())},
                                                                {"state_capacity", double(c.states)},
                                                                {"kv_capacity_tokens", double(c.kv)}};
        ctx.add({std::string("replay ms: ") + c.name, ps, {{"policy", policy_id(c.policy)}}, best, "ms"});
        ctx.add({std::string("requests/s: ") + c.name,
                 ps,
                 {},
                 double(w.requests.size()) / (best / 1000.0),
                 "req/s"});
        ctx.add({std::string("state-usable hit: ") + c.name, ps, {}, hit, "fraction"});
    }
    ctx.add({"trace parse ms", {{"requests", double(w.requests.size())}}, {}, parse_ms, "ms"});
    ctx.add(
        {"expand to pseudo-tokens ms", {{"prompt_tokens", double(w.prompt_tokens())}}, {}, expand_ms, "ms"});
}

K3_REGISTER_BENCH("cache", "prefix cache: Mooncake conversation trace replay (metadata mode)", bench_cache);

}  // namespace k3::cli
