#include "core/boundaries/engine_spacing.h"

namespace k3::boundaries {

EngineSpacingSweep::EngineSpacingSweep(EngineSpacingConfig c) : c_(std::move(c)) {}
EngineSpacingSweep::~EngineSpacingSweep() = default;

void EngineSpacingSweep::start() {
    EngineSpacingRun& r = runs_.emplace_back();
    r.spacing = c_.spacings[run_];
    const bool halved = run_ == c_.halved_run, slip = run_ == c_.slip_run;
    const uint32_t ran_at = halved ? r.spacing / 2 : r.spacing;
    if (c_.engine == CacheEngine::sglang) {
        SglangConfig s = c_.sglang;
        s.chunked_prefill_tokens = ran_at;
        sglang_ = std::make_unique<SglangReplay>(s);
        if (slip) sglang_->slip(SglangSlip::mamba_slot_leak);
    } else {
        VllmEngineConfig v = c_.vllm;
        v.block_tokens = ran_at;
        vllm_ = std::make_unique<VllmKvCacheManager>(v, slip ? VllmFault::leaked_ref : VllmFault::none);
    }
}

void EngineSpacingSweep::serve(const Request& q) {
    EngineSpacingRun& r = runs_.back();
    const uint64_t S = r.spacing, prompt = q.prompt_len;
    if (sglang_) {
        const SglangRequest h = sglang_->serve(q.tokens, prompt);
        r.off_setting += h.extends != (prompt - h.state_hit + S - 1) / S;
    } else {
        const VllmRequestResult h = vllm_->serve(q.tokens, prompt);
        r.off_setting += h.hit % S != 0 || (h.hit && h.hit > prompt - 1);
    }
}

void EngineSpacingSweep::finish() {
    EngineSpacingRun& r = runs_.back();
    if (sglang_) {
        sglang_->sanity_check();
        const SglangTotals& t = sglang_->totals();
        r.requests = t.requests;
        r.prompt_tokens = t.prompt_tokens;
        r.state_hit_tokens = t.state_hit_tokens;
        r.states_held = sglang_->cache().stats().states;
        for (const std::string& bad :
             {sglang_->mamba_slots_check(), sglang_->kv_check(), sglang_->locks_check(), t.sanity_failure})
            if (r.invariants.empty()) r.invariants = bad;
        sglang_.reset();
    } else {
        const VllmTotals& t = vllm_->totals();
        r.requests = t.requests;
        r.prompt_tokens = t.prompt_tokens;
        r.state_hit_tokens = t.hit_tokens;
        r.states_held = t.states_cached;
        r.invariants = vllm_->audit();
        if (r.invariants.empty() && (t.grid_violations || t.token_mismatches || t.stalled))
            r.invariants = "vLLM: " + std::to_string(t.grid_violations) + " hits off the grid, " +
                           std::to_string(t.token_mismatches) + " hash hits on other tokens, " +
                           std::to_string(t.stalled) + " stalled steps";
        vllm_.reset();
    }
    r.recomputed_tokens = r.prompt_tokens - r.state_hit_tokens;
}

double EngineSpacingSweep::step(const Workload& w, const Deadline& d) {
    const size_t n = w.requests.size(), all = c_.spacings.size() * (n ? n : 1);
    while (!done()) {
        if (!sglang_ && !vllm_) start();
        while (next_ < n) {
            serve(w.requests[next_++]);
            if ((next_ & 63) == 0 && d.passed()) return double(run_ * n + next_) / double(all);
        }
        finish();
        next_ = 0;
        ++run_;
        if (d.passed()) break;
    }
    return done() ? 1.0 : double(run_ * n) / double(all);
}

}  // namespace k3::boundaries
