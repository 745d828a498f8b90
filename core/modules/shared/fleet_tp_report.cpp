// The TP layout's figures and checks (core/fleet/tp_layout.h), recounted here from one rank's share
// (shard_for_tp) rather than from the layout the simulation used.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/fleet/calibration.h"
#include "core/memory/hybrid_blocks.h"
#include "core/model/accounting.h"
#include "core/model/tp_shard.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

namespace {

constexpr double kProbeContext = 8192;  // tokens of context of the decode probe

// What one rank holding a request holds for it: its share under tensor parallel attention, all of it
// under DP attention.
MemoryAccount rank_account(const FleetConfig& c) {
    return account_memory(c.attention_dp ? c.model : shard_for_tp(c.model, std::max(c.gpus, 1)));
}

// The KV tokens an instance's working pool holds, from one rank's bytes: under TP every rank holds
// every token, so one rank's share of the working memory, less its share of the state slots, over a
// rank's KV page; under DP the ranks' pools taken together (requests split across them).
// Under an engine, the instance's one pool (shared_pool_plan's budget): SGLang's static split gives
// the KV pool budget / (1 + 0.9) of it; vLLM's blocks of group_size layer pages, one per attention
// group for a KV page, derived from one rank's page sizes.
uint64_t recount_shared_kv_tokens(const FleetConfig& c) {
    const uint64_t ranks = uint64_t(std::max(c.gpus, 1));
    const MemoryAccount a = rank_account(c);
    const uint64_t pool = uint64_t(std::max(0.0, shared_pool_plan(c).budget));
    const uint64_t budget = c.attention_dp ? pool : pool / ranks;
    if (c.engine == CacheEngine::vllm) {
        PoolModel m;
        m.linear_layers = a.linear_layers;
        m.attention_layers = a.attention_layers;
        m.state_bytes_per_layer = a.state_bytes_per_layer;
        m.kv_bytes_per_token_per_layer = a.kv_bytes_per_token_per_layer;
        HybridBlockPlan plan;
        if (!plan_hybrid_blocks(m, 1, c.vllm.block_tokens, &plan).empty() || plan.block_bytes == 0) return 0;
        return budget / plan.block_bytes / uint64_t(plan.attention_groups) * plan.block_tokens;
    }
    const uint64_t kv_budget = budget - uint64_t(double(budget) * 0.9 / 1.9);
    const uint64_t page = uint64_t(c.page_tokens) * a.kv_bytes_per_token;
    return page ? kv_budget / page * c.page_tokens : 0;
}

uint64_t recount_kv_tokens(const FleetSim& s) {
    const FleetConfig& c = s.config();
    if (c.engine != CacheEngine::ideal) return recount_shared_kv_tokens(c);
    const uint64_t ranks = uint64_t(std::max(c.gpus, 1));
    const MemoryAccount a = rank_account(c);
    const RunningStateSlots& slots = s.running_slots();
    const uint64_t slot_bytes = c.spec_state == SpecState::off ? a.state_bytes
                                : c.attention_dp               ? slots.bytes()
                                                               : slots.bytes() / ranks;
    const uint64_t budget = c.attention_dp ? c.working_bytes : c.working_bytes / ranks;
    const uint64_t states = uint64_t(slots.slots) * slot_bytes;
    const uint64_t page = uint64_t(c.page_tokens) * a.kv_bytes_per_token;
    return budget > states && page ? (budget - states) / page * c.page_tokens : 0;
}

// One decode request per rank at kProbeContext: the KV bytes one rank reads (TP: every request's, at
// a rank's share; DP: its own request's, whole) over one GPU's bandwidth.
double recount_kv_read_seconds(const FleetConfig& c) {
    const double ranks = double(std::max(c.gpus, 1));
    const double per_rank =
        double(rank_account(c).kv_bytes_per_token) * kProbeContext * (c.attention_dp ? 1.0 : ranks);
    return per_rank / (c.hardware.mem_bytes_per_s * kFittedFactors.f_mem);
}

struct Probe {
    double seconds = 0;
    bool memory_bound = true;
};
// The cost model's KV read time of that decode batch: its time at kProbeContext less its time at no
// context (both memory-bound, so the difference is the KV's bytes over the bandwidth).
Probe probe_kv_read(const FleetSim& s) {
    IterationWork with, without;
    for (int i = 0; i < std::max(s.config().gpus, 1); ++i) {
        with.add_decode(kProbeContext);
        without.add_decode(0);
    }
    const WorkCost a = s.cost_model().cost(with), b = s.cost_model().cost(without);
    return {a.seconds - b.seconds, !a.compute_bound && !b.compute_bound};
}

std::string layout_name(const FleetConfig& c) {
    return c.attention_dp ? "DP attention" : "tensor parallel " + std::to_string(std::max(c.gpus, 1));
}

}  // namespace

void report_tp_layout(Report& r, const FleetSim& s) {
    const FleetConfig& c = s.config();
    const MemoryAccount a = rank_account(c);
    const FleetSim::PoolSize pool = s.pool_sizes().empty() ? FleetSim::PoolSize{} : s.pool_sizes()[0];
    r.scalar("rank_kv_bytes_per_token", "KV bytes per token on a rank that holds it", "B",
             double(a.kv_bytes_per_token));
    r.scalar("rank_state_bytes", "State bytes per request on a rank that holds it", "B",
             double(a.state_bytes));
    r.scalar("instance_kv_tokens", "KV tokens an instance's working memory holds", "tokens",
             double(pool.kv_tokens), true);
    r.scalar("instance_state_slots", "State slots of an instance's working memory", "states",
             double(pool.state_slots));
    r.scalar("decode_kv_read_ms", "KV read time of a decode step, one request per rank at 8,192 tokens", "ms",
             probe_kv_read(s).seconds * 1000);
    r.notes.push_back("Attention layout: " + s.cost_model().layout().describe(c.model) + ". One rank holds " +
                      format_bytes(double(a.kv_bytes_per_token)) + " of KV per token and " +
                      format_bytes(double(a.state_bytes)) + " of state per request.");
}

void report_tp_checks(Report& r, const FleetSim& s, const std::string& suffix, const std::string& name) {
    const FleetConfig& c = s.config();
    const uint64_t want = recount_kv_tokens(s);
    bool ok = !s.pool_sizes().empty();
    std::string held;
    for (const FleetSim::PoolSize& p : s.pool_sizes()) {
        ok &= p.kv_tokens == want;
        held += (held.empty() ? "" : ", ") + format_grouped(double(p.kv_tokens));
    }
    r.check("kv_capacity_matches_rank_bytes" + suffix,
            name + "Each instance's KV capacity is what one rank's bytes give (" + layout_name(c) + ")", ok,
            "recounted from one rank's share (shard_for_tp): " + format_grouped(double(want)) +
                " tokens; the pools held " + held);
    const double expect = recount_kv_read_seconds(c);
    const Probe got = probe_kv_read(s);
    r.check("decode_kv_read_matches_rank_bytes" + suffix,
            name + "A decode step's KV read time is one rank's KV bytes over one GPU's bandwidth",
            got.memory_bound && std::fabs(got.seconds - expect) <= 1e-9 * expect,
            "one request per rank at " + format_grouped(kProbeContext) + " tokens: the cost model gives " +
                format_sig(got.seconds * 1e6, 6) + " us, the rank's bytes " + format_sig(expect * 1e6, 6) +
                " us" + (got.memory_bound ? "" : " (the probe is compute-bound: no KV read time to read)"));
}

}  // namespace k3
