// Module 3 `pool`: what a run costs before it starts (Module::estimate). Each design serves the stream
// step by step (core/memory/pool_sim.h); the time goes to page operations (a std::set free list per
// page taken or given back), to the steps themselves, and to the audits, which walk every page of the
// pool. A blocked queue head retries its whole admission every step, taking pages until the pool
// refuses and giving them back: with small pages or long prompts that retry is most of the run.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "core/base/numfmt.h"
#include "core/modules/pool/pool.h"

namespace k3 {

namespace {

// Native costs, measured with `/usr/bin/time -f '%U %S'` on `k3cli run pool` (defaults; page_tokens 1,
// 4, 16; requests 100 ... 5,000; prompt_tokens 4,096 and 16,384; output_tokens 2,048; budget_mib
// 16,384) against the counts below, on a loaded 2-core machine. Checked on 31 more corners (prefixes up
// to 131,072 tokens, arrival rates 0.01 and 100, every preset, state ratios, drafts): the counts miss
// the prefix cache's evictions and the preemptions, and long prefixes took up to 2.5 times the counted
// cost (prefix_min 65,536, prefix_max 131,072): kMargin covers that; slow arrivals and prompts too long
// for the pool are counted up to 12 times too dear (runs under 1 s).
constexpr double kPageOpLevelSeconds = 7e-9;  // a page taken or given back: a set node and its malloc
constexpr double kDecodeSeconds = 60e-9;      // one running request's step (its KV grows by a token)
constexpr double kStepSeconds = 300e-9;       // a step's arrivals, sample and bookkeeping
constexpr double kAuditUnitSeconds = 20e-9;   // one page or slot of one audit (the map it builds)
constexpr double kUnitBytes = 160;            // per page or slot: free-list node, owner entry, audit map
constexpr double kMargin = 2.6;

// The stream in groups: before and after the mix shift, the requests without a shared prefix and those
// of each prefix (a mean prefix would hide the long ones that do not fit). Requests and mean prompt
// tokens of each (prompts are uniform in 0.5 to 1.5 x their own part).
struct Phase {
    double requests = 0, own = 0, prefix = 0;
    double prompt() const { return own + prefix; }
};

std::vector<Phase> stream_phases(const PoolWorkload& w) {
    const std::vector<uint32_t> plen = prefix_lengths(w);
    const double before = std::clamp(std::floor(w.shift_at * w.requests + 0.5), 0.0, double(w.requests));
    const double after = double(w.requests) - before;
    std::vector<Phase> out;
    for (const auto& [n, own] :
         {std::pair{before, double(w.prompt_tokens)}, std::pair{after, w.prompt_tokens * w.shift_factor}}) {
        out.push_back({n * (1 - w.prefix_share), own, 0});
        for (uint32_t l : plen) out.push_back({n * w.prefix_share / double(plen.size()), own, double(l)});
    }
    return out;
}

// One design as the estimate sees it: tokens per page, bytes per KV token, state bytes a running
// request holds, and the bytes each kind may take.
struct DesignShape {
    double page = 1, kv = 1, state = 0, kv_budget = 0, state_budget = 0, units = 0;
};

// What serving the stream from one design counts; a page operation walks the free list's tree, so it
// costs per level of it.
struct DesignWork {
    double steps = 0, page_ops = 0, decode = 0, audit_units = 0, levels = 1;
    double seconds() const {
        return kPageOpLevelSeconds * levels * page_ops + kDecodeSeconds * decode + kStepSeconds * steps +
               kAuditUnitSeconds * audit_units;
    }
};

DesignWork serve_work(const PoolParams& p, const DesignShape& d) {
    const PoolWorkload& w = p.workload;
    const double out = w.output_tokens;
    // The longest prompt one request may bring and still fit an otherwise empty pool.
    const double fit = std::min(d.state_budget >= d.state ? 1e300 : 0.0, d.kv_budget / d.kv - 1.5 * out);
    const std::vector<Phase> phases = stream_phases(w);
    DesignWork r;
    double served = 0, dropped = 0, attempt = 0, weight = 0;
    for (const Phase& ph : phases) {
        const double fits = ph.own > 0 ? std::clamp((fit - ph.prefix) / ph.own - 0.5, 0.0, 1.0) : 1.0;
        const double n = ph.requests * fits, footprint = (ph.prompt() + out) * d.kv;
        const double by_kv = d.kv_budget / footprint, by_state = d.state_budget / d.state;
        r.steps += 1.5 * n * out / std::max(1.0, std::min(by_kv, by_state));
        r.page_ops += n * (ph.prompt() + 1.5 * out) / d.page;
        // A retry takes pages until the pool refuses, on average half the prompt's (the pool is short of
        // less than a request); none when the state slots run out first (the static split's state
        // pool), as they are taken before any page. The longer the prompt, the likelier it waits.
        const double tries = by_state < by_kv ? 0.0 : 0.5 * std::max(0.0, std::min(ph.prompt(), fit));
        attempt += n * ph.prompt() * tries, weight += n * ph.prompt();
        served += n, dropped += ph.requests - n;
    }
    // The queue's head retries at every step.
    r.page_ops += r.steps * attempt / std::max(weight, 1.0) / d.page;
    // A request that does not fit even an empty pool waits at the head while the running ones drain (up
    // to a longest output), taking the free pages every step (about half the pool), then is dropped.
    const double drain = 1.5 * out * served / std::max(served + dropped, 1.0);
    r.steps += dropped * drain;
    r.page_ops += dropped * drain * 0.5 * std::min(std::max(0.0, fit), 1e12) / d.page;
    // The arrivals' span when they come slower than the pool serves them; at most PoolSimOptions::max_steps.
    r.steps = std::min(std::max(r.steps, double(w.requests) / w.arrival_rate), 4e6);
    r.decode = 1.5 * served * out;
    r.page_ops += d.units;  // the pool's free list, built once
    r.levels = std::log2(d.units + 2);
    // Audits every 16 steps, the interval doubling every 128 audits; each walks every page and slot.
    r.audit_units = (128.0 * std::ceil(std::log2(r.steps / 2048.0 + 1.0)) + 2.0) * d.units;
    return r;
}

// The three designs' shapes from the parameters: SGLang's pages and static state share, vLLM's derived
// block (a request's state blocks at its padded size), the unified pool's bytes.
std::array<DesignShape, 3> design_shapes(const PoolParams& p) {
    const PoolModel m = pool_model_of(p);
    const double budget = double(pool_budget_bytes(p)), kv = double(m.kv_bytes_per_token());
    const double state = double(p.states_per_request) * double(m.state_bytes()), page = p.page_tokens;
    const double static_states = double(static_state_budget(m, {pool_budget_bytes(p), 1, p.state_ratio, 0}));
    DesignShape split{page, kv, state, budget - static_states, static_states, 0};
    split.units = split.kv_budget / (page * kv) + static_states / std::max(state, 1.0);
    DesignShape unified{page, kv, state, budget, budget, budget / (page * kv)};
    DesignShape vllm = unified;
    HybridBlockPlan plan;
    if (plan_hybrid_blocks(vllm_model_of(p), vllm_kernel_multiple(p), kVllmUserBlockTokens, &plan).empty()) {
        vllm.page = plan.block_tokens;
        vllm.state = double(plan.blocks_per_request(p.states_per_request)) * double(plan.block_bytes);
        vllm.units = budget / double(plan.block_bytes);
    }
    return {split, vllm, unified};
}

}  // namespace

RunEstimate pool_estimate(const PoolParams& p) {
    DesignWork all;
    double units = 0, seconds = 0, page_seconds = 0;
    for (const DesignShape& d : design_shapes(p)) {
        const DesignWork w = serve_work(p, d);
        seconds += w.seconds();
        page_seconds += kPageOpLevelSeconds * w.levels * w.page_ops;
        all.steps += w.steps, all.page_ops += w.page_ops, all.audit_units += w.audit_units;
        units = std::max(units, d.units);
    }
    RunEstimate e{.seconds = kMargin * seconds,
                  .bytes = 16.0 * 1024 * 1024 + kUnitBytes * units + 64.0 * p.workload.requests,
                  .counted = format_si(all.steps) + " steps, " + format_si(all.page_ops) +
                             " page operations, " + format_si(all.audit_units) +
                             " pages audited over the three designs"};
    // What to change: a smaller budget when the pool's tables are too large, larger pages when page
    // operations are most of the time, else a shorter stream.
    if (e.bytes > kRunBytesLimit)
        e.on = &p.budget_mib;
    else if (2 * page_seconds > seconds && p.page_tokens < 64)
        e.on = &p.page_tokens, e.larger_is_cheaper = true;
    else
        e.on = &p.workload.requests;
    return e;
}

}  // namespace k3
