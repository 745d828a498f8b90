// The fleet simulator (core/fleet): event order, cost model against the roofline, wait queues,
// routers, the Mooncake figure on one instance, conservation, one-step against run-of-steps
// equivalence, a cross-build digest, the consistency guard, tenant isolation, faults and recovery.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/base/crc32c.h"
#include "core/fleet/cost_model.h"
#include "core/fleet/fleet_metrics.h"
#include "core/fleet/fleet_sim.h"
#include "core/fleet/router.h"
#include "core/fleet/trace_reference.h"
#include "core/fleet/wait_queue.h"
#include "core/fleet/workload_source.h"
#include "core/fleet/workload_tenants.h"
#include "core/model/accounting.h"

using namespace k3;

namespace {

// Working memory for `slots` running requests and `tokens` of their KV (Kimi-Linear-48B on the default
// 2 GPUs, tensor parallel: the MLA latent on both ranks, core/fleet/tp_layout.h).
uint64_t working_for(uint32_t slots, uint64_t tokens) {
    const PoolModel a = tp_layout(*model_preset("kimi-linear-48b"), FleetConfig{}.gpus, false).pool_model();
    return uint64_t(slots) * a.state_bytes() + tokens * a.kv_bytes_per_token();
}

FleetConfig base_config(uint32_t instances = 4) {
    FleetConfig c;
    c.model = *model_preset("kimi-linear-48b");
    c.hardware = *hardware_preset("h100");
    c.instances = instances;
    c.link = *link_preset("ib-ndr");
    return c;
}

std::shared_ptr<const Workload> chat(uint32_t sessions, uint64_t seed = 7) {
    WorkloadSpec s;
    s.synthetic = SyntheticKind::chat;
    s.sessions = sessions;
    s.seed = seed;
    return std::make_shared<const Workload>(synthetic_workload(s));
}

std::shared_ptr<const Workload> mix(uint32_t sessions, uint64_t seed = 3) {
    WorkloadSpec s;
    s.sessions = sessions;
    s.seed = seed;
    return std::make_shared<const Workload>(synthetic_workload(s));
}

std::unique_ptr<FleetSim> run(std::shared_ptr<const Workload> w, const FleetConfig& c) {
    auto s = std::make_unique<FleetSim>(std::move(w), c);
    REQUIRE_MESSAGE(s->error().empty(), s->error());
    s->run();
    REQUIRE(s->done());
    return s;
}

// Everything a run must satisfy whatever it simulates.
void check_conservation(const FleetSim& s) {
    uint64_t done = 0, failed = 0, gen = 0, work = 0;
    for (const RequestOutcome& o : s.outcomes()) {
        done += o.completed;
        failed += o.failed != FailReason::none;
        CHECK(o.failed != FailReason::stalled);
        if (o.completed) {
            CHECK(o.generated == o.output);
            CHECK(o.first_token_ms >= o.arrival_ms);
            CHECK(o.finish_ms >= o.first_token_ms);
        }
        CHECK(o.state_hit <= o.kv_hit);
        gen += o.generated;
        work += o.prefill_work;
    }
    CHECK(done + failed == s.outcomes().size());
    CHECK(s.totals().iter_prefill_tokens == work);
    CHECK(s.totals().iter_decode_tokens + s.totals().iter_first_tokens == gen);
    CHECK(s.totals().lost_tokens <= work);
    CHECK(s.leases_held() == 0);
    CHECK(s.pool_owners() == 0);
    CHECK(s.audit() == "");
}

bool same_outcomes(const FleetSim& a, const FleetSim& b) {
    const auto& x = a.outcomes();
    const auto& y = b.outcomes();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
        if (std::memcmp(&x[i].first_token_ms, &y[i].first_token_ms, sizeof(double)) != 0 ||
            std::memcmp(&x[i].finish_ms, &y[i].finish_ms, sizeof(double)) != 0 ||
            x[i].kv_hit != y[i].kv_hit || x[i].state_hit != y[i].state_hit ||
            x[i].prefill_work != y[i].prefill_work || x[i].preemptions != y[i].preemptions ||
            x[i].instance != y[i].instance || x[i].moves != y[i].moves)
            return false;
    return true;
}

uint32_t digest(const FleetSim& s) {
    uint32_t h = 0;
    for (const RequestOutcome& o : s.outcomes()) {
        const double d[3] = {o.arrival_ms, o.first_token_ms, o.finish_ms};
        const uint64_t u[6] = {o.kv_hit,      o.state_hit, o.prefill_work, uint64_t(o.instance),
                               o.preemptions, o.moves};
        h = crc32c(d, sizeof d, h);
        h = crc32c(u, sizeof u, h);
    }
    return h;
}

}  // namespace

TEST_CASE("fleet: a request with no prompt token is refused, not admitted over and over") {
    Workload w;
    for (uint32_t len : {8u, 0u}) {
        Request q;
        q.id = w.requests.size();
        q.tokens = TokenSeq::Builder().stream(q.id + 1, 0, len).build();
        q.prompt_len = len;
        q.output_len = 10;
        w.requests.push_back(q);
    }
    const FleetSim s(std::make_shared<const Workload>(w), base_config(1));
    CHECK(s.error() == "request 1 has no prompt token");
    CHECK(s.done());
}

TEST_CASE("fleet event queue: time order, ties in insertion order") {
    EventQueue q;
    q.push(5, 1);
    q.push(1, 2);
    q.push(5, 3);
    q.push(1, 4);
    q.push(3, 5);
    std::vector<uint32_t> kinds;
    while (!q.empty()) kinds.push_back(q.pop().kind);
    CHECK(kinds == std::vector<uint32_t>{2, 4, 5, 1, 3});
}

// roofline.h prices one device of g GPUs' bandwidth, every byte read once: the balanced view of DP
// attention (each rank reads its own requests' KV). Tensor parallel attention reads more KV (below).
TEST_CASE("the uncalibrated roofline cost model equals the roofline for pure batches, every preset and GPU") {
    for (const char* m : {"kimi-linear-48b", "qwen3-next-80b"})
        for (const Hardware& hw : hardware_presets())
            for (int gpus : {1, 2, 8}) {
                CAPTURE(m);
                CAPTURE(hw.id);
                CAPTURE(gpus);
                const ModelConfig cfg = *model_preset(m);
                const RooflineCostModel cm(cfg, hw, gpus, {}, true);
                for (double batch : {1.0, 7.0, 64.0})
                    for (double ctx : {0.0, 1000.0, 100000.0}) {
                        IterationWork w;
                        for (int i = 0; i < int(batch); ++i) w.add_decode(ctx);
                        const WorkCost r = decode_step_cost(cfg, cm.instance_hardware(), batch, ctx);
                        CHECK(std::abs(cm.seconds(w) - r.seconds) <= 1e-12 * r.seconds);
                    }
                for (double n : {512.0, 8192.0})
                    for (double ctx : {0.0, 30000.0}) {
                        IterationWork w;
                        w.add_chunk(ctx, n);
                        const WorkCost r = prefill_cost(cfg, cm.instance_hardware(), n, ctx);
                        CHECK(std::abs(cm.seconds(w) - r.seconds) <= 1e-12 * r.seconds);
                    }
                // A mixed batch reads the weights once: cheaper than its parts run apart.
                IterationWork d, p, both;
                for (int i = 0; i < 16; ++i) d.add_decode(4096), both.add_decode(4096);
                p.add_chunk(0, 2048);
                both.add_chunk(0, 2048);
                CHECK(cm.seconds(both) < cm.seconds(d) + cm.seconds(p));
                CHECK(cm.seconds(both) >= std::max(cm.seconds(d), cm.seconds(p)));
            }
}

TEST_CASE("fleet wait queue: FCFS with put-backs first, DRR shares, token buckets wait") {
    WaitQueue q;
    q.configure(QueuePolicy::fcfs, {1, 1}, 100, nullptr);
    q.push_back(10, 0, 5);
    q.push_back(11, 1, 5);
    q.push_front(12, 1);
    WaitQueue::Entry e;
    double next;
    std::vector<uint32_t> got;
    while (q.pick(0, &e, &next)) got.push_back(e.req);
    CHECK(got == std::vector<uint32_t>{12, 10, 11});

    // DRR, quantum 100: tenant 0 sends 10 requests of 100 tokens, tenant 1 two of 100: they alternate.
    q.configure(QueuePolicy::drr, {1, 1}, 100, nullptr);
    for (uint32_t i = 0; i < 10; ++i) q.push_back(i, 0, 100);
    q.push_back(100, 1, 100);
    q.push_back(101, 1, 100);
    got.clear();
    while (q.pick(0, &e, &next)) got.push_back(e.req);
    REQUIRE(got.size() == 12);
    CHECK(got[0] == 0);
    CHECK(got[1] == 100);
    CHECK(got[2] == 1);
    CHECK(got[3] == 101);
    // Quotas: a tenant that may not go keeps its place; nothing is picked if nobody may go.
    q.push_back(1, 0, 1);
    q.push_back(2, 1, 1);
    CHECK(q.pick(0, &e, &next, [](uint32_t t) { return t == 1; }));
    CHECK(e.req == 2);
    CHECK_FALSE(q.pick(0, &e, &next, [](uint32_t t) { return t == 1; }));
    CHECK(q.size() == 1);

    // Token buckets: 1,000 tokens/s, 2 s deep. A 1,500-token request goes at once (full bucket), the
    // next one waits until the bucket holds 1,500 again.
    TokenBuckets b;
    b.configure({1000.0}, 2.0);
    WaitQueue tq;
    tq.configure(QueuePolicy::token_bucket, {1}, 1, &b);
    tq.push_back(1, 0, 1500);
    tq.push_back(2, 0, 1500);
    CHECK(tq.pick(0, &e, &next));
    CHECK_FALSE(tq.pick(0, &e, &next));
    CHECK(next == doctest::Approx(1000.0));
    CHECK(tq.pick(next, &e, &next));
    CHECK(e.req == 2);
}

namespace {
struct FakeView : RouterView {
    std::vector<double> loads;
    std::vector<Match> matches;
    std::vector<bool> up;
    uint32_t instances() const override { return uint32_t(loads.size()); }
    bool eligible(uint32_t i) const override { return up.empty() || up[i]; }
    double load(uint32_t i) const override { return loads[i]; }
    Match match(uint32_t i, const Request&, uint64_t) const override { return matches[i]; }
};
}  // namespace

TEST_CASE("fleet routers: affinity and its thresholds, p2c, bounded-load hashing") {
    FakeView v;
    v.loads = {3, 1, 2, 5};
    v.matches.resize(4);
    v.matches[2].kv_len = 900, v.matches[2].state_len = 100;
    v.matches[3].kv_len = 500, v.matches[3].state_len = 500;
    Request r;
    r.session = 42;
    RouterConfig c;
    c.kind = RouterKind::prefix;
    Router prefix(c, 4, 1);
    CHECK(prefix.choose(r, 1000, v).instance == 2);  // longest KV-visible match
    c.kind = RouterKind::state_aware;
    Router state(c, 4, 1);
    CHECK(state.choose(r, 1000, v).instance == 3);  // deepest checkpoint
    // Below the cache threshold: least loaded.
    CHECK(prefix.choose(r, 10000, v).instance == 1);
    // Imbalanced (max - min > 64 and max > 1.5 min): least loaded whatever the match.
    v.loads = {100, 1, 30, 200};
    CHECK(prefix.choose(r, 1000, v).instance == 1);
    v.loads = {3, 1, 2, 5};
    c.kind = RouterKind::least_loaded;
    CHECK(Router(c, 4, 1).choose(r, 1000, v).instance == 1);
    c.kind = RouterKind::round_robin;
    Router rr(c, 4, 1);
    v.up = {true, false, true, true};
    std::vector<int> seq;
    for (int i = 0; i < 4; ++i) seq.push_back(rr.choose(r, 1000, v).instance);
    CHECK(seq == std::vector<int>{0, 2, 3, 0});
    v.up.clear();
    // p2c: always one of two distinct instances, the less loaded one; never the most loaded.
    c.kind = RouterKind::power_of_two;
    Router p2c(c, 4, 9);
    for (int i = 0; i < 200; ++i) CHECK(p2c.choose(r, 1000, v).instance != 3);
    // Session hashing: the same session goes to the same instance while loads are even ...
    c.kind = RouterKind::session;
    Router h(c, 4, 5);
    v.loads = {2, 2, 2, 2};
    const int home = h.choose(r, 1000, v).instance;
    for (int i = 0; i < 10; ++i) CHECK(h.choose(r, 1000, v).instance == home);
    // ... and elsewhere once the home would exceed 1.25 x the mean.
    v.loads[size_t(home)] = 20;
    CHECK(h.choose(r, 1000, v).instance != home);
}

TEST_CASE(
    "fleet: one instance, unbounded cache, a checkpoint every 512 tokens reproduces 37.36 % on the Mooncake "
    "trace") {
    const TraceResult tr =
        load_mooncake(std::string(K3_TEST_DATA) + "/traces/mooncake_conversation_trace.jsonl");
    REQUIRE(tr.ok());
    auto w = std::make_shared<const Workload>(mooncake_workload(tr.trace));
    FleetConfig c = base_config(1);
    c.cache.page_size = 1;
    c.policy.kind = PolicyKind::interval;
    c.policy.interval = 512;
    auto s = run(w, c);
    check_conservation(*s);
    const RequestSummary a = summarize_requests(s->outcomes());
    CHECK(a.completed == 12031);
    CHECK(std::round(a.hit_kv() * 10000) == 3736);
    CHECK(std::round(a.hit_state() * 10000) == 3734);
    // Exactly module 5's sequential replay: the block-level count of trace_reference.h.
    const TraceReferenceHits ref = trace_reference_hits(tr.trace, 512);
    CHECK(a.kv_hit_tokens == ref.kv_hit_tokens);
    CHECK(a.state_hit_tokens == ref.state_hit_interval);
}

TEST_CASE("fleet conservation: memory pressure, preemptions, every router") {
    auto w = mix(48);
    for (size_t k = 0; k < router_ids().size(); ++k) {
        CAPTURE(router_ids()[k]);
        FleetConfig c = base_config(3);
        c.router.kind = RouterKind(k);
        c.load = 6;
        c.working_bytes = working_for(48, 40000);  // decode runs out of pages
        c.max_running = 48;
        c.cache.state_capacity = 32;
        c.cache.kv_capacity_tokens = 200000;
        auto s = run(w, c);
        check_conservation(*s);
        CHECK(summarize_requests(s->outcomes()).completed == w->requests.size());
        if (RouterKind(k) == RouterKind::round_robin) CHECK(s->totals().preemptions > 0);
    }
}

TEST_CASE("fleet: runs of decode steps give exactly what stepping one iteration at a time gives") {
    auto w = mix(32);
    for (int scenario = 0; scenario < 8; ++scenario) {
        CAPTURE(scenario);
        FleetConfig c = base_config(3);
        c.load = 5;
        // Speculative decoding: steps of several tokens, with and without preemptions.
        if (scenario >= 4) c.spec_state = SpecState::snapshot, c.draft_len = 5, c.acceptance_len = 3.7;
        if (scenario == 5) c.working_bytes = working_for(48, 40000), c.max_running = 48;
        if (scenario == 6) c.cache.state_capacity = 8, c.host = {1000000, 512, *link_preset("pcie5")};
        if (scenario == 7) c.pd = {1, StateHandoff::recompute_last, true, true, *link_preset("ib-ndr")};
        if (scenario == 1) c.working_bytes = working_for(48, 40000), c.max_running = 48;  // preemptions
        if (scenario == 2) c.faults = {{FaultKind::crash, 1, 8000, 15000}}, c.recovery = Recovery::host_tier;
        if (scenario == 3) c.faults = {{FaultKind::drain, 0, 8000, 0}}, c.recovery = Recovery::migrate;
        FleetConfig slow = c;
        slow.fast_decode = false;
        auto a = run(w, c), b = run(w, slow);
        CHECK(same_outcomes(*a, *b));
        CHECK(a->totals().iter_decode_tokens == b->totals().iter_decode_tokens);
        CHECK(a->totals().preemptions == b->totals().preemptions);
        CHECK(a->totals().events < b->totals().events);
        if (scenario == 1) CHECK(a->totals().preemptions > 0);
        if (scenario >= 4) CHECK(a->totals().iter_decode_tokens > 3 * a->totals().decode_iterations);
        check_conservation(*a);
    }
}

TEST_CASE("fleet: the same seed gives the same run, and the same digest in every build") {
    auto w = mix(24, 11);
    FleetConfig c = base_config(3);
    c.router.kind = RouterKind::power_of_two;
    c.load = 4;
    c.seed = 5;
    c.cache.state_capacity = 24;
    auto a = run(w, c), b = run(w, c);
    CHECK(same_outcomes(*a, *b));
    const uint32_t d = digest(*a);
    MESSAGE("fleet digest " << d);
    CHECK(d == 596906165u);  // the native and the WebAssembly build print the same
    c.seed = 6;
    CHECK(digest(*run(w, c)) != d);
}

TEST_CASE("fleet consistency guard: zero violations with it, some without") {
    auto w = chat(40);
    FleetConfig c = base_config(2);
    c.load = 4;
    c.policy.kind = PolicyKind::interval;  // KV to the end of each turn, states only every 512 tokens
    auto guarded = run(w, c);
    CHECK(guarded->totals().violations == 0);
    CHECK(guarded->totals().tainted_resumes == 0);
    CHECK(guarded->totals().guard_held_back > 0);
    c.guard = false;
    auto loose = run(w, c);
    CHECK(loose->totals().violations > 0);
    CHECK(loose->totals().tainted_resumes >
          0);  // later turns resume from checkpoints written after a violation
    check_conservation(*loose);
    // Skipping what the state cannot vouch for saves work: that is why engines get it wrong.
    CHECK(summarize_requests(loose->outcomes()).prefill_work <
          summarize_requests(guarded->outcomes()).prefill_work);
}

TEST_CASE("fleet tenants: a bursting tenant with and without isolation") {
    std::vector<TenantSpec> t(3);
    for (size_t i = 0; i < t.size(); ++i) {
        t[i].sessions_per_s = 0.4;
        t[i].output_len_mean = 250;
        t[i].system_len = 1024 + 512 * uint32_t(i);  // as module 12
    }
    t[0].user_len_mean = 6000;
    t[0].burst_factor = 12;
    t[0].burst_start_s = 30;
    t[0].burst_s = 40;
    auto all = std::make_shared<const Workload>(tenant_workload(t, 120, 1));
    auto solo = std::make_shared<const Workload>(tenant_workload(t, 120, 1, {false, true, true}));
    FleetConfig c = base_config(2);
    c.router.kind = RouterKind::least_loaded;
    c.max_batch_tokens = 2048;
    c.cache.state_capacity = 48;
    c.cache.kv_capacity_tokens = 600000;
    c.tenants.assign(3, TenantConfig{});
    auto p99 = [](const FleetSim& s) {
        return summarize_requests(s.outcomes(),
                                  [](const RequestOutcome& o) {
                                      return o.tenant != 0 && o.arrival_ms >= 30000 && o.arrival_ms < 70000;
                                  })
            .ttft_ms.p99;
    };
    FleetConfig iso = c;
    iso.queue = QueuePolicy::drr;
    iso.quotas = true;
    const double alone = p99(*run(solo, iso));
    auto with = run(all, iso);
    auto without = run(all, c);
    check_conservation(*with);
    check_conservation(*without);
    MESSAGE("well-behaved p99 TTFT: alone " << alone << " ms, isolated " << p99(*with) << " ms, FCFS "
                                            << p99(*without) << " ms");
    CHECK(p99(*with) <= 2.5 * alone);
    CHECK(p99(*without) >= 10 * alone);
    // Quotas keep the well-behaved tenants' checkpoints: their state-usable hit does not collapse.
    auto hit = [](const FleetSim& s) {
        return summarize_requests(s.outcomes(), [](const RequestOutcome& o) { return o.tenant != 0; })
            .hit_state();
    };
    CHECK(hit(*with) > hit(*without));
}

TEST_CASE("fleet faults: crash with recompute or host tier, drain with migration") {
    auto w = chat(60);
    FleetConfig c = base_config(3);
    c.load = 6;
    c.router.kind = RouterKind::session;
    c.faults = {{FaultKind::crash, 1, 5000, 20000}};
    auto recompute = run(w, c);
    check_conservation(*recompute);
    const FaultOutcome& fr = recompute->faults()[0];
    CHECK(fr.requests_moved > 0);
    CHECK(fr.lost_tokens > 0);
    CHECK(recompute->instance_stats()[1].down_ms == doctest::Approx(20000));
    CHECK(summarize_requests(recompute->outcomes()).completed == w->requests.size());

    c.recovery = Recovery::host_tier;
    auto host = run(w, c);
    check_conservation(*host);
    CHECK(host->faults()[0].host_restores > 0);
    CHECK(host->totals().violations == 0);
    CHECK(summarize_requests(host->outcomes()).prefill_work <
          summarize_requests(recompute->outcomes()).prefill_work);

    // A drain with live migration loses nothing; moving the KV with only the last checkpoint leaves
    // the state behind: the guard recomputes, no guard counts the resumes as violations.
    c.faults = {{FaultKind::drain, 1, 5000, 0}};
    c.recovery = Recovery::migrate;
    auto mig = run(w, c);
    check_conservation(*mig);
    CHECK(mig->faults()[0].migrated > 0);
    CHECK(mig->faults()[0].lost_tokens == 0);
    CHECK(mig->faults()[0].drained_ms >= 5000);
    CHECK(mig->totals().violations == 0);
    c.migration_move = MigrationMove::kv_and_checkpoint;
    c.guard = false;
    auto loose = run(w, c);
    check_conservation(*loose);
    CHECK(loose->totals().violations_moved > 0);
    // Nobody left: requests fail, they are not lost.
    c = base_config(2);
    c.faults = {{FaultKind::crash, 0, 1000, 0}, {FaultKind::crash, 1, 1000, 0}};
    auto dead = run(w, c);
    check_conservation(*dead);
    CHECK(summarize_requests(dead->outcomes()).failed > 0);
}

TEST_CASE("fleet timeline stays within its span budget") {
    auto w = mix(40);
    FleetConfig c = base_config(4);
    c.load = 4;
    c.max_timeline_spans = 200;
    auto s = run(w, c);
    const auto spans = s->timeline();
    CHECK(!spans.empty());
    CHECK(spans.size() <= 200);
    for (const TimelineSpan& x : spans) {
        CHECK(x.lane < 4);
        CHECK(x.end_s > x.start_s);
    }
}

namespace {

// Every byte the host tiers' transfers sent arrived, was lost with a crash or was still in flight,
// and the caches and leases are consistent after the run.
void check_host_tier(const FleetSim& s) {
    check_conservation(s);
    CHECK_MESSAGE(s.audit().empty(), s.audit());
    CHECK(s.leases_held() == 0);
    const FleetTotals& t = s.totals();
    CHECK(t.host_write_bytes ==
          t.host_write_arrived_bytes + t.host_write_lost_bytes + t.host_write_pending_bytes);
    CHECK(t.host_load_bytes == t.host_load_arrived_bytes + t.host_load_lost_bytes);
}

}  // namespace

// The host tier in normal serving (issue 17): prefixes the device's small cache lets go of come back
// from host memory; with too few host states its KV is no hit at all; every byte is accounted for,
// through a crash too.
TEST_CASE("fleet: a host tier serves the misses of a small device cache, if it has the states") {
    auto w = mix(48);
    FleetConfig c = base_config(3);
    c.load = 4;
    c.cache.state_capacity = 8;
    auto state_hit = [](const FleetSim& s) {
        int64_t hit = 0;
        for (const RequestOutcome& o : s.outcomes()) hit += o.state_hit;
        return hit;
    };
    auto plain = run(w, c);
    c.host = {2000000, 1024, *link_preset("pcie5")};
    auto hosted = run(w, c);
    c.host.state_slots = 2;
    auto starved = run(w, c);
    check_host_tier(*hosted);
    check_host_tier(*starved);
    CHECK(hosted->totals().host_hit_tokens > 0);
    CHECK(state_hit(*hosted) > state_hit(*plain));
    // Two host states serve a fraction of what 1,024 do (measured: a fifth of the gain over no tier).
    CHECK(3 * (state_hit(*starved) - state_hit(*plain)) < state_hit(*hosted) - state_hit(*plain));
    // A crash while writes and loads are in flight loses them with the instance, and nothing else.
    c.host.state_slots = 1024;
    c.faults = {{FaultKind::crash, 1, 6000, 4000}};
    auto crashed = run(w, c);
    check_host_tier(*crashed);
    CHECK(crashed->resume_audit().inconsistent() == 0);
}

// Prefill/decode disaggregation (issue 17): every request prefills on a prefill instance and decodes on
// a decode instance, its transfer accounted byte for byte; SGLang's handoff sends the state after N
// tokens with the first token, vLLM's after N - 1 and the decoder recomputes one token more.
TEST_CASE("fleet: disaggregated requests prefill on one stage, decode on the other, their bytes accounted") {
    auto w = mix(24);
    FleetConfig c = base_config(4);
    c.load = 4;
    c.pd.prefill_instances = 1;
    c.pd.link = *link_preset("ib-ndr");
    for (StateHandoff h : {StateHandoff::slot, StateHandoff::recompute_last}) {
        CAPTURE(int(h));
        c.pd.handoff = h;
        auto s = run(w, c);
        check_conservation(*s);
        CHECK_MESSAGE(s->audit().empty(), s->audit());
        CHECK(s->resume_audit().inconsistent() == 0);
        const FleetTotals& t = s->totals();
        CHECK(t.pd_bytes_sent == t.pd_bytes_arrived);
        uint64_t moved = 0, bytes = 0;
        for (const RequestOutcome& o : s->outcomes()) {
            if (o.transfer_ms < 0) continue;
            ++moved;
            bytes += o.transfer_bytes;
            CHECK(o.instance >= 1);  // it finished on a decode instance
            CHECK(o.transfer_kv_tokens == (h == StateHandoff::slot ? o.prompt : o.prompt - 1));
            CHECK(o.transfer_state_pos == o.transfer_kv_tokens);
            CHECK(o.first_token_ms >= o.arrival_ms + o.transfer_ms);
        }
        CHECK(moved == t.pd_transfers);
        CHECK(bytes == t.pd_bytes_sent);
        CHECK(s->instance_stats()[0].decode_tokens == 0);  // the prefill instance never decodes
        for (uint32_t k = 1; k < 4; ++k) CHECK(s->instance_stats()[k].routed > 0);
    }
    // vLLM's handoff with the state after all N tokens and the KV to N - 1: the audit sees it.
    c.falsify = FleetSimFalsify::pd_state_past_kv;
    CHECK(run(w, c)->resume_audit().inconsistent() > 0);
    // A decode-side cache takes only the KV it lacks.
    c.falsify = FleetSimFalsify::none;
    c.pd.handoff = StateHandoff::slot;
    const uint64_t full = run(w, c)->totals().pd_kv_tokens;
    c.pd.decode_cache = true;
    auto cached = run(w, c);
    check_conservation(*cached);
    CHECK_MESSAGE(cached->audit().empty(), cached->audit());
    CHECK(cached->totals().pd_kv_tokens < full);
}

// The prefill pool on a GPU preset of its own (issue 17): its iterations run on that preset's step
// model (each still matches the roofline of its batch), the decode pool's on the fleet's.
TEST_CASE("fleet: a prefill pool on faster GPUs prefills faster, the decode pool is unchanged") {
    auto w = mix(24);
    FleetConfig c = base_config(3);
    c.pd.prefill_instances = 1;
    c.pd.link = *link_preset("ib-ndr");
    auto same = run(w, c);
    c.first_gpus = {1, *hardware_preset("b200")};
    auto faster = run(w, c);
    check_conservation(*faster);
    CHECK(faster->totals().clock_gaps == 0);
    CHECK(faster->instance_stats()[0].busy_ms < 0.9 * same->instance_stats()[0].busy_ms);
    CHECK(faster->cost_model(0).instance_hardware().id == "b200");
    CHECK(faster->cost_model(1).instance_hardware().id == c.hardware.id);
    // The decode steps of one request at one context cost the same on the decode pool either way.
    IterationWork d;
    d.add_decode(4096);
    CHECK(faster->cost_model(1).seconds(d) == same->cost_model(1).seconds(d));
}

namespace {

// Disaggregated (two prefill instances of four) on the slow eth-100 link, so that handoffs queue on
// the prefill instances' links.
FleetConfig pd_fault_config() {
    FleetConfig c = base_config(4);
    c.load = 4;
    c.pd.prefill_instances = 2;
    c.pd.link = *link_preset("eth-100");
    return c;
}

// A handoff of the run without a fault: its request, its prefill and decode instances, and a moment
// its transfer was on the link (the run with the fault is the same until the fault).
struct Handoff {
    uint32_t req = 0, prefill = 0, decode = 0;
    double mid_ms = 0;
};
Handoff longest_handoff(const FleetSim& s) {
    Handoff h;
    double longest = -1;
    for (uint32_t i = 0; i < s.outcomes().size(); ++i) {
        const RequestOutcome& o = s.outcomes()[i];
        if (o.transfers == 0 || o.transfer_ms <= longest) continue;
        longest = o.transfer_ms;
        h = {i, 0, uint32_t(o.instance),
             o.first_token_ms - o.transfer_ms / 2};  // slot: first token on arrival
    }
    for (const AdmissionRecord& a : s.admissions())
        if (a.req == h.req) {
            h.prefill = a.instance;
            break;
        }
    return h;
}

// What every faulted disaggregated run must satisfy: every request completed or failed for a reason,
// every byte sent arrived or was lost with a transfer the fault cut, no resume on a state off its KV.
void check_pd_fault(const FleetSim& s) {
    check_conservation(s);
    CHECK_MESSAGE(s.audit().empty(), s.audit());
    CHECK(s.leases_held() == 0);
    const FleetTotals& t = s.totals();
    CHECK(t.pd_bytes_sent == t.pd_bytes_arrived + t.pd_bytes_lost);
    uint64_t cut = 0;
    for (const FaultOutcome::CutTransfer& x : s.faults()[0].cut_transfers) cut += x.bytes;
    CHECK(cut == t.pd_bytes_lost);
    CHECK(t.violations == 0);
    CHECK(s.resume_audit().inconsistent() == 0);
    for (const RequestOutcome& o : s.outcomes()) CHECK((o.completed || o.failed != FailReason::none));
}

// The request's admissions on the prefill stage.
uint32_t prefills_of(const FleetSim& s, uint32_t r) {
    uint32_t n = 0;
    for (const AdmissionRecord& a : s.admissions())
        n += a.req == r && a.instance < s.config().pd.prefill_instances;
    return n;
}

}  // namespace

// Faults under disaggregation (issue 17): a prefill instance that crashes with a handoff on its link
// loses it (its bytes counted lost) and the request prefills again on the other prefill instance.
TEST_CASE("fleet: a prefill instance crashing mid-transfer loses the handoff, the request prefills again") {
    auto w = mix(24);
    FleetConfig c = pd_fault_config();
    const Handoff h = longest_handoff(*run(w, c));
    REQUIRE(h.mid_ms > 0);
    c.faults = {{FaultKind::crash, h.prefill, h.mid_ms, 0}};  // never back: the other prefill serves
    auto s = run(w, c);
    check_pd_fault(*s);
    const FaultOutcome& fo = s->faults()[0];
    REQUIRE(!fo.cut_transfers.empty());
    CHECK(fo.cut_transfers[0].bytes > 0);
    CHECK(s->totals().pd_bytes_lost > 0);
    CHECK(s->outcomes()[h.req].completed);
    CHECK(s->outcomes()[h.req].transfers == 2);  // handed off again after its second prefill
    CHECK(prefills_of(*s, h.req) == 2);
    uint32_t there = 0;  // its second prefill ran on the other prefill instance
    for (const AdmissionRecord& a : s->admissions()) there += a.req == h.req && a.instance == h.prefill;
    CHECK(there == 1);
}

// A decode instance's crash: its decoding requests lose KV and state and go back through the prefill
// stage (their prefill instance's cache still holds their prompts), handoffs heading to it are lost.
TEST_CASE("fleet: a decode instance crashing sends its requests back through the prefill stage") {
    auto w = mix(24);
    FleetConfig c = pd_fault_config();
    const Handoff h = longest_handoff(*run(w, c));
    for (Recovery rec : {Recovery::recompute, Recovery::host_tier}) {
        CAPTURE(int(rec));
        c.recovery = rec;
        c.faults = {{FaultKind::crash, h.decode, h.mid_ms, 5000}};
        auto s = run(w, c);
        check_pd_fault(*s);
        const FaultOutcome& fo = s->faults()[0];
        CHECK(fo.running_moved > 0);
        CHECK(!fo.cut_transfers.empty());
        uint64_t resumed = 0;
        for (uint64_t n : fo.resumed_from) resumed += n;
        CHECK(resumed == fo.requests_moved);
        // Every request it held prefilled once more (cut handoffs are among them: the fault moved them)
        // and ended on a decode instance.
        uint32_t again = 0;
        for (uint32_t r = 0; r < s->outcomes().size(); ++r) {
            const RequestOutcome& o = s->outcomes()[r];
            if (o.moves == 0) continue;
            again += prefills_of(*s, r) >= 2;
            if (o.completed && o.generated > 1) CHECK(o.instance >= 2);
        }
        CHECK(again >= fo.running_moved);
    }
}

// Drain with live migration on the decode pool: the running decodes move to another decode instance
// (never a prefill one) and resume where they stopped.
TEST_CASE("fleet: draining a decode instance migrates its decodes to another decode instance") {
    auto w = mix(24);
    FleetConfig c = pd_fault_config();
    const Handoff h = longest_handoff(*run(w, c));
    c.recovery = Recovery::migrate;
    c.faults = {{FaultKind::drain, h.decode, h.mid_ms, 0}};
    auto s = run(w, c);
    check_pd_fault(*s);
    const FaultOutcome& fo = s->faults()[0];
    REQUIRE(!fo.migrations.empty());
    CHECK(fo.resumed_from[size_t(RecoverySource::migration)] == fo.migrations.size());
    for (const MigrationRecord& m : fo.migrations) {
        CHECK(m.resumed_at >= 0);
        CHECK(m.kept() == m.computed);  // KV and state moved: nothing recomputed
        uint32_t last = 0;
        for (const AdmissionRecord& a : s->admissions())
            if (a.req == m.request) last = a.instance;
        CHECK(last >= 2);
        CHECK(last != h.decode);
    }
    CHECK(fo.drained_ms >= h.mid_ms);
}

// The only prefill instance down for good: new requests fail (no instance of their stage), the decode
// instances finish what they hold, and nothing waits forever at the gateway.
TEST_CASE("fleet: with its only prefill instance gone, a disaggregated fleet fails new requests") {
    auto w = mix(24);
    FleetConfig c = pd_fault_config();
    c.pd.prefill_instances = 1;
    c.faults = {{FaultKind::crash, 0, 4000, 0}};
    auto s = run(w, c);
    check_pd_fault(*s);
    uint64_t no_instance = 0, completed = 0;
    for (const RequestOutcome& o : s->outcomes()) {
        no_instance += o.failed == FailReason::no_instance;
        completed += o.completed;
    }
    CHECK(no_instance > 0);
    CHECK(completed > 0);
}

// Each instance's own host tier with a crash: the crashed instance's goes with it (counted), and the
// requests it held load their prefixes from their new instances' host tiers where those hold more.
TEST_CASE("fleet: a crash loses the instance's host tier; moved requests load from their new one's") {
    auto w = mix(48);
    FleetConfig c = base_config(3);
    c.load = 4;
    c.cache.state_capacity = 8;  // a small device cache: the host tiers hold what it lets go
    c.host = {2000000, 1024, *link_preset("pcie5")};
    c.faults = {{FaultKind::crash, 1, 6000, 4000}};
    auto s = run(w, c);
    check_host_tier(*s);
    const FaultOutcome& fo = s->faults()[0];
    CHECK(fo.host_tokens_lost > 0);
    CHECK(fo.requests_moved > 0);
    uint64_t resumed = 0;
    for (uint64_t n : fo.resumed_from) resumed += n;
    CHECK(resumed <= fo.requests_moved);
    CHECK(fo.resumed_from[size_t(RecoverySource::instance_host)] > 0);
    CHECK(fo.resumed_from[size_t(RecoverySource::remote_tier)] == 0);  // recovery recompute: no remote tier
}
