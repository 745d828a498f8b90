// One pool per instance for the running requests and the prefix cache (engine sglang / vllm,
// core/fleet/fleet_shared_pool.cpp): its budget from the device, the cache charged to it, evicted
// when the running requests cannot allocate, so that the hit rate falls as the load rises.
#include <doctest/doctest.h>

#include <memory>

#include "core/fleet/fleet_sim.h"
#include "core/fleet/step_model.h"
#include "core/fleet/workload_source.h"

using namespace k3;

namespace {

FleetConfig shared_config(CacheEngine e, double memory_fraction) {
    FleetConfig c;
    c.model = *model_preset("kimi-linear-48b");
    c.hardware = *hardware_preset("h100");
    c.instances = 1;
    c.engine = e;
    c.memory_fraction = memory_fraction;
    c.max_running = 16;
    return c;
}

std::shared_ptr<const Workload> chats(uint32_t sessions) {
    WorkloadSpec s;
    s.synthetic = SyntheticKind::chat;
    s.sessions = sessions;
    s.seed = 11;
    return std::make_shared<const Workload>(synthetic_workload(s));
}

struct SharedRun {
    double state_hit = 0;
};

SharedRun run_shared(const FleetConfig& c, const std::shared_ptr<const Workload>& w) {
    FleetSim s(w, c);
    REQUIRE_MESSAGE(s.error().empty(), s.error());
    s.run();
    REQUIRE(s.done());
    CHECK_MESSAGE(s.audit().empty(), s.audit());
    CHECK(s.pool_owners() == 0);
    CHECK(s.totals().pool_overcommits == 0);
    uint64_t hit = 0, prompt = 0;
    for (const RequestOutcome& o : s.outcomes()) hit += o.state_hit;
    for (const Request& q : w->requests) prompt += q.prompt_len;
    return {double(hit) / double(prompt)};
}

}  // namespace

TEST_CASE("shared pool: the budget is the device less weights and activations") {
    const FleetConfig c = shared_config(CacheEngine::sglang, 0.9);
    const SharedPoolPlan p = shared_pool_plan(c);
    CHECK(p.device == doctest::Approx(2 * c.hardware.mem_bytes));
    CHECK(p.weights == doctest::Approx(weight_bytes(c.model).total()));  // the bf16 checkpoint
    CHECK(p.weights == doctest::Approx(97.3e9).epsilon(0.01));  // 47.1 B routed + 1.5 B other parameters
    CHECK(p.activations > 0);
    CHECK(p.activations < 0.01 * p.device);
    CHECK(p.budget == doctest::Approx(p.reserved - p.weights - p.activations));
}

TEST_CASE("shared pool: the cache gives way to running requests as the load rises") {
    for (CacheEngine e : {CacheEngine::sglang, CacheEngine::vllm}) {
        CAPTURE(cache_engine_id(e));
        // A few GB of pool beside the weights (8 for SGLang, whose running requests hold three state
        // slots each, 3 for vLLM's shared blocks): room for most of the cache at low load, where one
        // request runs at a time; at 50x the arrival rate 16 run at once and crowd it out.
        FleetConfig c = shared_config(e, 0.9);
        c.pool_bytes = e == CacheEngine::vllm ? 3000000000ull : 8000000000ull;
        if (e == CacheEngine::vllm) c.vllm.block_tokens = 1024;  // vLLM's block at TP2 (state fits)
        const auto w = chats(48);
        c.load = 0.05;
        const SharedRun calm = run_shared(c, w);
        c.load = 50;
        const SharedRun busy = run_shared(c, w);
        // The same load on a pool of 40 GB: what arrivals that overlap cost without the crowding.
        c.pool_bytes = 40000000000ull;
        const SharedRun roomy = run_shared(c, w);
        CHECK(busy.state_hit < calm.state_hit);
        CHECK(busy.state_hit < roomy.state_hit - 0.02);
    }
}

TEST_CASE("shared pool: a cache the pool does not charge fully fails the audit") {
    FleetConfig c = shared_config(CacheEngine::sglang, 0.9);
    c.falsify = FleetSimFalsify::cache_undercharged;
    FleetSim s(chats(8), c);
    REQUIRE(s.error().empty());
    s.run();
    CHECK(s.audit().find("charges the prefix cache") != std::string::npos);
}
