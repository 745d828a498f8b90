#include "core/fleet/wait_queue.h"

#include <algorithm>

namespace k3 {

// ---- token buckets ----

void TokenBuckets::configure(const std::vector<double>& rates_per_s, double burst_s) {
    rate_ = rates_per_s;
    depth_.assign(rate_.size(), 0);
    for (size_t t = 0; t < rate_.size(); ++t) depth_[t] = rate_[t] * burst_s;
    level_ = depth_;  // buckets start full
    at_.assign(rate_.size(), 0);
}

void TokenBuckets::refill(uint32_t t, double now) {
    if (now > at_[t]) {
        level_[t] = std::min(depth_[t], level_[t] + rate_[t] * (now - at_[t]) / 1000.0);
        at_[t] = now;
    }
}

double TokenBuckets::level(uint32_t t, double now) {
    if (t >= rate_.size()) return 0;
    refill(t, now);
    return level_[t];
}

void TokenBuckets::take(uint32_t t, double tokens, double now) {
    if (t >= rate_.size()) return;
    refill(t, now);
    level_[t] -= tokens;  // may go below zero: a request larger than the bucket leaves a debt
}

double TokenBuckets::ready_at(uint32_t t, double tokens, double now) {
    if (t >= rate_.size() || !(rate_[t] > 0)) return now;
    refill(t, now);
    const double want = std::min(tokens, depth_[t]);
    if (level_[t] >= want) return now;
    return now + (want - level_[t]) / rate_[t] * 1000.0;
}

// ---- wait queue ----

void WaitQueue::configure(QueuePolicy p, const std::vector<double>& weights, double quantum,
                          TokenBuckets* buckets) {
    policy_ = p;
    weight_ = weights;
    q_.assign(weight_.size(), {});
    deficit_.assign(weight_.size(), 0);
    quantum_ = quantum > 0 ? quantum : 1;
    buckets_ = buckets;
}

std::deque<WaitQueue::Entry>& WaitQueue::tenant_queue(uint32_t t) {
    if (t >= q_.size()) {
        q_.resize(t + 1);
        weight_.resize(t + 1, 1.0);
        deficit_.resize(t + 1, 0);
    }
    return q_[t];
}

void WaitQueue::push_back(uint32_t req, uint32_t tenant, double cost) {
    tenant_queue(tenant).push_back({req, tenant, cost, back_seq_++});
    ++size_;
}

void WaitQueue::push_front(uint32_t req, uint32_t tenant) {
    tenant_queue(tenant).push_front({req, tenant, 0, --front_seq_});
    ++size_;
}

bool WaitQueue::pick(double now, Entry* out, double* next, const std::function<bool(uint32_t)>& allowed) {
    *next = -1;
    if (size_ == 0) return false;
    const uint32_t n = uint32_t(q_.size());
    auto ok = [&](uint32_t t) { return !q_[t].empty() && (!allowed || allowed(t)); };
    auto pop = [&](uint32_t t) {
        *out = q_[t].front();
        q_[t].pop_front();
        --size_;
        return true;
    };
    if (policy_ == QueuePolicy::drr) {
        bool any = false;
        for (uint32_t t = 0; t < n; ++t) any |= ok(t);
        if (!any) return false;
        for (;;) {
            const uint32_t t = cur_;
            if (!ok(t)) {
                // An empty queue loses its deficit; a tenant held back by its quota keeps it.
                if (q_[t].empty()) deficit_[t] = 0;
                cur_ = (cur_ + 1) % n;
                fresh_ = true;
                continue;
            }
            if (fresh_) {
                deficit_[t] += quantum_ * weight_[t];
                fresh_ = false;
            }
            if (deficit_[t] >= q_[t].front().cost) {
                deficit_[t] -= q_[t].front().cost;
                return pop(t);
            }
            cur_ = (cur_ + 1) % n;
            fresh_ = true;
        }
    }
    const bool buckets = policy_ == QueuePolicy::token_bucket && buckets_ && buckets_->active();
    int best = -1;
    double soonest = -1;
    for (uint32_t t = 0; t < n; ++t) {
        if (!ok(t)) continue;
        const Entry& e = q_[t].front();
        if (buckets) {
            const double at = buckets_->ready_at(t, e.cost, now);
            if (at > now) {
                soonest = soonest < 0 ? at : std::min(soonest, at);
                continue;
            }
        }
        if (best < 0 || e.seq < q_[uint32_t(best)].front().seq) best = int(t);
    }
    if (best < 0) {
        *next = soonest;
        return false;
    }
    if (buckets) buckets_->take(uint32_t(best), q_[uint32_t(best)].front().cost, now);
    return pop(uint32_t(best));
}

void WaitQueue::unpick(const Entry& e, double now) {
    if (policy_ == QueuePolicy::drr) {
        deficit_[e.tenant] += e.cost;
    } else if (policy_ == QueuePolicy::token_bucket && buckets_) {
        buckets_->take(e.tenant, -e.cost, now);
    }
    tenant_queue(e.tenant).push_front(e);
    ++size_;
}

std::vector<WaitQueue::Entry> WaitQueue::take_all() {
    std::vector<Entry> all;
    for (auto& q : q_) {
        all.insert(all.end(), q.begin(), q.end());
        q.clear();
    }
    std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.seq < b.seq; });
    std::fill(deficit_.begin(), deficit_.end(), 0.0);
    size_ = 0;
    return all;
}

}  // namespace k3
