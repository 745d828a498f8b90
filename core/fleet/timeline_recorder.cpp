#include "core/fleet/timeline_recorder.h"

#include <algorithm>

namespace k3 {

void TimelineRecorder::add(uint32_t lane, double start, double end, int category, double merge_gap_ms) {
    if (lane >= open_.size() || !(end > start)) return;
    Raw& o = open_[lane];
    if (o.end > o.start && o.category == category && start - o.end <= merge_gap_ms) {
        o.end = std::max(o.end, end);
        return;
    }
    if (o.end > o.start) spans_.push_back(o);
    o = {lane, start, end, category};
}

std::vector<TimelineSpan> TimelineRecorder::finish(uint32_t max_spans) {
    for (Raw& o : open_)
        if (o.end > o.start) {
            spans_.push_back(o);
            o = {};
        }
    std::stable_sort(spans_.begin(), spans_.end(), [](const Raw& a, const Raw& b) {
        return a.lane < b.lane || (a.lane == b.lane && a.start < b.start);
    });
    std::vector<Raw> out;
    const uint32_t lanes = uint32_t(open_.size());
    if (spans_.size() <= max_spans || lanes == 0) {
        out = spans_;
    } else {
        // Bin time so that lanes x bins <= max_spans; per lane and bin, the category with the most time.
        double t0 = spans_.front().start, t1 = spans_.front().end;
        int cats = 0;
        for (const Raw& s : spans_) {
            t0 = std::min(t0, s.start);
            t1 = std::max(t1, s.end);
            cats = std::max(cats, s.category + 1);
        }
        const uint32_t bins = std::max<uint32_t>(1, max_spans / lanes);
        const double w = (t1 - t0) / double(bins);
        std::vector<double> fill(size_t(lanes) * bins * size_t(cats), 0.0);
        for (const Raw& s : spans_) {
            uint32_t b = uint32_t((s.start - t0) / w);
            for (; b < bins; ++b) {
                const double lo = t0 + w * double(b), hi = b + 1 == bins ? t1 : t0 + w * double(b + 1);
                if (lo >= s.end) break;
                const double o = std::min(hi, s.end) - std::max(lo, s.start);
                if (o > 0) fill[(size_t(s.lane) * bins + b) * size_t(cats) + size_t(s.category)] += o;
            }
        }
        for (uint32_t l = 0; l < lanes; ++l)
            for (uint32_t b = 0; b < bins; ++b) {
                int best = -1;
                double most = 0, busy = 0;
                for (int c = 0; c < cats; ++c) {
                    const double f = fill[(size_t(l) * bins + b) * size_t(cats) + size_t(c)];
                    busy += f;
                    if (f > most) most = f, best = c;
                }
                const double lo = t0 + w * double(b), hi = b + 1 == bins ? t1 : t0 + w * double(b + 1);
                // A bin that was mostly idle stays empty, so the view keeps showing utilisation.
                if (best < 0 || most < (hi - lo) - busy) continue;
                if (!out.empty() && out.back().lane == l && out.back().category == best &&
                    out.back().end == lo)
                    out.back().end = hi;
                else
                    out.push_back({l, lo, hi, best});
            }
    }
    std::vector<TimelineSpan> spans;
    spans.reserve(out.size());
    for (const Raw& s : out) spans.push_back({s.lane, s.start / 1000.0, s.end / 1000.0, s.category});
    return spans;
}

}  // namespace k3
