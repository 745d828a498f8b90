// Module 5 `checkpoints` with engine=sglang: SGLang's MambaRadixCache replayed as the engine runs it
// (core/cache/engine_sglang.h), its own figures, the invariants reference/engines.md checks after every
// configuration, and the engine's published figures when the run is one of its configurations.
#include <cmath>

#include "core/base/numfmt.h"
#include "core/modules/checkpoints/checkpoints.h"

namespace k3 {

SglangConfig sglang_config(const CheckpointsParams& p, uint64_t state_bytes) {
    SglangConfig c;
    c.mode = p.sglang_mode;
    c.chunked_prefill_tokens = p.chunked_prefill_tokens;
    c.page_size = p.page_size;
    c.track_branching = p.falsify != CheckpointsFalsify::sglang_no_branching;
    c.state_bytes = state_bytes;
    return c;
}

ReplayTotals sglang_headline_totals(const SglangTotals& t, const CacheStats& s, uint64_t kv_bytes_per_token) {
    ReplayTotals h;
    h.requests = t.requests;
    h.prompt_tokens = t.prompt_tokens;
    h.kv_hit_tokens = t.kv_hit_tokens;
    h.state_hit_tokens = t.state_hit_tokens;
    h.recomputed_tokens = t.prompt_tokens - t.state_hit_tokens;
    h.gap_requests = t.gap_requests;
    h.full_hits = 0;  // the match stops at input_len - 1: a request always prefills a token
    h.no_state_hit = t.requests - t.requests_with_state_hit;
    h.checkpoints_planned = t.inserts;
    h.states_added = t.states_inserted;
    h.states_redundant = t.states_existing;
    h.junctions_planned = t.branch_tracks;
    h.peak_state_bytes = s.peak_state_bytes;
    h.peak_kv_bytes = s.peak_kv_tokens * kv_bytes_per_token;
    h.peak_total_bytes = s.state_bytes + s.kv_tokens * kv_bytes_per_token;
    return h;
}

namespace {

void sglang_scalars(const SglangTotals& t, Report& r) {
    r.scalar("sglang_extend_batches", "SGLang extend batches", "count", double(t.extends)).help =
        "Prefill extends over all requests: one per request, more when chunked prefill splits a prompt.";
    r.scalar("sglang_tracked_states", "SGLang states tracked in extends", "count", double(t.tracked));
    r.scalar("sglang_branch_tracks", "SGLang branching points tracked", "count", double(t.branch_tracks))
        .help = "Extends whose one tracked state was the branching point instead of the chunk end.";
    r.scalar("sglang_inserts", "SGLang tree inserts", "count", double(t.inserts));
    r.scalar("sglang_states_existing", "SGLang inserts whose state existed", "count",
             double(t.states_existing));
    r.scalar("sglang_requests_with_state_hit", "SGLang requests resumed from a state", "requests",
             double(t.requests_with_state_hit));
    r.scalar("sglang_requests_with_kv_hit", "SGLang requests with a KV match", "requests",
             double(t.requests_with_kv_hit));
}

void sglang_invariants(const SglangOutcome& o, Report& r) {
    const SglangTotals& t = o.totals;
    auto held = [](const std::string& bad, std::string ok) { return bad.empty() ? ok : bad; };
    r.check("sglang_mamba_slots_match_states", "SGLang: live mamba slots equal the mamba states in the tree",
            o.slots.empty(),
            held(o.slots, format_grouped(double(t.mamba_allocated - t.mamba_freed)) + " slots live of " +
                              format_grouped(double(t.mamba_allocated)) + " allocated"));
    r.check("sglang_kv_slots_match_tree", "SGLang: KV allocated minus freed equals the KV tokens in the tree",
            o.kv.empty(),
            held(o.kv, format_grouped(double(t.kv_allocated)) + " allocated - " +
                           format_grouped(double(t.kv_freed)) +
                           " freed (duplicates at insert, tails past "
                           "the last tracked state)"));
    r.check("sglang_no_locks_left", "SGLang: no lock references left, every request slot freed",
            o.locks.empty(),
            held(o.locks, format_grouped(double(t.locks)) + " locks taken and released, " +
                              format_grouped(double(t.req_allocated)) + " request slots freed"));
    r.check("sglang_sanity_checks", "SGLang: the tree's audit holds every 2,000 requests and at the end",
            t.sanity_failure.empty(),
            held(t.sanity_failure, format_grouped(double(t.sanity_checks)) +
                                       " audits: spans, child index, LRU lists, locks, counts"));
}

// The run against engines.md's row of its configuration (SGLang v0.5.12 on the conversation trace).
void sglang_figures(const SglangOutcome& o, Report& r) {
    const SglangReferenceRow& row = *o.reference;
    const SglangTotals& t = o.totals;
    const double kv = t.token_hit_kv() * 100, st = t.token_hit_state() * 100;
    const bool within = std::fabs(kv - row.kv_percent) < 0.1 && std::fabs(st - row.state_percent) < 0.1;
    const std::string name = "SGLang " + std::string(sglang_mode_id(row.mode)) + ", chunked prefill " +
                             format_grouped(row.chunked_prefill_tokens) + ", page " +
                             std::to_string(row.page_size) + ": " + format_sig(row.kv_percent, 5) +
                             " % KV-visible, " + format_sig(row.state_percent, 5) +
                             " % state-usable (reference/engines.md)";
    r.check("sglang_engine_figures", name, within,
            format_sig(kv, 5) + " % / " + format_sig(st, 5) + " %; tokens " +
                format_grouped(double(t.kv_hit_tokens)) + " / " + format_grouped(double(t.state_hit_tokens)) +
                " vs the engine's " + format_grouped(double(row.kv_tokens)) + " / " +
                format_grouped(double(row.state_tokens)) + "; mamba states in the tree " +
                format_grouped(double(o.states_in_tree)) + " vs " +
                format_grouped(double(row.states_in_tree)) + "; extends " +
                format_grouped(double(t.extends)) + " vs " + format_grouped(double(row.extends)));
}

}  // namespace

void report_sglang(const SglangOutcome& o, Report& r) {
    sglang_scalars(o.totals, r);
    sglang_invariants(o, r);
    if (o.reference) sglang_figures(o, r);
    r.notes.push_back(
        "engine=sglang: SGLang's MambaRadixCache (" + std::string(sglang_mode_id(o.config.mode)) +
        ", chunked prefill " + format_grouped(o.config.chunked_prefill_tokens) + ", page " +
        std::to_string(o.config.page_size) +
        ") as the engine runs it: requests one after another, unbounded pools, no output tokens (the "
        "prompts only are cached, as reference/engines.md's runs). The policy, interval and chunk "
        "parameters and the sweeps belong to the ideal replay.");
}

}  // namespace k3
