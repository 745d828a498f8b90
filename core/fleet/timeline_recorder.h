// Per-instance timelines of a fleet run, kept small: consecutive spans of the same category on a
// lane merge as they are recorded, and at the end the whole timeline is cut to at most a budget of
// spans by binning time and keeping, per lane and bin, the category that filled most of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3 {

struct TimelineSpan {
    uint32_t lane = 0;
    double start_s = 0, end_s = 0;
    int category = 0;
};

class TimelineRecorder {
  public:
    void reset(uint32_t lanes) {
        open_.assign(lanes, {});
        spans_.clear();
    }
    // A span [start, end) (ms) of `category` on `lane`; merges with the lane's previous span when
    // it has the same category and the gap is at most merge_gap_ms.
    void add(uint32_t lane, double start, double end, int category, double merge_gap_ms = 0);
    // Closes open spans; returns at most max_spans spans in seconds, lane-major, by start time.
    std::vector<TimelineSpan> finish(uint32_t max_spans);
    size_t recorded() const { return spans_.size(); }

  private:
    struct Raw {
        uint32_t lane;
        double start, end;
        int category;
    };
    std::vector<Raw> open_;  // one per lane: category < 0 = none
    std::vector<Raw> spans_;
};

}  // namespace k3
