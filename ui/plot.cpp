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

void draw_plot(const char* id, const std::string& title, const std::vector<const Series*>& series,
               float height) {
    if (series.empty()) return;
    const Theme& t = theme();
    const Fonts& f = fonts();
    const Series& s0 = *series[0];
    const bool bars = s0.style == SeriesStyle::bars;
    const bool categorical = bars || !s0.x_names.empty();

    ImGui::PushID(id);
    const float w = ImGui::GetContentRegionAvail().x;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("plot", ImVec2(w, height));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p1(p0.x + w, p0.y + height);
    dl->AddRectFilled(p0, p1, t.panel, t.px(6));
    dl->AddRect(p0, p1, t.border, t.px(6));

    // Title and legend on top.
    float y = p0.y + t.px(8);
    ImGui::PushFont(f.bold);
    dl->AddText(ImVec2(p0.x + t.px(12), y), t.text, title.c_str());
    const float title_h = ImGui::GetTextLineHeight();
    ImGui::PopFont();
    y += title_h + t.px(4);
    ImGui::PushFont(f.small);
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
    y += lh + t.px(6);

    // Axes ranges.
    Axis ax, ay;
    ax.log = s0.log_x && !categorical;
    ay.log = s0.log_y;
    double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
    size_t ncat = 0;
    for (const Series* s : series) {
        ncat = std::max(ncat, s->y.size());
        for (size_t i = 0; i < s->x.size() && i < s->y.size(); ++i) {
            if (!ax.valid(s->x[i]) || !ay.valid(s->y[i])) continue;
            xlo = std::min(xlo, s->x[i]), xhi = std::max(xhi, s->x[i]);
            ylo = std::min(ylo, s->y[i]), yhi = std::max(yhi, s->y[i]);
        }
    }
    if (categorical) {
        ax.lo = -0.5;
        ax.hi = double(ncat) - 0.5;
    } else {
        fit_axis(ax, xlo, xhi, false);
        if (!ax.log) ax.lo = xlo <= xhi ? xlo : ax.lo, ax.hi = xlo < xhi ? xhi : ax.hi;
    }
    fit_axis(ay, ylo, yhi, bars);

    // Plot area: leave room for y tick labels (left) and x ticks + label (bottom).
    const std::string& yu = s0.y_unit;
    const std::string& xu = s0.x_unit;
    const int ytarget = std::max(2, int((p1.y - y - lh * 3) / t.px(42)));
    auto yt = nice_ticks(ay.lo, ay.hi, ytarget, ay.log, yu == "B");
    float ylab_w = 0;
    for (double v : yt) ylab_w = std::max(ylab_w, ImGui::CalcTextSize(format_tick(v, yu).c_str()).x);
    const ImVec2 a0(p0.x + t.px(14) + ylab_w + t.px(6), y + lh + t.px(4));
    const ImVec2 a1(p1.x - t.px(16), p1.y - lh * 2 - t.px(12));
    if (a1.x - a0.x < t.px(40) || a1.y - a0.y < t.px(30)) {
        ImGui::PopFont();
        ImGui::PopID();
        return;
    }
    auto sx = [&](double v) { return a0.x + float(ax.map(v)) * (a1.x - a0.x); };
    auto sy = [&](double v) { return a1.y - float(ay.map(v)) * (a1.y - a0.y); };

    // y label above the axis, grid and ticks.
    dl->AddText(ImVec2(p0.x + t.px(12), y), t.text_dim, s0.y_label.c_str());
    for (double v : yt) {
        const float py = sy(v);
        if (py < a0.y - 1 || py > a1.y + 1) continue;
        dl->AddLine(ImVec2(a0.x, py), ImVec2(a1.x, py), t.grid);
        const std::string txt = format_tick(v, yu);
        const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
        dl->AddText(ImVec2(a0.x - t.px(6) - ts.x, py - ts.y * 0.5f), t.text_dim, txt.c_str());
    }
    if (categorical) {
        const std::vector<std::string>& names = s0.x_names;
        for (size_t i = 0; i < ncat; ++i) {
            const std::string txt =
                i < names.size() ? names[i] : format_tick(i < s0.x.size() ? s0.x[i] : double(i), xu);
            const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
            const float px = sx(double(i));
            dl->AddText(ImVec2(px - ts.x * 0.5f, a1.y + t.px(4)), t.text_dim, txt.c_str());
        }
    } else {
        const int xtarget = std::max(2, int((a1.x - a0.x) / t.px(90)));
        for (double v : nice_ticks(ax.lo, ax.hi, xtarget, ax.log, xu == "B")) {
            const float px = sx(v);
            if (px < a0.x - 1 || px > a1.x + 1) continue;
            dl->AddLine(ImVec2(px, a0.y), ImVec2(px, a1.y), t.grid);
            const std::string txt = format_tick(v, xu);
            const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
            dl->AddText(
                ImVec2(std::clamp(px - ts.x * 0.5f, a0.x - t.px(10), a1.x - ts.x + t.px(10)), a1.y + t.px(4)),
                t.text_dim, txt.c_str());
        }
    }
    const ImVec2 xls = ImGui::CalcTextSize(s0.x_label.c_str());
    dl->AddText(ImVec2((a0.x + a1.x - xls.x) * 0.5f, a1.y + lh + t.px(6)), t.text_dim, s0.x_label.c_str());
    dl->AddLine(ImVec2(a0.x, a1.y), ImVec2(a1.x, a1.y), t.axis);
    dl->AddLine(ImVec2(a0.x, a0.y), ImVec2(a0.x, a1.y), t.axis);

    // Data.
    dl->PushClipRect(ImVec2(a0.x, a0.y - t.px(2)), ImVec2(a1.x + t.px(2), a1.y + t.px(1)), true);
    const float thick = t.px(2.0f);
    const int nser = int(series.size());
    for (int k = 0; k < nser; ++k) {
        const Series& s = *series[size_t(k)];
        const ImU32 c = series_color(k);
        if (bars) {
            const float slot = (a1.x - a0.x) / float(std::max<size_t>(ncat, 1));
            const float bw = slot * 0.7f / float(nser);
            for (size_t i = 0; i < s.y.size(); ++i) {
                if (!ay.valid(s.y[i])) continue;
                const float cx = sx(double(i)) - slot * 0.35f + bw * float(k);
                const double base = ay.log ? ay.lo : 0.0;
                dl->AddRectFilled(ImVec2(cx + t.px(1), std::min(sy(s.y[i]), sy(base))),
                                  ImVec2(cx + bw - t.px(1), std::max(sy(s.y[i]), sy(base))), c, t.px(2));
            }
            continue;
        }
        std::vector<ImVec2> pts;
        auto flush = [&] {
            if (s.style == SeriesStyle::points || pts.size() == 1)
                for (const auto& p : pts) dl->AddCircleFilled(p, t.px(3), c);
            else if (pts.size() > 1)
                dl->AddPolyline(pts.data(), int(pts.size()), c, ImDrawFlags_None, thick);
            pts.clear();
        };
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
            const double xv = categorical ? double(i) : s.x[i];
            if (!ax.valid(xv) || !ay.valid(s.y[i])) {
                flush();
                continue;
            }
            const ImVec2 p(sx(xv), sy(s.y[i]));
            if (s.style == SeriesStyle::step && !pts.empty()) pts.push_back(ImVec2(p.x, pts.back().y));
            pts.push_back(p);
        }
        flush();
    }
    dl->PopClipRect();

    // Hover read-out: nearest point of each series to the mouse's x.
    if (hovered) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        if (m.x >= a0.x && m.x <= a1.x && m.y >= a0.y - t.px(4) && m.y <= a1.y + t.px(4)) {
            const double fx = (m.x - a0.x) / (a1.x - a0.x);
            const double xq = categorical ? std::round(ax.unmap(fx)) : ax.unmap(fx);
            dl->AddLine(ImVec2(categorical ? sx(xq) : m.x, a0.y), ImVec2(categorical ? sx(xq) : m.x, a1.y),
                        t.axis);
            ImGui::PopFont();
            ImGui::BeginTooltip();
            bool header = false;
            for (int k = 0; k < nser; ++k) {
                const Series& s = *series[size_t(k)];
                int best = -1;
                float bd = 1e30f;
                for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
                    const double xv = categorical ? double(i) : s.x[i];
                    if (!ax.valid(xv) || !ay.valid(s.y[i])) continue;
                    const float d = std::fabs(sx(xv) - m.x);
                    if (d < bd) bd = d, best = int(i);
                }
                if (best < 0) continue;
                const double xv = categorical ? double(best) : s.x[size_t(best)];
                if (!header) {
                    const std::string xs = categorical && size_t(best) < s.x_names.size()
                                               ? s.x_names[size_t(best)]
                                               : format_with_unit(s.x[size_t(best)], xu);
                    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(t.text_dim), "%s: %s",
                                       s0.x_label.c_str(), xs.c_str());
                    header = true;
                }
                if (!bars)
                    dl->AddCircleFilled(ImVec2(sx(xv), sy(s.y[size_t(best)])), t.px(4), series_color(k));
                ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(series_color(k)),
                                   ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoBorder,
                                   ImVec2(t.px(10), t.px(10)));
                ImGui::SameLine();
                ImGui::Text("%s  %s", s.name.c_str(), format_with_unit(s.y[size_t(best)], s.y_unit).c_str());
            }
            ImGui::EndTooltip();
            ImGui::PushFont(f.small);
        }
    }
    ImGui::PopFont();
    ImGui::PopID();
}

}  // namespace k3::ui
