// A chart's data: lines, steps, points and grouped bars, a baseline run's dashed (or hollow) beneath
// the current run's; and the hover read-out with both runs' values.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "ui/plot_chart.h"
#include "ui/theme.h"

namespace k3::ui::plot {

namespace {

constexpr float kDash = 6, kGap = 4;  // the baseline's dashes, in layout pixels

ImVec2 to_screen(ScreenPoint p) { return ImVec2(float(p.x), float(p.y)); }

// The plot area and a margin that the clip rectangle hides: lines cut there show no cut ends.
void clip_box(const Chart& c, ScreenPoint& lo, ScreenPoint& hi) {
    const float m = theme().px(4);
    lo = {c.a0.x - m, c.a0.y - m};
    hi = {c.a1.x + m, c.a1.y + m};
}

bool inside(const Chart& c, ScreenPoint p) {
    return p.x >= c.a0.x && p.x <= c.a1.x && p.y >= c.a0.y && p.y <= c.a1.y;
}

// Vertices of one series into polylines on the plot area: each segment clipped to it (a zoomed-in
// view draws only what shows, from vertices placed exactly), runs thinned to one vertex per half
// pixel (thousands of points over a few hundred pixels), drawn solid or dashed. A point alone
// between points that cannot be drawn shows as a dot.
class Polyline {
  public:
    Polyline(const Chart& c, ImU32 col, bool dashed) : c_(c), col_(col), dashed_(dashed) {
        clip_box(c, lo_, hi_);
    }
    void add(ScreenPoint p);
    void end();  // the run ends: a point that cannot be drawn, or the series' last
    bool started() const { return run_ > 0; }
    ScreenPoint last() const { return last_; }

  private:
    bool in_box(ScreenPoint p) const;
    void push(ImVec2 q);
    void flush();
    void dot(ScreenPoint p) const;

    const Chart& c_;
    ImU32 col_;
    bool dashed_;
    ScreenPoint lo_, hi_;  // the clip box
    std::vector<ImVec2> pts_, dash_;
    ScreenPoint last_;
    int run_ = 0;     // vertices added since the run began
    ImVec2 skipped_;  // the last vertex thinned out (drawn if the run ends there)
    bool has_skipped_ = false;
};

bool Polyline::in_box(ScreenPoint p) const {
    return p.x >= lo_.x && p.x <= hi_.x && p.y >= lo_.y && p.y <= hi_.y;
}

void Polyline::add(ScreenPoint p) {
    if (run_++ > 0) {
        ScreenPoint a = last_, b = p;
        if (!(in_box(a) && in_box(b)) && !clip_segment(a, b, lo_, hi_)) {
            flush();
        } else {
            if (!(a == last_)) flush();  // it enters the box somewhere else than the run left it
            if (pts_.empty()) pts_.push_back(to_screen(a));
            push(to_screen(b));
            if (!(b == p)) flush();  // it leaves the box
        }
    }
    last_ = p;
}

void Polyline::push(ImVec2 q) {
    const ImVec2 k = pts_.back();
    if ((q.x - k.x) * (q.x - k.x) + (q.y - k.y) * (q.y - k.y) < 0.25f) {
        skipped_ = q;
        has_skipped_ = true;
        return;
    }
    pts_.push_back(q);
    has_skipped_ = false;
}

void Polyline::flush() {
    if (has_skipped_) pts_.push_back(skipped_);
    has_skipped_ = false;
    const Theme& t = theme();
    const float thick = t.px(dashed_ ? 1.5f : 2.0f);
    if (pts_.size() >= 2 && dashed_)
        for_each_dash(
            pts_.data(), pts_.size(), t.px(kDash), t.px(kGap), dash_,
            [&](const ImVec2* d, size_t n) { c_.dl->AddPolyline(d, int(n), col_, ImDrawFlags_None, thick); });
    else if (pts_.size() >= 2)
        c_.dl->AddPolyline(pts_.data(), int(pts_.size()), col_, ImDrawFlags_None, thick);
    pts_.clear();
}

void Polyline::dot(ScreenPoint p) const {
    if (!inside(c_, p)) return;
    const Theme& t = theme();
    if (dashed_)
        c_.dl->AddCircle(to_screen(p), t.px(3), col_, 0, t.px(1.5f));
    else
        c_.dl->AddCircleFilled(to_screen(p), t.px(3), col_);
}

void Polyline::end() {
    if (run_ == 1) dot(last_);
    flush();
    run_ = 0;
}

// A named point's name beside it (a roofline's kernels), in the series' colour: right of the point, or
// left of it for every other legend entry, so that two series' points at one place keep both names
// legible; flipped where it would leave the plot area.
void point_label(const Chart& c, const ScreenPoint& p, const std::string& name, ImU32 col, bool left) {
    const Theme& t = theme();
    const ImVec2 ts = ImGui::CalcTextSize(name.c_str());
    const float right_x = p.x + t.px(7), left_x = p.x - t.px(7) - ts.x;
    float x = left ? left_x : right_x;
    if (x + ts.x > c.a1.x) x = left_x;
    if (x < c.a0.x) x = right_x;
    c.dl->AddText(ImVec2(x, p.y - ts.y * 0.5f), col, name.c_str());
}

// A line, steps, or points, broken where a point cannot be drawn.
void draw_line(const Chart& c, const Line& l, ImU32 col) {
    const Series& s = *l.s;
    Polyline line(c, col, l.baseline);
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!c.drawable(s, i)) {
            line.end();
            continue;
        }
        const ScreenPoint p = c.at(c.x_of(s, i), s.y[i]);
        if (s.style == SeriesStyle::points) {
            line.add(p);
            line.end();
            if (!l.baseline && !c.categorical && i < s.x_names.size())
                point_label(c, p, s.x_names[i], col, l.entry % 2 == 1);
            continue;
        }
        if (s.style == SeriesStyle::step && line.started()) line.add({p.x, line.last().y});
        line.add(p);
    }
    line.end();
}

// A rectangle's outline in dashes (a baseline's bar).
void dashed_rect(ImDrawList* dl, ImVec2 r0, ImVec2 r1, ImU32 col) {
    const Theme& t = theme();
    const ImVec2 corners[5] = {r0, ImVec2(r1.x, r0.y), r1, ImVec2(r0.x, r1.y), r0};
    std::vector<ImVec2> scratch;
    for_each_dash(corners, 5, t.px(kDash), t.px(kGap), scratch, [&](const ImVec2* d, size_t n) {
        dl->AddPolyline(d, int(n), col, ImDrawFlags_None, t.px(1.5f));
    });
}

// Bars of one series in its slot of each category; a baseline's as dashed outlines over the current
// run's bars of the same name.
void draw_bars(const Chart& c, const Line& l, int slot, int slots, ImU32 col) {
    const Theme& t = theme();
    const double width = c.at(1, 0).x - c.at(0, 0).x;
    const double bw = width * 0.7 / double(slots);
    const double base = c.ay.log ? c.ay.lo : 0.0;
    ScreenPoint lo, hi;
    clip_box(c, lo, hi);
    const Series& s = *l.s;
    for (size_t i = 0; i < s.y.size(); ++i) {
        if (!c.ay.valid(s.y[i])) continue;
        const double x0 = c.at(double(i), base).x - width * 0.35 + bw * slot;
        const double y0 = std::min(c.at(0, s.y[i]).y, c.at(0, base).y);
        const double y1 = std::max(c.at(0, s.y[i]).y, c.at(0, base).y);
        const ImVec2 r0(float(std::clamp(x0 + t.px(1), lo.x, hi.x)), float(std::clamp(y0, lo.y, hi.y)));
        const ImVec2 r1(float(std::clamp(x0 + bw - t.px(1), lo.x, hi.x)), float(std::clamp(y1, lo.y, hi.y)));
        if (r1.x <= r0.x || r1.y < r0.y) continue;
        if (l.baseline)
            dashed_rect(c.dl, r0, r1, col);
        else
            c.dl->AddRectFilled(r0, r1, col, t.px(2));
    }
}

}  // namespace

void draw_series(const Chart& c) {
    // Bars share each category's width among the shown legend entries.
    std::vector<int> slot(c.entries.size(), 0);
    int slots = 0;
    for (size_t e = 0; e < c.entries.size(); ++e)
        if (!c.entries[e].hidden) slot[e] = slots++;
    for (const Line& l : c.lines) {
        if (!c.shown(l)) continue;
        const ImU32 col = series_color(c.entries[size_t(l.entry)].color);
        if (c.bars)
            draw_bars(c, l, slot[size_t(l.entry)], std::max(slots, 1), col);
        else
            draw_line(c, l, col);
    }
}

void draw_line_sample(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, bool dashed) {
    const Theme& t = theme();
    if (!dashed) {
        dl->AddLine(a, b, col, t.px(2));
        return;
    }
    const ImVec2 ends[2] = {a, b};
    std::vector<ImVec2> scratch;
    for_each_dash(ends, 2, t.px(kDash) * 0.75f, t.px(kGap) * 0.75f, scratch, [&](const ImVec2* d, size_t n) {
        dl->AddPolyline(d, int(n), col, ImDrawFlags_None, t.px(1.5f));
    });
}

// ---- hover read-out -----------------------------------------------------------------------------

namespace {

// The index of the drawable point of s nearest to screen x mx among those on the plot area, or -1.
int nearest_point(const Chart& c, const Series& s, float mx) {
    int best = -1;
    double bd = 1e300;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!c.drawable(s, i)) continue;
        const ScreenPoint p = c.at(c.x_of(s, i), s.y[i]);
        if (p.x < c.a0.x - 1 || p.x > c.a1.x + 1) continue;
        const double d = std::fabs(p.x - mx);
        if (d < bd) bd = d, best = int(i);
    }
    return best;
}

// A point of a line under the mouse: which line and which index.
struct Reading {
    const Line* line = nullptr;
    size_t i = 0;
    double x() const { return line->s->x.size() > i ? line->s->x[i] : double(i); }
    double y() const { return line->s->y[i]; }
};

// Per legend entry, the current run's and the baseline's points nearest to the mouse.
void read_points(const Chart& c, float mx, std::vector<Reading>& now, std::vector<Reading>& base) {
    now.assign(c.entries.size(), {});
    base.assign(c.entries.size(), {});
    for (const Line& l : c.lines) {
        Reading& r = (l.baseline ? base : now)[size_t(l.entry)];
        if (!c.shown(l) || r.line) continue;
        const int i = nearest_point(c, *l.s, mx);
        if (i >= 0) r = {&l, size_t(i)};
    }
}

void marker(const Chart& c, const Reading& r, ImU32 col) {
    if (!r.line || c.bars) return;
    const Theme& t = theme();
    const ImVec2 p = to_screen(c.at(c.x_of(*r.line->s, r.i), r.y()));
    if (r.line->baseline)
        c.dl->AddCircle(p, t.px(4), col, 0, t.px(1.5f));
    else
        c.dl->AddCircleFilled(p, t.px(4), col);
}

std::string x_text(const Chart& c, const Reading& r) {
    const Series& s = *r.line->s;
    if (r.i < s.x_names.size()) return s.x_names[r.i];  // a category, or a named point
    return format_with_unit(r.x(), c.s0.x_unit);
}

void swatch(const Entry& e) {
    const Theme& t = theme();
    ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(series_color(e.color)),
                       ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoBorder,
                       ImVec2(t.px(10), t.px(10)));
    ImGui::SameLine();
}

// With a baseline: a table of name, current value, baseline value (at its own x when that differs)
// and the change.
void baseline_table(const Chart& c, const std::vector<Reading>& now, const std::vector<Reading>& base) {
    if (!ImGui::BeginTable("readout", 4, ImGuiTableFlags_SizingFixedFit)) return;
    const ImVec4 dim = ImGui::ColorConvertU32ToFloat4(theme().text_dim);
    for (const char* h : {"", "current", "baseline", "change"}) {
        ImGui::TableNextColumn();
        ImGui::TextColored(dim, "%s", h);
    }
    for (size_t e = 0; e < c.entries.size(); ++e) {
        const Reading &n = now[e], &b = base[e];
        if (!n.line && !b.line) continue;
        const std::string& unit = (n.line ? n.line : b.line)->s->y_unit;
        ImGui::TableNextColumn();
        swatch(c.entries[e]);
        ImGui::TextUnformatted(c.entries[e].name->c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(n.line ? format_with_unit(n.y(), unit).c_str() : "-");
        ImGui::TableNextColumn();
        const bool same_x = n.line && b.line && n.x() == b.x();
        std::string bs = b.line ? format_with_unit(b.y(), unit) : "-";
        if (b.line && n.line && !same_x) bs += " at " + x_text(c, b);
        ImGui::TextUnformatted(bs.c_str());
        ImGui::TableNextColumn();
        if (same_x && b.y() != 0)
            ImGui::Text("%+.2f%%", (n.y() - b.y()) / std::fabs(b.y()) * 100);
        else
            ImGui::TextColored(dim, "-");
    }
    ImGui::EndTable();
}

}  // namespace

void draw_hover(const Chart& c, ImVec2 m) {
    const Theme& t = theme();
    const double fx = (m.x - c.a0.x) / (c.a1.x - c.a0.x);
    const float lx = c.categorical ? c.sx(std::round(c.ax.unmap(fx))) : m.x;
    c.dl->AddLine(ImVec2(lx, c.a0.y), ImVec2(lx, c.a1.y), t.axis);
    std::vector<Reading> now, base;
    read_points(c, lx, now, base);
    const Reading* first = nullptr;
    c.dl->PushClipRect(ImVec2(c.a0.x - t.px(4), c.a0.y - t.px(4)), ImVec2(c.a1.x + t.px(4), c.a1.y + t.px(4)),
                       true);
    for (size_t e = 0; e < c.entries.size(); ++e) {
        marker(c, base[e], series_color(c.entries[e].color));
        marker(c, now[e], series_color(c.entries[e].color));
        if (!first) first = now[e].line ? &now[e] : base[e].line ? &base[e] : nullptr;
    }
    c.dl->PopClipRect();
    if (!first) return;
    ImGui::BeginTooltip();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(t.text_dim), "%s: %s", c.s0.x_label.c_str(),
                       x_text(c, *first).c_str());
    if (c.has_baseline) {
        baseline_table(c, now, base);
    } else {
        for (size_t e = 0; e < c.entries.size(); ++e) {
            if (!now[e].line) continue;
            swatch(c.entries[e]);
            ImGui::Text("%s  %s", c.entries[e].name->c_str(),
                        format_with_unit(now[e].y(), now[e].line->s->y_unit).c_str());
        }
    }
    ImGui::EndTooltip();
}

}  // namespace k3::ui::plot
