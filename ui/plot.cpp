#include "ui/plot.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/base/numfmt.h"
#include "ui/theme.h"

namespace k3::ui {

// ---- ticks and labels -----------------------------------------------------------------------------

static std::string trim_zeros(std::string s) {
    if (s.find('.') == std::string::npos) return s;
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

static std::string short_num(double v) {
    if (v == 0) return "0";
    const double a = std::fabs(v);
    if (a >= 1e15 || a < 1e-4) {
        char b[32];
        std::snprintf(b, sizeof b, "%.2g", v);
        return b;
    }
    static const struct {
        double f;
        const char* s;
    } si[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    for (const auto& x : si)
        if (a >= x.f) return trim_zeros(format_sig(v / x.f, 3)) + x.s;
    return trim_zeros(format_sig(v, 3));
}

std::string format_tick(double v, const std::string& unit) {
    if (unit == "B") {
        static const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double a = std::fabs(v);
        int i = 0;
        while (a >= 1024 && i < 5) a /= 1024, ++i;
        return (v < 0 ? "-" : "") + trim_zeros(format_sig(a, 3)) + " " + u[i];
    }
    if (unit == "fraction") return trim_zeros(format_sig(v * 100, 3)) + "%";
    return short_num(v);
}

static double nice_step(double raw) {
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool log_scale, bool binary) {
    std::vector<double> t;
    if (!(hi > lo) || target < 1) return t;
    if (log_scale && binary) {
        const int e0 = int(std::ceil(std::log2(lo) - 1e-9)), e1 = int(std::floor(std::log2(hi) + 1e-9));
        int step = 1;
        for (int s : {1, 2, 5, 10, 20, 30, 40, 50})
            if ((e1 - e0) / s + 1 <= target) {
                step = s;
                break;
            } else {
                step = s;
            }
        // Prefer whole binary units (multiples of 10 in the exponent) when stepping by 10s.
        const int start = step % 10 == 0 ? int(std::ceil(e0 / 10.0)) * 10 : e0;
        for (int e = start; e <= e1; e += step) t.push_back(std::ldexp(1.0, e));
        if (t.size() >= 2) return t;
        return nice_ticks(lo, hi, target, false, true);
    }
    if (log_scale) {
        const int d0 = int(std::floor(std::log10(lo))), d1 = int(std::ceil(std::log10(hi)));
        const int decades = std::max(1, d1 - d0);
        const int every = std::max(1, (decades + target - 1) / target);
        for (int d = d0; d <= d1; ++d) {
            if ((d - d0) % every) continue;
            const double base = std::pow(10.0, d);
            if (base >= lo * (1 - 1e-9) && base <= hi * (1 + 1e-9)) t.push_back(base);
            if (decades <= 2)
                for (double m : {2.0, 5.0})
                    if (base * m >= lo && base * m <= hi) t.push_back(base * m);
        }
        std::sort(t.begin(), t.end());
        if (t.size() < 2) {  // less than a decade: fall back to linear steps
            return nice_ticks(lo, hi, target, false);
        }
        return t;
    }
    double step = nice_step((hi - lo) / target);
    if (binary) {
        // Linear bytes: nice steps in the binary unit that fits the range (128 MiB, 512 MiB, 1 GiB...).
        double unit = 1;
        while (unit * 1024 <= (hi - lo) / target * 4 && unit < 1125899906842624.0) unit *= 1024;
        step = nice_step((hi - lo) / target / unit) * unit;
        const double p2 = std::ldexp(1.0, int(std::round(std::log2(step / unit)))) * unit;
        if (p2 >= step * 0.6 && p2 <= step * 1.6) step = p2;  // prefer powers of two: 256 MiB over 200 MiB
    }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
        t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
    return t;
}

// ---- chart ------------------------------------------------------------------------------------------

namespace {

struct Axis {
    double lo = 0, hi = 1;
    bool log = false;
    double map(double v) const {  // to [0, 1]
        if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
        return (v - lo) / (hi - lo);
    }
    double unmap(double f) const {
        if (log) return std::pow(10.0, std::log10(lo) + f * (std::log10(hi) - std::log10(lo)));
        return lo + f * (hi - lo);
    }
    bool valid(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

void fit_axis(Axis& a, double lo, double hi, bool include_zero) {
    if (!(lo <= hi)) lo = hi = a.log ? 1 : 0;
    if (include_zero && !a.log) {
        lo = std::min(lo, 0.0);
        hi = std::max(hi, 0.0);
    }
    if (a.log) {
        if (hi <= lo) lo /= 2, hi *= 2;
        a.lo = lo;
        a.hi = hi;
        return;
    }
    if (hi <= lo) {
        const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
        lo -= d;
        hi += d;
    }
    const double pad = (hi - lo) * 0.04;
    a.lo = (include_zero && lo == 0) ? 0 : lo - pad;
    a.hi = hi + pad;
}

}  // namespace

namespace {

// One chart being drawn: its series, axes and plot area (a0 top left, a1 bottom right).
struct Chart {
    const std::vector<const Series*>& series;
    const Series& s0;  // the first series: style, units and labels of the chart
    bool bars, categorical;
    Axis ax, ay;
    size_t ncat = 0;  // categories (bars, named x values)
    ImDrawList* dl;
    ImVec2 a0, a1;

    float sx(double v) const { return a0.x + float(ax.map(v)) * (a1.x - a0.x); }
    float sy(double v) const { return a1.y - float(ay.map(v)) * (a1.y - a0.y); }
    double x_of(const Series& s, size_t i) const { return categorical ? double(i) : s.x[i]; }
    bool drawable(const Series& s, size_t i) const { return ax.valid(x_of(s, i)) && ay.valid(s.y[i]); }
};

// Legend entries flowing left to right from y, wrapping at the frame; returns the y below them.
float draw_legend(ImDrawList* dl, const std::vector<const Series*>& series, ImVec2 p0, ImVec2 p1, float y) {
    const Theme& t = theme();
    const float lh = ImGui::GetTextLineHeight();
    float lx = p0.x + t.px(12);
    for (size_t i = 0; i < series.size(); ++i) {
        const float tw = ImGui::CalcTextSize(series[i]->name.c_str()).x + t.px(26);
        if (lx + tw > p1.x - t.px(8) && lx > p0.x + t.px(12)) {
            lx = p0.x + t.px(12);
            y += lh + t.px(2);
        }
        const ImU32 c = series_color(int(i));
        dl->AddRectFilled(ImVec2(lx, y + lh * 0.5f - t.px(2)), ImVec2(lx + t.px(14), y + lh * 0.5f + t.px(2)),
                          c, t.px(2));
        dl->AddText(ImVec2(lx + t.px(18), y), t.text_dim, series[i]->name.c_str());
        lx += tw;
    }
    return y + lh + t.px(6);
}

// The axes' ranges from the data (every valid point of every series).
void fit_axes(Chart& c) {
    c.ax.log = c.s0.log_x && !c.categorical;
    c.ay.log = c.s0.log_y;
    double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
    for (const Series* s : c.series) {
        c.ncat = std::max(c.ncat, s->y.size());
        for (size_t i = 0; i < s->x.size() && i < s->y.size(); ++i) {
            if (!c.ax.valid(s->x[i]) || !c.ay.valid(s->y[i])) continue;
            xlo = std::min(xlo, s->x[i]), xhi = std::max(xhi, s->x[i]);
            ylo = std::min(ylo, s->y[i]), yhi = std::max(yhi, s->y[i]);
        }
    }
    if (c.categorical) {
        c.ax.lo = -0.5;
        c.ax.hi = double(c.ncat) - 0.5;
    } else {
        fit_axis(c.ax, xlo, xhi, false);
        if (!c.ax.log) c.ax.lo = xlo <= xhi ? xlo : c.ax.lo, c.ax.hi = xlo < xhi ? xhi : c.ax.hi;
    }
    fit_axis(c.ay, ylo, yhi, c.bars);
}

void draw_y_grid(const Chart& c, const std::vector<double>& ticks) {
    const Theme& t = theme();
    for (double v : ticks) {
        const float py = c.sy(v);
        if (py < c.a0.y - 1 || py > c.a1.y + 1) continue;
        c.dl->AddLine(ImVec2(c.a0.x, py), ImVec2(c.a1.x, py), t.grid);
        const std::string txt = format_tick(v, c.s0.y_unit);
        const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
        c.dl->AddText(ImVec2(c.a0.x - t.px(6) - ts.x, py - ts.y * 0.5f), t.text_dim, txt.c_str());
    }
}

void draw_x_axis(const Chart& c, float lh) {
    const Theme& t = theme();
    const std::string& xu = c.s0.x_unit;
    if (c.categorical) {
        const std::vector<std::string>& names = c.s0.x_names;
        for (size_t i = 0; i < c.ncat; ++i) {
            const std::string txt =
                i < names.size() ? names[i] : format_tick(i < c.s0.x.size() ? c.s0.x[i] : double(i), xu);
            const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
            c.dl->AddText(ImVec2(c.sx(double(i)) - ts.x * 0.5f, c.a1.y + t.px(4)), t.text_dim, txt.c_str());
        }
    } else {
        const int xtarget = std::max(2, int((c.a1.x - c.a0.x) / t.px(90)));
        for (double v : nice_ticks(c.ax.lo, c.ax.hi, xtarget, c.ax.log, xu == "B")) {
            const float px = c.sx(v);
            if (px < c.a0.x - 1 || px > c.a1.x + 1) continue;
            c.dl->AddLine(ImVec2(px, c.a0.y), ImVec2(px, c.a1.y), t.grid);
            const std::string txt = format_tick(v, xu);
            const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
            const float x = std::clamp(px - ts.x * 0.5f, c.a0.x - t.px(10), c.a1.x - ts.x + t.px(10));
            c.dl->AddText(ImVec2(x, c.a1.y + t.px(4)), t.text_dim, txt.c_str());
        }
    }
    const ImVec2 xls = ImGui::CalcTextSize(c.s0.x_label.c_str());
    c.dl->AddText(ImVec2((c.a0.x + c.a1.x - xls.x) * 0.5f, c.a1.y + lh + t.px(6)), t.text_dim,
                  c.s0.x_label.c_str());
    c.dl->AddLine(ImVec2(c.a0.x, c.a1.y), ImVec2(c.a1.x, c.a1.y), t.axis);
    c.dl->AddLine(ImVec2(c.a0.x, c.a0.y), ImVec2(c.a0.x, c.a1.y), t.axis);
}

void draw_bars(const Chart& c, const Series& s, int k) {
    const Theme& t = theme();
    const int nser = int(c.series.size());
    const float slot = (c.a1.x - c.a0.x) / float(std::max<size_t>(c.ncat, 1));
    const float bw = slot * 0.7f / float(nser);
    const double base = c.ay.log ? c.ay.lo : 0.0;
    for (size_t i = 0; i < s.y.size(); ++i) {
        if (!c.ay.valid(s.y[i])) continue;
        const float cx = c.sx(double(i)) - slot * 0.35f + bw * float(k);
        c.dl->AddRectFilled(ImVec2(cx + t.px(1), std::min(c.sy(s.y[i]), c.sy(base))),
                            ImVec2(cx + bw - t.px(1), std::max(c.sy(s.y[i]), c.sy(base))), series_color(k),
                            t.px(2));
    }
}

// A line (or points, or steps) broken where a point cannot be drawn.
void draw_line(const Chart& c, const Series& s, int k) {
    const Theme& t = theme();
    const ImU32 col = series_color(k);
    std::vector<ImVec2> pts;
    auto flush = [&] {
        if (s.style == SeriesStyle::points || pts.size() == 1)
            for (const auto& p : pts) c.dl->AddCircleFilled(p, t.px(3), col);
        else if (pts.size() > 1)
            c.dl->AddPolyline(pts.data(), int(pts.size()), col, ImDrawFlags_None, t.px(2.0f));
        pts.clear();
    };
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!c.drawable(s, i)) {
            flush();
            continue;
        }
        const ImVec2 p(c.sx(c.x_of(s, i)), c.sy(s.y[i]));
        if (s.style == SeriesStyle::step && !pts.empty()) pts.push_back(ImVec2(p.x, pts.back().y));
        pts.push_back(p);
    }
    flush();
}

// The index of s's drawable point nearest to screen x mx, or -1.
int nearest_point(const Chart& c, const Series& s, float mx) {
    int best = -1;
    float bd = 1e30f;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!c.drawable(s, i)) continue;
        const float d = std::fabs(c.sx(c.x_of(s, i)) - mx);
        if (d < bd) bd = d, best = int(i);
    }
    return best;
}

// Hover read-out: a vertical line at the mouse and, per series, its point nearest to it.
void draw_hover(const Chart& c, ImVec2 m) {
    const Theme& t = theme();
    const double fx = (m.x - c.a0.x) / (c.a1.x - c.a0.x);
    const double xq = c.categorical ? std::round(c.ax.unmap(fx)) : c.ax.unmap(fx);
    const float lx = c.categorical ? c.sx(xq) : m.x;
    c.dl->AddLine(ImVec2(lx, c.a0.y), ImVec2(lx, c.a1.y), t.axis);
    ImGui::BeginTooltip();
    bool header = false;
    for (int k = 0; k < int(c.series.size()); ++k) {
        const Series& s = *c.series[size_t(k)];
        const int best = nearest_point(c, s, m.x);
        if (best < 0) continue;
        const size_t b = size_t(best);
        if (!header) {
            const std::string xs =
                c.categorical && b < s.x_names.size() ? s.x_names[b] : format_with_unit(s.x[b], c.s0.x_unit);
            ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(t.text_dim), "%s: %s", c.s0.x_label.c_str(),
                               xs.c_str());
            header = true;
        }
        if (!c.bars)
            c.dl->AddCircleFilled(ImVec2(c.sx(c.x_of(s, b)), c.sy(s.y[b])), t.px(4), series_color(k));
        ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(series_color(k)),
                           ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoBorder,
                           ImVec2(t.px(10), t.px(10)));
        ImGui::SameLine();
        ImGui::Text("%s  %s", s.name.c_str(), format_with_unit(s.y[b], s.y_unit).c_str());
    }
    ImGui::EndTooltip();
}

}  // namespace

void draw_plot(const char* id, const std::string& title, const std::vector<const Series*>& series,
               float height) {
    if (series.empty()) return;
    const Theme& t = theme();
    const Series& s0 = *series[0];
    Chart c{series,
            s0,
            s0.style == SeriesStyle::bars,
            s0.style == SeriesStyle::bars || !s0.x_names.empty(),
            {},
            {},
            0,
            nullptr,
            {},
            {}};

    ImGui::PushID(id);
    const float w = ImGui::GetContentRegionAvail().x;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("plot", ImVec2(w, height));
    const bool hovered = ImGui::IsItemHovered();
    c.dl = ImGui::GetWindowDrawList();
    const ImVec2 p1(p0.x + w, p0.y + height);
    c.dl->AddRectFilled(p0, p1, t.panel, t.px(6));
    c.dl->AddRect(p0, p1, t.border, t.px(6));

    // Title and legend on top.
    float y = p0.y + t.px(8);
    ImGui::PushFont(fonts().bold);
    c.dl->AddText(ImVec2(p0.x + t.px(12), y), t.text, title.c_str());
    y += ImGui::GetTextLineHeight() + t.px(4);
    ImGui::PopFont();
    ImGui::PushFont(fonts().small);
    const float lh = ImGui::GetTextLineHeight();
    y = draw_legend(c.dl, series, p0, p1, y);
    fit_axes(c);

    // Plot area: leave room for y tick labels (left) and x ticks + label (bottom).
    const int ytarget = std::max(2, int((p1.y - y - lh * 3) / t.px(42)));
    const auto yt = nice_ticks(c.ay.lo, c.ay.hi, ytarget, c.ay.log, s0.y_unit == "B");
    float ylab_w = 0;
    for (double v : yt) ylab_w = std::max(ylab_w, ImGui::CalcTextSize(format_tick(v, s0.y_unit).c_str()).x);
    c.a0 = ImVec2(p0.x + t.px(14) + ylab_w + t.px(6), y + lh + t.px(4));
    c.a1 = ImVec2(p1.x - t.px(16), p1.y - lh * 2 - t.px(12));
    if (c.a1.x - c.a0.x >= t.px(40) && c.a1.y - c.a0.y >= t.px(30)) {
        c.dl->AddText(ImVec2(p0.x + t.px(12), y), t.text_dim, s0.y_label.c_str());  // y label above the axis
        draw_y_grid(c, yt);
        draw_x_axis(c, lh);
        c.dl->PushClipRect(ImVec2(c.a0.x, c.a0.y - t.px(2)), ImVec2(c.a1.x + t.px(2), c.a1.y + t.px(1)),
                           true);
        for (int k = 0; k < int(series.size()); ++k)
            c.bars ? draw_bars(c, *series[size_t(k)], k) : draw_line(c, *series[size_t(k)], k);
        c.dl->PopClipRect();
        const ImVec2 m = ImGui::GetIO().MousePos;
        if (hovered && m.x >= c.a0.x && m.x <= c.a1.x && m.y >= c.a0.y - t.px(4) && m.y <= c.a1.y + t.px(4)) {
            ImGui::PopFont();
            draw_hover(c, m);
            ImGui::PushFont(fonts().small);
        }
    }
    ImGui::PopFont();
    ImGui::PopID();
}

}  // namespace k3::ui
