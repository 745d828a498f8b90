// Module 3 `pool`: the checks. Each recounts or re-derives what it checks apart from the code that
// produced it: the pool's own tables against its running totals, every request's outcome against the
// counters, vLLM's block against a search over block sizes, and the observed Qwen3-Next block.
#include "core/base/numfmt.h"
#include "core/modules/pool/pool.h"

namespace k3 {

namespace {

// The kernel multiple vLLM used when it logged Qwen3-Next's block (FlashAttention's).
constexpr int kObservedBlockMultiple = 16;
constexpr uint32_t kObservedQwen3NextBlock = 1056;  // reference/serving.md §1.2 and §7

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Whether an empty pool of this layout holds `states` state slots and `tokens` tokens of KV: each
// design's capacity in closed form, apart from its allocator. The static split holds each kind in its
// own pool; vLLM's blocks and the unified pool's bytes serve both kinds from one budget.
bool empty_pool_holds(const PoolLayout& l, uint64_t states, uint64_t tokens) {
    const uint64_t pages = ceil_div(tokens, l.page_tokens);
    if (states > l.max_states || pages > l.max_kv_pages) return false;
    if (l.design == PoolDesign::static_split) return true;
    return states * l.state_slot_bytes + pages * l.kv_page_bytes <= l.budget_bytes - l.unusable_bytes;
}

// What the per-request ledger of one design's run says.
struct Ledger {
    size_t finished = 0, dropped = 0, unaccounted = 0;
    size_t unjustified_drops = 0;  // drops an empty pool would have held
};

Ledger ledger_of(const PoolDesignRun& run) {
    Ledger l;
    for (PoolRequestOutcome o : run.sim.outcomes) {
        l.finished += o == PoolRequestOutcome::finished;
        l.dropped += o == PoolRequestOutcome::dropped;
        l.unaccounted += o == PoolRequestOutcome::none;
    }
    for (const PoolDrop& d : run.sim.drops)
        l.unjustified_drops += empty_pool_holds(run.layout, d.states, d.tokens);
    return l;
}

// requests_accounted_<design id>: every request of the stream finished, or was dropped because it
// exceeds an empty pool of this design, each exactly once.
void accounted_check(const PoolComparison& c, const PoolDesignRun& run, Report& r) {
    const PoolSimResult& s = run.sim;
    const Ledger l = ledger_of(run);
    const bool ok = s.completed && s.outcomes.size() == c.requests && l.unaccounted == 0 &&
                    s.outcome_conflicts == 0 && l.finished == s.finished && l.dropped == s.dropped &&
                    s.drops.size() == s.dropped && l.unjustified_drops == 0;
    r.check("requests_accounted_" + std::string(pool_design_id(run.design)),
            "Every request finished, or was dropped because it exceeds an empty pool: " +
                pool_design_label(run.design),
            ok,
            format_grouped(double(l.finished)) + " finished and " + format_grouped(double(l.dropped)) +
                " dropped of " + format_grouped(double(c.requests)) + " requests (" +
                format_grouped(double(l.unjustified_drops)) + " of the drops would fit an empty pool; " +
                format_grouped(double(l.unaccounted)) + " requests without an outcome, " +
                format_grouped(double(s.outcome_conflicts)) + " with two); counters " +
                format_grouped(double(s.finished)) + " finished, " + format_grouped(double(s.dropped)) +
                " dropped" + (s.completed ? "" : "; the run stopped before the stream was served"));
}

// One design's audits, keyed <check>_<design id>:
//   no_page_owned_twice_static, no_page_owned_twice_vllm, no_page_owned_twice_unified
//   freed_at_end_static, freed_at_end_vllm, freed_at_end_unified
//   bytes_add_up_static, bytes_add_up_vllm, bytes_add_up_unified
//   requests_accounted_static, requests_accounted_vllm, requests_accounted_unified
void design_checks(const PoolComparison& c, const PoolDesignRun& run, Report& r) {
    const std::string id = pool_design_id(run.design), label = pool_design_label(run.design);
    const PoolSimResult& s = run.sim;
    const double budget = double(c.budget);
    r.check("no_page_owned_twice_" + id, "No page owned twice: " + label,
            s.audit_error.empty() && s.audits > 0,
            s.audit_error.empty()
                ? std::to_string(s.audits) + " full audits (owner tables, physical placement, map) passed"
                : s.audit_error);
    r.check("freed_at_end_" + id, "Everything freed at the end: " + label, s.freed_at_end,
            format_grouped(double(s.end_stats.free_bytes + s.end_stats.unusable_bytes)) + " of " +
                format_grouped(budget) + " B free, " + std::to_string(s.end_stats.kv_pages) + " pages and " +
                std::to_string(s.end_stats.states) + " states still held");
    r.check("bytes_add_up_" + id, "Bytes recounted from the pool's tables add up to the budget: " + label,
            s.recount_mismatches == 0 && s.recounts > 0,
            s.recount_mismatches == 0
                ? std::to_string(s.recounts) +
                      " sampled steps: the pages and slots on every owner's lists, the free lists and " +
                      format_grouped(double(run.layout.unusable_bytes)) + " B unusable tile " +
                      format_grouped(budget) + " B, and give the plotted KV, state, padding and free bytes"
                : std::to_string(s.recount_mismatches) + " of " + std::to_string(s.recounts) +
                      " sampled steps differ; first: " + s.recount_error);
    accounted_check(c, run, r);
}

// The attention block vLLM must choose, found by trying block sizes in turn rather than by the
// derivation's division: the first multiple of the kernel multiple whose page of one attention layer
// holds one layer's state, or the user's block when that is larger.
uint64_t searched_block_tokens(const PoolModel& m, uint64_t multiple, uint64_t user_block) {
    uint64_t block = multiple;
    while (block * m.kv_bytes_per_token_per_layer < m.state_bytes_per_layer) block += multiple;
    return block < user_block ? user_block : block;
}

void block_checks(const PoolParams& p, const PoolComparison& c, Report& r) {
    const HybridBlockPlan& plan = c.plan;
    const PoolModel& m = c.model;
    const uint64_t kv = m.kv_bytes_per_token_per_layer, state = m.state_bytes_per_layer;
    const uint64_t searched = searched_block_tokens(m, uint64_t(p.block_multiple), kVllmUserBlockTokens);
    const uint32_t pool_block = c.of(PoolDesign::hybrid_pages).layout.page_tokens;
    r.check("vllm_block_minimal",
            "vLLM block: one attention page holds one layer's state, and no smaller multiple would",
            plan.block_tokens == searched && pool_block == searched,
            "derived " + std::to_string(plan.block_tokens) + " tokens, the pool's block " +
                std::to_string(pool_block) + "; searched in steps of " + std::to_string(p.block_multiple) +
                ": " + std::to_string(searched) + " tokens x " + format_grouped(double(kv)) +
                " B = " + format_grouped(double(searched * kv)) + " B >= " + format_grouped(double(state)) +
                " B per layer" +
                (searched > kVllmUserBlockTokens
                     ? ", " + format_grouped(double((searched - uint64_t(p.block_multiple)) * kv)) + " B < " +
                           format_grouped(double(state)) + " B"
                     : " (the user's block of " + std::to_string(kVllmUserBlockTokens) + " tokens)"));
    // vLLM logged this block for Qwen3-Next with FlashAttention's multiple; other settings have no
    // observation to compare with.
    if (c.config.id == "qwen3-next-80b" && p.block_multiple == kObservedBlockMultiple)
        r.check("vllm_block_qwen3_next_observed",
                "vLLM block matches the observed Qwen3-Next figure (reference/serving.md §7)",
                plan.block_tokens == kObservedQwen3NextBlock,
                std::to_string(plan.block_tokens) + " tokens derived; vLLM logged " +
                    std::to_string(kObservedQwen3NextBlock) + " (kernel multiple " +
                    std::to_string(kObservedBlockMultiple) + ")");
}

}  // namespace

// pool_built_static, pool_built_vllm, pool_built_unified: a design's factory can refuse a layout the
// validator lets through (a static split whose KV share holds no page), and then the run stops.
bool pool_built_checks(const PoolComparison& c, Report& r) {
    bool all = true;
    for (const PoolDesignRun& run : c.designs) {
        const PoolLayout& l = run.layout;
        r.check("pool_built_" + std::string(pool_design_id(run.design)),
                "Pool built: " + pool_design_label(run.design), run.error.empty(),
                run.error.empty() ? format_grouped(double(l.max_kv_pages)) + " KV pages and " +
                                        format_grouped(double(l.max_states)) + " state slots at most"
                                  : run.error);
        all &= run.error.empty();
    }
    return all;
}

void pool_checks(const PoolParams& p, const PoolComparison& c, Report& r) {
    for (const PoolDesignRun& run : c.designs) design_checks(c, run, r);
    block_checks(p, c, r);
}

}  // namespace k3
