// The engines' prefix-caching rules inside the fleet (core/fleet/fleet_engine.h) against module 5's
// replays of the engines (SglangReplay, VllmKvCacheManager) and reference/engines.md's figures: one
// instance, unbounded memory and cache, requests that never overlap in time.
//
// Sequential settings: the trace's timestamps come in buckets of about three seconds (10,851 of its
// 12,031 requests arrive together with the one before), so no load multiplier separates them; one
// running request per instance (max_running=1) does: each request is admitted when the one before it
// has completed, in the trace's order (FCFS, ties by id). Each request generates one token, as in
// engines.md's runs (max_new_tokens=1; the trace's own outputs would be decoded but not cached, since it
// carries no output tokens, and only cost time). The test checks that no admission overlapped another.
#include <doctest/doctest.h>

#include <chrono>

#include "core/fleet/fleet_engine.h"
#include "core/fleet/fleet_metrics.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/trace.h"
#include "core/fleet/workload.h"

using namespace k3;

namespace {

std::shared_ptr<const Workload> conversation() {
    static std::shared_ptr<const Workload> w = [] {
        const TraceResult tr =
            load_mooncake(std::string(K3_TEST_DATA) + "/traces/mooncake_conversation_trace.jsonl");
        REQUIRE(tr.ok());
        Workload x = mooncake_workload(tr.trace);
        for (Request& r : x.requests) r.output_len = 1;  // engines.md: max_new_tokens=1 (and 4x faster)
        return std::make_shared<const Workload>(std::move(x));
    }();
    return w;
}

FleetConfig sequential_config(CacheEngine e) {
    FleetConfig c;
    c.model = *model_preset("kimi-linear-48b");
    c.hardware = *hardware_preset("h100");
    c.instances = 1;
    c.link = *link_preset("ib-ndr");
    c.max_running = 1;
    c.engine = e;
    c.unbounded_memory = true;  // the engines' runs: nothing is ever evicted
    return c;
}

struct Hits {
    uint64_t prompt = 0, kv = 0, state = 0;
    double kv_pct() const { return 100.0 * double(kv) / double(prompt); }
    double state_pct() const { return 100.0 * double(state) / double(prompt); }
};

Hits run_fleet(const FleetConfig& c, EngineCounters* n = nullptr) {
    FleetSim s(conversation(), c);
    REQUIRE_MESSAGE(s.error().empty(), s.error());
    s.run();
    REQUIRE(s.done());
    CHECK(s.totals().overlapped_admissions == 0);
    CHECK(s.totals().preemptions == 0);
    const RequestSummary a = summarize_requests(s.outcomes());
    CHECK(a.completed == 12031);
    if (n) *n = s.totals().engine;
    return {a.prompt_tokens, a.kv_hit_tokens, a.state_hit_tokens};
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("fleet engine=sglang: one instance, requests one at a time, gives SGLang's own figures") {
    const auto t0 = std::chrono::steady_clock::now();
    for (SglangMode mode : {SglangMode::extra_buffer, SglangMode::no_buffer}) {
        CAPTURE(std::string(sglang_mode_id(mode)));
        FleetConfig c = sequential_config(CacheEngine::sglang);
        c.sglang.mode = mode;
        c.sglang.chunked_prefill_tokens = 8192;
        EngineCounters n;
        const Hits f = run_fleet(c, &n);
        // Module 5's SglangReplay gives exactly these tokens (test_engine_sglang.cpp).
        const SglangReferenceRow* row = sglang_reference_row(c.sglang);
        REQUIRE(row);
        CHECK(f.prompt == kSglangReferencePromptTokens);
        CHECK(f.kv == row->kv_tokens);
        CHECK(f.state == row->state_tokens);
        MESSAGE(std::string(sglang_mode_id(mode)) << ": " << f.kv_pct() << " % / " << f.state_pct() << " %");
        if (mode == SglangMode::extra_buffer) CHECK(n.branch_tracks > 0);
    }
    MESSAGE("fleet, both SGLang modes: " << ms_since(t0) << " ms");
}

TEST_CASE("fleet engine=vllm: one instance, requests one at a time, gives vLLM's own figures") {
    const auto t0 = std::chrono::steady_clock::now();
    for (const char* retention : {"0", "dense"}) {
        CAPTURE(std::string(retention));
        FleetConfig c = sequential_config(CacheEngine::vllm);
        c.vllm.block_tokens = 1920;
        c.vllm.retention = *parse_vllm_retention(retention);
        EngineCounters n;
        const Hits f = run_fleet(c, &n);
        // Module 5's VllmKvCacheManager gives exactly these tokens (test_engine_vllm.cpp).
        const VllmReferenceRow* row = vllm_reference_row(c.vllm);
        REQUIRE(row);
        CHECK(f.prompt == row->prompt_tokens);
        CHECK(f.kv == row->attention_hit_tokens);
        CHECK(f.state == row->hit_tokens);
        MESSAGE("retention " << std::string(retention) << ": " << f.kv_pct() << " % / " << f.state_pct()
                             << " %");
        CHECK(n.junctions > 0);
    }
    MESSAGE("fleet, vLLM retention 0 and dense: " << ms_since(t0) << " ms");
}

TEST_CASE("fleet engine rules: SGLang's tracks between chunks and in decode, vLLM's block states") {
    FleetEngineRules e;
    e.engine = CacheEngine::sglang;
    EngineAttempt a;
    EngineCounters n;
    // extra_buffer, prompt 10,000 in chunks 8,192 + 1,808: the first tracks 8,192 and inserts it (re-lock).
    EngineInsert i = engine_after_chunk(e, a, 0, 8192, 10000, n);
    CHECK(i.len == 8192);
    CHECK(i.state);
    CHECK(i.relock);
    CHECK(a.last_track == 0);
    // The last extend tracks 8,192 + floor(1,808 / 64) * 64 = 9,984 and inserts nothing yet.
    i = engine_after_chunk(e, a, 8192, 10000, 10000, n);
    CHECK(i.len == 0);
    CHECK(a.last_track == 9984);
    // 600 decoded tokens the server may cache: tracks at 10,240 and 10,496 (committed 10,599).
    std::vector<uint64_t> states;
    i = engine_at_finish(e, a, 10599, 10600, 10000, n, &states);
    CHECK(i.len == 10496);
    CHECK(n.decode_tracks == 2);
    CHECK(n.tracked == 2);
    // A chunk shorter than the 64-token grid tracks nothing: the insert between chunks is skipped.
    EngineAttempt b;
    CHECK(engine_after_chunk(e, b, 0, 40, 100, n).len == 0);
    // no_buffer: every chunk end, everything committed at the end.
    e.sglang.mode = SglangMode::no_buffer;
    EngineAttempt c;
    CHECK(engine_after_chunk(e, c, 0, 8192, 10000, n).len == 8192);
    CHECK(engine_at_finish(e, c, 10599, 10600, 10000, n, &states).len == 10599);

    // vLLM, block 1,920: a chunk ending on a block boundary leaves a state, one ending inside none.
    FleetEngineRules v;
    v.engine = CacheEngine::vllm;
    v.vllm.block_tokens = 1920;
    EngineAttempt d;
    i = engine_after_chunk(v, d, 0, 7680, 10000, n);
    CHECK(i.len == 7680);
    CHECK(i.state);
    i = engine_after_chunk(v, d, 7680, 10000, 10000, n);
    CHECK(i.len == 9600);
    CHECK_FALSE(i.state);
    // Decode to 13,000 committed: blocks at 11,520 are completed by decode; dense keeps their state.
    i = engine_at_finish(v, d, 13000, 13000, 10000, n, &states);
    CHECK(i.len == 11520);
    CHECK(states == std::vector<uint64_t>{11520});
    // Retention 0 keeps only the replay boundary and the junction: none of these.
    v.vllm.retention = *parse_vllm_retention("0");
    const uint64_t before = n.states_not_retained;
    CHECK_FALSE(engine_after_chunk(v, d, 0, 3840, 10000, n).state);
    engine_at_finish(v, d, 13000, 13000, 10000, n, &states);
    CHECK(states.empty());
    CHECK(n.states_not_retained == before + 2);
}
