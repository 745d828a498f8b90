// Module 4 `prefix`: the engine method (engine = sglang | vllm) in the report: its hits and states, and
// the checks that it followed the engine's rules. The rules themselves are serve::engine_plan
// (core/cache/prefix_server.h), built on the engines' shared rule functions.
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/modules/prefix/prefix.h"

namespace k3 {

namespace {

// The request's hits as recounted without the tree, else as the server reported them.
PrefixRecount hits_of(const PrefixMethodResult& m, size_t i) {
    if (m.recount.size() == m.rows.size()) return m.recount[i];
    return {m.rows[i].kv_hit, m.rows[i].state_hit};
}

std::string positions_text(const std::vector<uint64_t>& v) {
    if (v.empty()) return "none";
    std::string s;
    for (uint64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return s;
}

// The first request whose resume, saved states or cached length is not what the engine's rule gives
// for its recounted hits ("" when none).
std::string misplaced(const PrefixParams& p, const PrefixResult& res, const serve::ServerConfig& c) {
    const PrefixMethodResult& m = res.method(PrefixMethod::engine);
    for (size_t i = 0; i < m.rows.size(); ++i) {
        const PrefixRow& row = m.rows[i];
        const PrefixRecount h = hits_of(m, i);
        const serve::EnginePlan e =
            serve::engine_plan(c, res.requests[i].prompt.size(), h.kv_hit, h.state_hit);
        std::vector<uint64_t> want;
        for (const PlannedCheckpoint& pc : e.states) want.push_back(pc.pos);
        if (want != row.saved_at || e.resume != row.resumed || e.cache_len != row.cached ||
            e.steps.size() != row.steps)
            return "request " + std::to_string(i + 1) + ": resumed at " + std::to_string(row.resumed) +
                   ", states at " + positions_text(row.saved_at) + ", cached " + std::to_string(row.cached) +
                   " tokens in " + std::to_string(row.steps) + " steps; " + cache_engine_id(p.engine) +
                   "'s rule: " + std::to_string(e.resume) + ", " + positions_text(want) + ", " +
                   std::to_string(e.cache_len) + " in " + std::to_string(e.steps.size());
    }
    return {};
}

// vLLM: the first request whose hit is off the block grid, past prompt - 1 or above the attention hit.
std::string off_block_grid(const PrefixParams& p, const PrefixResult& res) {
    const PrefixMethodResult& m = res.method(PrefixMethod::engine);
    const uint64_t B = p.vllm_block_tokens;
    for (size_t i = 0; i < m.rows.size(); ++i) {
        const PrefixRow& row = m.rows[i];
        const uint64_t prompt = res.requests[i].prompt.size();
        if (row.kv_hit % B != 0 || row.resumed % B != 0 || row.resumed > row.kv_hit ||
            row.kv_hit + 1 > prompt)
            return "request " + std::to_string(i + 1) + " of " + std::to_string(prompt) +
                   " tokens: attention hit " + std::to_string(row.kv_hit) + ", hybrid hit " +
                   std::to_string(row.resumed) + " (block " + std::to_string(B) + ")";
    }
    return {};
}

void engine_scalars(const PrefixResult& res, Report& r) {
    const PrefixMethodResult& m = res.method(PrefixMethod::engine);
    uint64_t prompt = 0, kv = 0, state = 0, saved = 0, steps = 0;
    for (size_t i = 0; i < m.rows.size(); ++i) {
        prompt += res.requests[i].prompt.size();
        kv += m.rows[i].kv_hit;
        state += m.rows[i].resumed;
        saved += m.rows[i].saved;
        steps += m.rows[i].steps;
    }
    const double per_prompt = double(std::max<uint64_t>(prompt, 1));
    r.scalar("engine_token_hit_kv", "KV-visible token hit (" + m.label + ")", "fraction",
             double(kv) / per_prompt)
        .help = "Prompt tokens whose KV the engine's rule counts as a hit, over all prompt tokens.";
    r.scalar("engine_token_hit_state", "State-usable token hit (" + m.label + ")", "fraction",
             double(state) / per_prompt, true)
        .help = "Prompt tokens the engine's requests skipped: where they resumed from a state.";
    r.scalar("engine_states_saved", "States the engine saved (all requests)", "states", double(saved));
    r.scalar("engine_states_cached", "States the engine's tree holds at the end", "states",
             double(m.end_stats.states));
    r.scalar("engine_prefill_steps", "Prefill steps (chunks) of the engine's requests", "steps",
             double(steps));
}

// Where the engine's rules put each request: its hits, steps, states and cached length.
void engine_table(const PrefixResult& res, Report& r) {
    const PrefixMethodResult& m = res.method(PrefixMethod::engine);
    Table& t =
        r.add_table(make_table("Per request under " + m.label, {{"request", ""},
                                                                {"prompt", "tokens"},
                                                                {"KV-visible hit", "tokens"},
                                                                {"resumed at", "tokens"},
                                                                {"branching point / junction", "tokens"},
                                                                {"prefill steps", "steps"},
                                                                {"states saved at", ""},
                                                                {"cached", "tokens"}}));
    for (size_t i = 0; i < m.rows.size(); ++i) {
        const PrefixRow& row = m.rows[i];
        t.add({double(i + 1), double(res.requests[i].prompt.size()), double(row.kv_hit), double(row.resumed),
               double(row.branching), double(row.steps), positions_text(row.saved_at), double(row.cached)});
    }
}

}  // namespace

void report_prefix_engine(const PrefixParams& p, const PrefixResult& res, Report& r) {
    const PrefixMethodResult& m = res.method(PrefixMethod::engine);
    if (!m.active || m.rows.size() != res.requests.size()) return;
    engine_scalars(res, r);
    engine_table(res, r);
    serve::ServerConfig c;
    c.cache.page_size = p.page_size;
    prefix_engine_config(p, c);
    const std::string bad = misplaced(p, res, c);
    r.check("engine_states_where_rules_put_them",
            "Every request of the engine method resumed, saved its states and cached where the engine's rule "
            "puts them",
            bad.empty(),
            bad.empty() ? format_grouped(double(m.rows.size())) +
                              " requests: the rule applied to the hits recounted without the tree gives each "
                              "request's resume point, state positions, cached length and prefill steps"
                        : bad);
    if (p.engine == CacheEngine::vllm) {
        const std::string grid = off_block_grid(p, res);
        r.check("vllm_hits_on_block_grid",
                "vLLM: every hit is on the block grid, at most prompt - 1, the hybrid hit at most the "
                "attention hit",
                grid.empty(),
                grid.empty() ? "block of " + std::to_string(p.vllm_block_tokens) + " tokens, " +
                                   format_grouped(double(m.rows.size())) + " requests"
                             : grid);
    }
    r.notes.push_back(
        "The engine method (" + m.label +
        ") follows the engine's own placement and hit rules (reference/engines.md) on the same real states "
        "and KV; the five methods above it are idealised placements that no engine's rules constrain.");
}

}  // namespace k3
