#include "core/fleet/workload_replay.h"

#include <algorithm>

namespace k3 {

WorkloadReplay::WorkloadReplay(const Workload& w, const ReplayConfig& c) : w_(w), c_(c), cache_(c.cache) {}

double WorkloadReplay::run(const Deadline* deadline, uint64_t max_requests) {
    uint64_t n = 0;
    while (next_ < w_.requests.size() && n < max_requests) {
        const Request& r = w_.requests[next_++];
        ++n;
        Admission a = admit_request(cache_, c_.policy, *r.tokens, r.prompt_len, r.cache_len());
        ++t_.requests;
        t_.prompt_tokens += a.prompt_len;
        t_.kv_hit_tokens += a.kv_hit;
        t_.state_hit_tokens += a.state_hit;
        t_.recomputed_tokens += a.recompute;
        t_.gap_requests += a.kv_hit > a.state_hit;
        t_.full_hits += a.prompt_len > 0 && a.state_hit == a.prompt_len;
        t_.no_state_hit += a.state_hit == 0;
        t_.state_over_kv += a.state_hit > a.kv_hit;
        t_.checkpoints_planned += a.plan.size();
        for (const auto& p : a.plan) t_.junctions_planned += p.kind == CheckpointKind::junction;
        if (c_.record_requests) hits_.push_back({a.kv_hit, a.state_hit});
        const Completion done = complete_request(cache_, c_.policy, a, r.tokens, c_.state_bytes);
        t_.states_added += done.insert.states_added;
        t_.states_redundant += done.insert.states_redundant;
        t_.retention_dropped += done.retention_dropped;
        // The cache's own peaks include the moment between an insert and its eviction; the total is
        // sampled after each request.
        const CacheStats& s = cache_.stats();
        t_.peak_state_bytes = std::max(t_.peak_state_bytes, s.peak_state_bytes);
        t_.peak_kv_bytes = std::max(t_.peak_kv_bytes, s.peak_kv_tokens * c_.kv_bytes_per_token);
        t_.peak_total_bytes =
            std::max(t_.peak_total_bytes, s.state_bytes + s.kv_tokens * c_.kv_bytes_per_token);
        if (deadline && deadline->passed()) break;
    }
    return w_.requests.empty() ? 1.0 : double(next_) / double(w_.requests.size());
}

void ReplayQueue::add(std::string label, double x, const ReplayConfig& c) {
    todo_.push_back({std::move(label), x, c, {}, {}});
}

double ReplayQueue::step(const Workload& w, const Deadline& d) {
    while (next_ < todo_.size()) {
        if (!cur_) cur_ = std::make_unique<WorkloadReplay>(w, todo_[next_].cfg);
        cur_->run(&d);
        if (!cur_->done()) break;
        todo_[next_].t = cur_->totals();
        todo_[next_].s = cur_->cache().stats();
        cur_.reset();
        ++next_;
        if (d.passed()) break;
    }
    if (next_ >= todo_.size()) return 1.0;
    const double part = cur_ ? double(cur_->processed()) / double(std::max<size_t>(w.requests.size(), 1)) : 0;
    return (double(next_) + part) / double(todo_.size());
}

}  // namespace k3
