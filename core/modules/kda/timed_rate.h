// Module 1 `kda`: a rate measured in calls a run can stop between (the page runs modules in
// time-boxed slices). Shared by the kernels, the device probes and the runnable model.
#pragma once

#include <algorithm>
#include <functional>

#include "core/base/clock.h"

namespace k3 {

// Calls `fn` (which returns the work it did: head-tokens, flop or bytes) once untimed (caches; in
// WebAssembly the engine tiers the code up), then timed at least three times and until `ms` of timed
// calls have passed; the rate is the best of the timed calls per second (the best, because a shared
// machine only ever slows a call down). One call per advance() at most after the deadline: a run can
// stop between calls.
struct TimedRate {
    std::function<double()> fn;
    double best = 0, timed_ms = 0;
    int calls = 0;

    bool advance(const Deadline& dl, double ms) {
        while (true) {
            const Stopwatch sw;
            const double work = fn();
            const double t = sw.ms();
            if (calls++ > 0) {
                timed_ms += t;
                if (t > 0) best = std::max(best, work / (t * 1e-3));
                if (timed_ms >= ms && calls > 3) return true;
            }
            if (dl.passed()) return false;
        }
    }
};

}  // namespace k3
