// The waiting requests of one instance and the order it admits them in (module 12's mechanisms):
//   fcfs          earliest queued first (requests put back after a preemption go first)
//   token_bucket  per-tenant buckets, shared by the whole fleet, refilled at the tenant's share of a
//                 fleet-wide rate of uncached tokens: a tenant's request waits until its bucket holds
//                 its cost (or the bucket is full, for requests larger than the bucket); among those
//                 that may go, the earliest. Not work conserving: an idle instance waits.
//   drr           deficit round robin over tenants (Shreedhar & Varghese 1996) with cost = uncached
//                 prompt tokens, as NVIDIA Dynamo's router queue; the quantum scales with the weight.
// Costs are the uncached tokens the router saw (prompt minus the state-usable match); a request put
// back after a preemption or a failed admission costs nothing again.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "core/fleet/fleet_config.h"

namespace k3 {

// Fleet-wide token buckets (one per tenant).
class TokenBuckets {
  public:
    void configure(const std::vector<double>& rates_per_s, double burst_s);
    // Refills to `now` (ms); the level of tenant t.
    double level(uint32_t t, double now);
    void take(uint32_t t, double tokens, double now);
    // When the bucket of t will hold `tokens` (capped at its depth), >= now.
    double ready_at(uint32_t t, double tokens, double now);
    double depth(uint32_t t) const { return t < depth_.size() ? depth_[t] : 0; }
    bool active() const { return !rate_.empty(); }

  private:
    void refill(uint32_t t, double now);
    std::vector<double> rate_, depth_, level_, at_;
};

class WaitQueue {
  public:
    struct Entry {
        uint32_t req = 0;
        uint32_t tenant = 0;
        double cost = 0;
        int64_t seq = 0;  // FCFS order; requests put back at the front get smaller numbers
    };

    void configure(QueuePolicy p, const std::vector<double>& weights, double quantum, TokenBuckets* buckets);
    void push_back(uint32_t req, uint32_t tenant, double cost);
    void push_front(uint32_t req, uint32_t tenant);
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    // The next request to admit at `now`, among tenants `allowed` accepts (all if empty); false if
    // none may go now, with the time one may in *next (token buckets; negative if not known).
    bool pick(double now, Entry* out, double* next, const std::function<bool(uint32_t)>& allowed = {});
    // Puts a picked request back where it was (admission failed) and refunds its cost.
    void unpick(const Entry& e, double now);
    // Removes and returns every waiting request, in FCFS order.
    std::vector<Entry> take_all();
    // f(request) for every waiting request (no order promised).
    template <class F>
    void for_each(F f) const {
        for (const auto& q : q_)
            for (const Entry& e : q) f(e.req);
    }

  private:
    std::deque<Entry>& tenant_queue(uint32_t t);
    QueuePolicy policy_ = QueuePolicy::fcfs;
    std::vector<std::deque<Entry>> q_;
    std::vector<double> weight_, deficit_;
    double quantum_ = 8192;
    uint32_t cur_ = 0;
    bool fresh_ = true;  // DRR: the current tenant has not received its quantum on this visit
    TokenBuckets* buckets_ = nullptr;
    int64_t back_seq_ = 0, front_seq_ = 0;
    size_t size_ = 0;
};

}  // namespace k3
