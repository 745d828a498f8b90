// Wall-clock time for timings and run budgets. Never used for anything that must be reproducible.
#pragma once

#include <chrono>

namespace k3 {

inline double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// A point in time that work slices check ("keep going until the deadline").
class Deadline {
  public:
    explicit Deadline(double budget_ms) : end_(now_ms() + budget_ms) {}
    bool passed() const { return now_ms() >= end_; }

  private:
    double end_;
};

class Stopwatch {
  public:
    Stopwatch() : t0_(now_ms()) {}
    double ms() const { return now_ms() - t0_; }
    void restart() { t0_ = now_ms(); }

  private:
    double t0_;
};

}  // namespace k3
