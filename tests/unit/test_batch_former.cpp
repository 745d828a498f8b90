// The engines' batch formers (core/fleet/batch_former.h) on hand-made bursts: SGLang's prefill-first
// batches, its running cap and retraction; vLLM's one-step admission of short prompts, its aligned
// chunks and recompute preemption; the rules the report's checks share.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>

#include "core/fleet/batch_former.h"
#include "core/fleet/fleet_sim.h"
#include "core/model/accounting.h"

using namespace k3;

namespace {

// `n` requests arriving together, each with its own prompt of `prompt` tokens and `output` tokens out.
std::shared_ptr<const Workload> burst(uint32_t n, uint32_t prompt, uint32_t output) {
    Workload w;
    w.name = "burst";
    for (uint32_t i = 0; i < n; ++i) {
        Request q;
        q.id = i;
        q.prompt_len = prompt;
        q.output_len = output;
        q.tokens = TokenSeq::Builder().stream(1000 + i, 0, prompt).build();
        w.requests.push_back(q);
    }
    return std::make_shared<const Workload>(std::move(w));
}

// One instance with room for `slots` running requests and `kv_tokens` of their KV.
FleetConfig one_instance(CacheEngine e, uint32_t slots, uint64_t kv_tokens) {
    FleetConfig c;
    c.model = *model_preset("kimi-linear-48b");
    c.hardware = *hardware_preset("h100");
    c.instances = 1;
    c.engine = e;
    c.max_running = slots;
    const PoolModel m = tp_layout(c.model, c.gpus, false).pool_model();
    c.working_bytes = uint64_t(slots) * m.state_bytes() + kv_tokens * m.kv_bytes_per_token();
    // The engines' one pool, sized alike: SGLang's mamba pool given as that many slots.
    c.pool_bytes = c.working_bytes;
    c.mamba_slots = slots;
    return c;
}

std::unique_ptr<FleetSim> run(std::shared_ptr<const Workload> w, const FleetConfig& c) {
    auto s = std::make_unique<FleetSim>(std::move(w), c);
    REQUIRE_MESSAGE(s->error().empty(), s->error());
    s->run();
    REQUIRE(s->done());
    for (const RequestOutcome& o : s->outcomes()) REQUIRE(o.completed);
    CHECK(s->audit().empty());
    return s;
}

// The most requests whose first token came at the same time (the first arrival starts an iteration of
// its own: the others arrive at the same time but after it).
uint32_t most_together(const FleetSim& s) {
    uint32_t best = 0;
    for (const RequestOutcome& a : s.outcomes()) {
        uint32_t n = 0;
        for (const RequestOutcome& o : s.outcomes()) n += o.first_token_ms == a.first_token_ms;
        best = std::max(best, n);
    }
    return best;
}

}  // namespace

TEST_CASE("batch former rules: SGLang's running ratio, vLLM's long-prefill threshold and chunk ends") {
    SglangConfig sc;
    CHECK(sglang_running_ratio(sc, true) == 5);  // 3 + the extra buffer's 2 ping-pong tracks
    sc.mode = SglangMode::no_buffer;
    CHECK(sglang_running_ratio(sc, true) == 3);
    CHECK(sglang_running_ratio(sc, false) == 1);
    CHECK(sglang_max_running(64, 5) == 12);
    CHECK(sglang_max_running(4, 5) == 1);
    VllmEngineConfig v;  // block 1920, max_model_len 2^20
    CHECK(vllm_long_prefill_threshold(v, 1) == 0);
    CHECK(vllm_long_prefill_threshold(v, 2) == 41943);        // int(2^20 * 0.04)
    CHECK(vllm_chunk_end_allowed(v, 0, 7680, 20000, 0));      // on the block grid
    CHECK(!vllm_chunk_end_allowed(v, 0, 7679, 20000, 0));     // one short of it
    CHECK(vllm_chunk_end_allowed(v, 7680, 11520, 20000, 0));  // the last full block (19200)
}

TEST_CASE("burst of short prompts: SGLang and vLLM start them in one batch, ideal two at a time") {
    const auto w = burst(20, 300, 4);
    const auto ideal = run(w, one_instance(CacheEngine::ideal, 100, 200000));
    const auto sglang = run(w, one_instance(CacheEngine::sglang, 100, 200000));
    const auto vllm = run(w, one_instance(CacheEngine::vllm, 100, 200000));
    CHECK(most_together(*ideal) == 2);  // max_prefills
    CHECK(most_together(*sglang) == 19);
    CHECK(most_together(*vllm) == 19);
    const FleetTotals& t = sglang->totals();
    CHECK(t.mixed_iterations == 0);
    CHECK(t.prefill_iterations == 2);  // the first arrival's, then the 19 others'
    CHECK(t.max_partial_in_batch == 0);
    CHECK(vllm->totals().mixed_iterations == 1);  // the first one decodes while the others prefill
}

TEST_CASE("SGLang: running requests capped at the state slots / 5, one chunked request per batch") {
    // 30 slots: 6 running at once; prompts of 20,000 tokens are chunked 8,192 at a time.
    const auto s = run(burst(8, 20000, 3), one_instance(CacheEngine::sglang, 30, 400000));
    const FleetTotals& t = s->totals();
    CHECK(t.peak_running == 6);
    CHECK(t.cap_reached > 0);
    CHECK(t.max_partial_in_batch == 1);
    CHECK(t.mixed_iterations == 0);
    CHECK(t.retractions == 0);
    CHECK(t.preemptions == 0);
}

TEST_CASE("KV runs out in decode: SGLang retracts, vLLM preempts, and every request completes") {
    // Eight requests whose prompts fill the KV pool; their decodes then need more pages than are left.
    const auto w = burst(8, 1000, 600);
    const auto sglang = run(w, one_instance(CacheEngine::sglang, 40, 10240));
    CHECK(sglang->totals().retractions > 0);
    CHECK(sglang->totals().preemptions == 0);
    CHECK(sglang->totals().mixed_iterations == 0);
    // vLLM's one block pool: states and KV share blocks, so it is sized for the 8 running states; its
    // block at TP 2 (1,024 tokens) makes the decodes cross into a second block.
    FleetConfig cv = one_instance(CacheEngine::vllm, 8, 10240);
    cv.vllm.block_tokens = 1024;
    const auto vllm = run(w, cv);
    CHECK(vllm->totals().preemptions > 0);
    CHECK(vllm->totals().retractions == 0);
    CHECK(vllm->totals().chunks_off_split == 0);
}
