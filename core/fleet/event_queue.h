// The event queue of the fleet simulation: a binary min-heap ordered by (time, insertion number).
// Two events at the same simulated time come out in the order they were pushed, so a run depends
// only on its inputs, never on heap internals or the standard library (std::priority_queue is not
// stable, and libstdc++ and libc++ may order equal keys differently).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace k3 {

struct FleetEvent {
    double t = 0;       // simulated time, ms
    uint64_t seq = 0;   // insertion number: the tie-break
    uint32_t kind = 0;  // what happens (the simulator's enum)
    uint32_t a = 0;     // e.g. instance
    uint64_t b = 0;     // e.g. epoch or request
};

class EventQueue {
  public:
    void push(double t, uint32_t kind, uint32_t a = 0, uint64_t b = 0) {
        heap_.push_back({t, next_seq_++, kind, a, b});
        sift_up(heap_.size() - 1);
    }
    bool empty() const { return heap_.empty(); }
    size_t size() const { return heap_.size(); }
    const FleetEvent& top() const { return heap_.front(); }
    FleetEvent pop() {
        FleetEvent e = heap_.front();
        heap_.front() = heap_.back();
        heap_.pop_back();
        if (!heap_.empty()) sift_down(0);
        return e;
    }

  private:
    static bool before(const FleetEvent& x, const FleetEvent& y) {
        return x.t < y.t || (x.t == y.t && x.seq < y.seq);
    }
    void sift_up(size_t i) {
        while (i > 0) {
            const size_t p = (i - 1) / 2;
            if (!before(heap_[i], heap_[p])) break;
            std::swap(heap_[i], heap_[p]);
            i = p;
        }
    }
    void sift_down(size_t i) {
        const size_t n = heap_.size();
        for (;;) {
            size_t m = i;
            const size_t l = 2 * i + 1, r = l + 1;
            if (l < n && before(heap_[l], heap_[m])) m = l;
            if (r < n && before(heap_[r], heap_[m])) m = r;
            if (m == i) break;
            std::swap(heap_[i], heap_[m]);
            i = m;
        }
    }
    std::vector<FleetEvent> heap_;
    uint64_t next_seq_ = 0;
};

}  // namespace k3
