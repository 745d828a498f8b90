// Module 5 `checkpoints`, engine=vllm: vLLM V1's own prefix cache (core/cache/engine_vllm.h) replayed
// over the workload, its block derived by module 3's Platform._align_hybrid_block_size, its figures in
// vLLM's meaning and its checks (block pool consistency, engines.md's figures on the bundled trace).
#include <cmath>

#include "core/base/numfmt.h"
#include "core/modules/checkpoints/checkpoints.h"
#include "core/modules/shared/engine_params.h"

namespace k3 {

CheckpointsVllm vllm_setup(const CheckpointsParams& p) {
    CheckpointsVllm v;
    // vLLM's derivation at TP 1, as engines.md runs Kimi-Linear (no draft tokens, align mode).
    const VllmBlockDerivation d = derive_vllm_block(p.preset, 1, p.vllm_mla_align);
    v.kernel_multiple = d.kernel_multiple;
    v.derivation_error = d.error;
    v.derived_block = d.block_tokens;
    if (p.vllm_block_tokens) v.derivation_error.clear();  // the block is given
    v.config.block_tokens = p.vllm_block_tokens ? p.vllm_block_tokens : d.block_tokens;
    v.config.prefix_match_unit = p.prefix_match_unit;
    v.config.hybrid = true;
    v.config.retention = parse_vllm_retention(p.retention_interval).value_or(VllmRetention{});
    return v;
}

VllmFault vllm_fault(CheckpointsFalsify f) {
    switch (f) {
        case CheckpointsFalsify::vllm_leaked_ref: return VllmFault::leaked_ref;
        case CheckpointsFalsify::vllm_stray_block: return VllmFault::stray_block;
        case CheckpointsFalsify::vllm_no_junction: return VllmFault::no_junction;
        default: return VllmFault::none;
    }
}

namespace {

std::string tokens_text(uint64_t n) { return format_grouped(double(n)); }

void vllm_scalars(const CheckpointsVllm& v, Report& r) {
    const VllmTotals& t = v.totals;
    r.scalar("token_hit_kv", "KV-visible token hit (vLLM attention group)", "fraction", t.attention_rate(),
             true)
        .help = "The MLA group's own hit: its longest chain of cached blocks, capped at prompt - 1.";
    r.scalar("token_hit_state", "State-usable token hit (vLLM hybrid hit)", "fraction", t.hit_rate(), true)
        .help = "num_new_local_computed_tokens: the deepest Mamba state at or below the attention hit.";
    r.scalar("recomputed_tokens", "Recomputed prompt tokens", "tokens",
             double(t.prompt_tokens - t.hit_tokens), true);
    r.scalar("hit_gap", "KV-visible minus state-usable", "fraction", t.attention_rate() - t.hit_rate());
    r.scalar("prompt_tokens", "Prompt tokens", "tokens", double(t.prompt_tokens));
    r.scalar("requests", "Requests", "requests", double(t.requests));
    r.scalar("kv_hit_tokens", "KV-visible hit tokens", "tokens", double(t.attention_hit_tokens));
    r.scalar("state_hit_tokens", "State-usable hit tokens", "tokens", double(t.hit_tokens));
    r.scalar("vllm_block_size", "vLLM block (scheduler = hash block)", "tokens",
             double(v.config.block_tokens));
    r.scalar("vllm_block_derived", "vLLM block as vLLM derives it", "tokens", double(v.derived_block)).help =
        "Platform._align_hybrid_block_size at TP 1 with kernel alignment " +
        std::to_string(v.kernel_multiple) + " (module 3).";
    r.scalar("vllm_requests_with_hit", "Requests with a hit", "requests", double(t.requests_with_hit));
    r.scalar("vllm_requests_with_junction", "Requests with a shared-prefix junction", "requests",
             double(t.requests_with_junction));
    r.scalar("vllm_prefill_chunks", "Prefill chunks (steps)", "count", double(t.chunks));
    r.scalar("vllm_states_cached", "Mamba states cached (one group)", "count", double(t.states_cached));
    r.scalar("vllm_states_not_retained", "Block-boundary states retention left out", "count",
             double(t.states_skipped));
    r.scalar("vllm_kv_blocks_cached", "Attention blocks cached", "count", double(t.kv_blocks_cached));
    r.timing_scalar("replay_ms", "Replay (vLLM engine)", "ms", v.replay_ms);
}

void vllm_checks(const CheckpointsVllm& v, Report& r) {
    const VllmTotals& t = v.totals;
    r.check("vllm_blocks_consistent",
            "vLLM block pool consistent: references returned, hash map = hashed blocks, hits on the grid",
            v.audit.empty(),
            v.audit.empty() ? tokens_text(t.kv_blocks_cached) + " attention blocks and " +
                                  tokens_text(t.states_cached) + " Mamba states hashed; every hit on the " +
                                  std::to_string(v.config.block_tokens) + "-token grid, below the prompt end"
                            : v.audit);
    const VllmReferenceRow* row = v.reference;
    if (!row) return;
    const double p = double(row->prompt_tokens);
    // The attention group's rate against its tokens where engines.md gives them, else its percentage.
    const double d_state = std::abs(double(t.hit_tokens) - double(row->hit_tokens)) / p,
                 d_kv = row->attention_hit_tokens
                            ? std::abs(double(t.attention_hit_tokens) - double(row->attention_hit_tokens)) / p
                            : std::abs(t.attention_rate() - row->attention_pct / 100);
    r.check("vllm_reference_hits",
            "vLLM's own figures on the conversation trace (" + std::string(row->run) +
                ", reference/engines.md) within 0.1 points",
            t.prompt_tokens == row->prompt_tokens && d_state < 0.001 && d_kv < 0.001,
            "hit " + tokens_text(t.hit_tokens) + " tokens (vLLM " + tokens_text(row->hit_tokens) +
                "), attention group " + format_sig(100 * t.attention_rate(), 4) + " % (vLLM " +
                format_sig(row->attention_pct, 4) + " %), requests with a hit " +
                tokens_text(t.requests_with_hit) + " (" + tokens_text(row->requests_with_hit) +
                "), junctions " + tokens_text(t.requests_with_junction) + " (" +
                tokens_text(row->requests_with_junction) + ")");
}

}  // namespace

void report_vllm(const CheckpointsParams& p, const CheckpointsResult& m, Report& r) {
    const CheckpointsVllm& v = *m.vllm;
    vllm_scalars(v, r);
    vllm_checks(v, r);
    r.notes.push_back("engine=vllm: vLLM V1's KV cache manager in align mode, " +
                      std::to_string(v.config.block_tokens) + "-token blocks, retention " +
                      vllm_retention_text(v.config.retention) + ", chunks of at most " +
                      tokens_text(v.config.token_budget) +
                      " tokens, one request at a time, no output tokens, an unbounded " +
                      "pool (reference/engines.md). The radix-tree replay, its policy (" +
                      policy_ids()[size_t(p.policy)] + ") and the sweeps do not run.");
}

}  // namespace k3
