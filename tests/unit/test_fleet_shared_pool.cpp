// One pool per instance for the running requests and the prefix cache (engine sglang / vllm,
// core/fleet/fleet_shared_pool.cpp): its budget from the device, the cache charged to it, evicted
// when the running requests cannot allocate, so that the hit rate falls as the load rises.
#include <doctest/doctest.h>

#include <memory>

#include "core/fleet/batch_former.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/step_model.h"
#include "core/fleet/tp_layout.h"
#include "core/fleet/workload_source.h"
#include "core/spec/storage.h"

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

// Speculative decoding's scratch in an engine's pool (issue 17): SGLang's verify scratch makes each
// mamba slot cost 1 + (1 + N) / ratio states, so the running cap falls; vLLM's running request holds
// 1 + N spec pages with snapshots and one with RecoverSSM.
TEST_CASE("shared pool: speculative scratch lowers SGLang's running cap and sizes vLLM's blocks") {
    FleetConfig c = shared_config(CacheEngine::sglang, 0.9);
    c.max_running = 1024;
    const auto w = chats(4);
    auto cap = [&](const FleetConfig& x) {
        FleetSim s(w, x);
        REQUIRE_MESSAGE(s.error().empty(), s.error());
        return s.running_cap(0);
    };
    const uint32_t plain = cap(c);
    c.spec_state = SpecState::snapshot;
    c.draft_len = 3;
    const uint32_t spec = cap(c);
    const double ratio = sglang_running_ratio(c.sglang, c.caching);
    // The slots fall by the slot's growth, 1 + 4 / ratio (within one slot's rounding per ratio).
    CHECK(double(spec) == doctest::Approx(double(plain) / (1 + 4 / ratio)).epsilon(0.02));
    const uint64_t state = tp_layout(c.model, c.gpus, c.attention_dp).pool_model().state_bytes_per_layer;
    CHECK(engine_state_slot_bytes(c, state) == uint64_t(double(state) * (1 + 4 / ratio)));
    // A track interval shorter than a verify is refused, as is RecoverSSM, which SGLang does not have.
    c.draft_len = 300;
    CHECK_MESSAGE(FleetSim(w, c).error().find("must cover a verify") != std::string::npos,
                  FleetSim(w, c).error());
    c.draft_len = 3;
    c.spec_state = SpecState::recoverssm;
    CHECK(FleetSim(w, c).error().find("RecoverSSM is vLLM's") != std::string::npos);

    FleetConfig v = shared_config(CacheEngine::vllm, 0.9);
    v.spec_state = SpecState::snapshot;
    v.draft_len = 3;
    const spec::VllmPages pages = spec::vllm_pages(spec::vllm_kda_page_tensors(v.model, 3), 3);
    CHECK(engine_state_slot_bytes(v, state) == pages.snapshot_page);
    v.spec_state = SpecState::recoverssm;
    CHECK(engine_state_slot_bytes(v, state) == pages.recoverssm_page);
}
