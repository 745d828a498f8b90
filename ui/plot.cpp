#include "ui/plot.h"

#include <imgui.h>

#include <algorithm>

#include "core/base/numfmt.h"
#include "ui/plot_chart.h"
#include "ui/theme.h"

namespace k3::ui::plot {

namespace {

constexpr const char* kHelp =
    "Wheel: zoom around the pointer (Shift: x only; over an axis's numbers: that axis)\n"
    "Drag: pan    Double-click: back to all the data\n"
    "Click a legend entry: hide or show it    lin / log: the axis's scale";

// ---- series and legend entries ------------------------------------------------------------------

// The series' finite coordinates (category indices on a categorical x axis).
void measure(const Chart& c, Line& l) {
    const Series& s = *l.s;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        l.x.add(c.x_of(s, i));
        l.y.add(s.y[i]);
    }
}

// A line under the entry of its name (a baseline's: of a current series not yet matched), or
// under a new entry in the next colour.
void add_line(Chart& c, const Series* s, bool baseline) {
    auto match = [&](const Entry& e) { return baseline && e.current && !e.baseline && *e.name == s->name; };
    auto it = std::find_if(c.entries.begin(), c.entries.end(), match);
    if (it == c.entries.end()) {
        c.entries.push_back(Entry{&s->name, int(c.entries.size())});
        it = c.entries.end() - 1;
    }
    (baseline ? it->baseline : it->current) = true;
    Line l{s, int(it - c.entries.begin()), baseline};
    measure(c, l);
    c.ncat = std::max(c.ncat, s->y.size());
    c.lines.push_back(l);
}

void collect(Chart& c, const std::vector<const Series*>& series, const std::vector<const Series*>& baseline) {
    for (const Series* s : series) add_line(c, s, false);
    for (const Series* s : baseline) add_line(c, s, true);
    // The baseline's lines first: drawn beneath the current run's.
    std::stable_partition(c.lines.begin(), c.lines.end(), [](const Line& l) { return l.baseline; });
    c.has_baseline = !baseline.empty();
}

// Legend entries flowing left to right from y, wrapping at the frame, then (with a baseline) which
// line is which run; returns the y below them.
float draw_legend(Chart& c, float y) {
    const Theme& t = theme();
    const float lh = ImGui::GetTextLineHeight();
    const ImVec2 m = ImGui::GetIO().MousePos;
    const float left = c.p0.x + t.px(12), right = c.p1.x - t.px(8);
    float lx = left;
    auto place = [&](float w) {
        if (lx + w > right && lx > left) lx = left, y += lh + t.px(2);
        const float x = lx;
        lx += w;
        return x;
    };
    for (Entry& e : c.entries) {
        const float x = place(ImGui::CalcTextSize(e.name->c_str()).x + t.px(26));
        e.box = {ImVec2(x - t.px(3), y), ImVec2(lx - t.px(6), y + lh)};
        const float alpha = e.hidden ? 0.3f : 1.0f;
        const ImU32 col = with_alpha(series_color(e.color), alpha);
        const float my = y + lh * 0.5f;
        if (e.current)
            c.dl->AddRectFilled(ImVec2(x, my - t.px(2)), ImVec2(x + t.px(14), my + t.px(2)), col, t.px(2));
        else
            draw_line_sample(c.dl, ImVec2(x, my), ImVec2(x + t.px(14), my), col, true);
        const bool hot = c.hovered && e.box.contains(m);
        c.dl->AddText(ImVec2(x + t.px(18), y), with_alpha(hot ? t.text : t.text_dim, alpha), e.name->c_str());
    }
    if (c.has_baseline) {
        for (const auto& [word, dashed] : {std::pair{"current", false}, std::pair{"baseline", true}}) {
            const float x = place(ImGui::CalcTextSize(word).x + t.px(32));
            const float my = y + lh * 0.5f;
            draw_line_sample(c.dl, ImVec2(x + t.px(4), my), ImVec2(x + t.px(22), my), t.text_dim, dashed);
            c.dl->AddText(ImVec2(x + t.px(26), y), t.text_dim, word);
        }
    }
    return y + lh + t.px(6);
}

// ---- axes ---------------------------------------------------------------------------------------

// The scale an axis has: the user's choice where made (log only where allowed), else the series'.
bool log_scale(int choice, bool series_log, bool allowed) {
    return choice < 0 ? series_log : choice == 1 && allowed;
}

// Which scales the shown series allow, the scales, and the ranges: the user's where zoomed, else
// those of the shown series' drawable points (for y, of those in the x range when only x is zoomed).
void fit_axes(Chart& c, const View& v) {
    for (const Line& l : c.lines)
        if (c.shown(l)) c.shown_x.add(l.x), c.shown_y.add(l.y);
    // Log where every shown value is above 0, and where the series asked for it (points at or
    // below 0 are left out then, as the module chose).
    c.log_x_allowed = !c.categorical && (c.s0.log_x || c.shown_x.empty() || c.shown_x.lo > 0);
    c.log_y_allowed = c.s0.log_y || c.shown_y.empty() || c.shown_y.lo > 0;
    c.ax.log = !c.categorical && log_scale(v.scale_x, c.s0.log_x, c.log_x_allowed);
    c.ay.log = log_scale(v.scale_y, c.s0.log_y, c.log_y_allowed);
    if (v.zoomed_x) c.ax.lo = v.x.lo, c.ax.hi = v.x.hi;
    ValueRange x, y, y_in_view;
    for (const Line& l : c.lines) {
        if (!c.shown(l)) continue;
        for (size_t i = 0; i < l.s->x.size() && i < l.s->y.size(); ++i) {
            if (!c.drawable(*l.s, i)) continue;
            const double xv = c.x_of(*l.s, i);
            x.add(xv);
            y.add(l.s->y[i]);
            if (xv >= c.ax.lo && xv <= c.ax.hi) y_in_view.add(l.s->y[i]);
        }
    }
    if (c.categorical && !v.zoomed_x) c.ax.lo = -0.5, c.ax.hi = double(c.ncat) - 0.5;
    if (!c.categorical && !v.zoomed_x) fit_axis(c.ax, x, false, false);
    if (v.zoomed_y)
        c.ay.lo = v.y.lo, c.ay.hi = v.y.hi;
    else
        fit_axis(c.ay, v.zoomed_x && !y_in_view.empty() ? y_in_view : y, c.bars, true);
}

// The plot area below y: room for the y tick labels on the left and the x ticks and label below.
// Returns the y ticks.
std::vector<double> place_area(Chart& c, float y, float lh) {
    const Theme& t = theme();
    const int target = std::max(2, int((c.p1.y - y - lh * 3) / t.px(42)));
    std::vector<double> ticks = nice_ticks(c.ay.lo, c.ay.hi, target, c.ay.log, c.s0.y_unit == "B");
    const double step = tick_step(ticks);
    float label_w = 0;
    for (double v : ticks)
        label_w = std::max(label_w, ImGui::CalcTextSize(format_tick(v, c.s0.y_unit, step).c_str()).x);
    c.a0 = ImVec2(c.p0.x + t.px(14) + label_w + t.px(6), y + lh + t.px(4));
    c.a1 = ImVec2(c.p1.x - t.px(16), c.p1.y - lh * 2 - t.px(12));
    c.set_transform();
    c.y_band = {ImVec2(c.p0.x, c.a0.y), ImVec2(c.a0.x - 1, c.a1.y)};
    c.x_band = {ImVec2(c.a0.x, c.a1.y + 1), ImVec2(c.a1.x, c.a1.y + lh + t.px(6))};
    return ticks;
}

void draw_y_grid(const Chart& c, const std::vector<double>& ticks) {
    const Theme& t = theme();
    const double step = tick_step(ticks);
    for (double v : ticks) {
        const float py = c.sy(v);
        if (py < c.a0.y - 1 || py > c.a1.y + 1) continue;
        c.dl->AddLine(ImVec2(c.a0.x, py), ImVec2(c.a1.x, py), t.grid);
        const std::string txt = format_tick(v, c.s0.y_unit, step);
        const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
        c.dl->AddText(ImVec2(c.a0.x - t.px(6) - ts.x, py - ts.y * 0.5f), t.text_dim, txt.c_str());
    }
}

void draw_categories(const Chart& c) {
    const Theme& t = theme();
    const std::vector<std::string>& names = c.s0.x_names;
    for (size_t i = 0; i < c.ncat; ++i) {
        const float px = c.sx(double(i));
        if (px < c.a0.x - 1 || px > c.a1.x + 1) continue;
        std::string txt =
            i < names.size() ? names[i] : format_tick(i < c.s0.x.size() ? c.s0.x[i] : double(i), c.s0.x_unit);
        // A name wider than its category is cut to fit (the hover read-out gives it whole).
        const float room = (c.a1.x - c.a0.x) / float(std::max<size_t>(c.ncat, 1)) - t.px(6);
        while (txt.size() > 3 && ImGui::CalcTextSize(txt.c_str()).x > room)
            txt = txt.substr(0, txt.size() - 3) + "..";
        const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
        c.dl->AddText(ImVec2(px - ts.x * 0.5f, c.a1.y + t.px(4)), t.text_dim, txt.c_str());
    }
}

void draw_x_ticks(const Chart& c) {
    const Theme& t = theme();
    const std::string& unit = c.s0.x_unit;
    const int target = std::max(2, int((c.a1.x - c.a0.x) / t.px(90)));
    const std::vector<double> ticks = nice_ticks(c.ax.lo, c.ax.hi, target, c.ax.log, unit == "B");
    const double step = tick_step(ticks);
    for (double v : ticks) {
        const float px = c.sx(v);
        if (px < c.a0.x - 1 || px > c.a1.x + 1) continue;
        c.dl->AddLine(ImVec2(px, c.a0.y), ImVec2(px, c.a1.y), t.grid);
        const std::string txt = format_tick(v, unit, step);
        const ImVec2 ts = ImGui::CalcTextSize(txt.c_str());
        const float x = std::clamp(px - ts.x * 0.5f, c.a0.x - t.px(10), c.a1.x - ts.x + t.px(10));
        c.dl->AddText(ImVec2(x, c.a1.y + t.px(4)), t.text_dim, txt.c_str());
    }
}

void draw_x_axis(const Chart& c, float lh) {
    const Theme& t = theme();
    c.categorical ? draw_categories(c) : draw_x_ticks(c);
    const ImVec2 xls = ImGui::CalcTextSize(c.s0.x_label.c_str());
    c.dl->AddText(ImVec2((c.a0.x + c.a1.x - xls.x) * 0.5f, c.a1.y + lh + t.px(6)), t.text_dim,
                  c.s0.x_label.c_str());
    c.dl->AddLine(ImVec2(c.a0.x, c.a1.y), ImVec2(c.a1.x, c.a1.y), t.axis);
    c.dl->AddLine(ImVec2(c.a0.x, c.a0.y), ImVec2(c.a0.x, c.a1.y), t.axis);
}

// ---- small clickable words ----------------------------------------------------------------------

// A word at pos that reacts to the mouse: bright when `on`, highlighted under the mouse when it can
// be clicked, faint when refused. Returns its box.
Box draw_word(const Chart& c, ImVec2 pos, const char* word, bool on, bool allowed) {
    const Theme& t = theme();
    const ImVec2 ts = ImGui::CalcTextSize(word);
    const Box b{ImVec2(pos.x - t.px(3), pos.y), ImVec2(pos.x + ts.x + t.px(3), pos.y + ts.y)};
    const bool hot = c.hovered && allowed && !on && b.contains(ImGui::GetIO().MousePos);
    if (on) c.dl->AddRectFilled(b.min, b.max, t.panel_alt, t.px(3));
    const ImU32 col = on ? t.text : !allowed ? with_alpha(t.text_dim, 0.4f) : hot ? t.accent : t.text_dim;
    c.dl->AddText(pos, col, word);
    return b;
}

// "lin log" with its left end at pos.
void draw_scale_switch(const Chart& c, ImVec2 pos, bool log, bool allowed, Box& lin, Box& lg) {
    lin = draw_word(c, pos, "lin", !log, true);
    lg = draw_word(c, ImVec2(lin.max.x + theme().px(5), pos.y), "log", log, allowed);
}

// The y label above the axis with its scale switch after it; the x scale switch at the right end
// of the x label's row.
void draw_scale_switches(Chart& c, float label_y, float lh) {
    const Theme& t = theme();
    const ImVec2 ys = ImGui::CalcTextSize(c.s0.y_label.c_str());
    c.dl->AddText(ImVec2(c.p0.x + t.px(12), label_y), t.text_dim, c.s0.y_label.c_str());
    draw_scale_switch(c, ImVec2(c.p0.x + t.px(12) + ys.x + t.px(10), label_y), c.ay.log, c.log_y_allowed,
                      c.y_lin, c.y_log);
    if (c.categorical) return;
    const float w = ImGui::CalcTextSize("lin").x + ImGui::CalcTextSize("log").x + t.px(11);
    draw_scale_switch(c, ImVec2(c.a1.x - w, c.a1.y + lh + t.px(6)), c.ax.log, c.log_x_allowed, c.x_lin,
                      c.x_log);
}

// The title; at the right, "?" (what the mouse does) and, when zoomed, "reset zoom". Returns the y
// below the title.
float draw_header(Chart& c, const std::string& title, bool zoomed) {
    const Theme& t = theme();
    const float y = c.p0.y + t.px(8);
    ImGui::PushFont(fonts().bold);
    c.dl->AddText(ImVec2(c.p0.x + t.px(12), y), t.text, title.c_str());
    const float below = y + ImGui::GetTextLineHeight() + t.px(4);
    ImGui::PopFont();
    ImGui::PushFont(fonts().small);
    const float qw = ImGui::CalcTextSize("(?)").x;
    c.help = draw_word(c, ImVec2(c.p1.x - t.px(14) - qw, y), "(?)", false, true);
    if (zoomed) {
        const float rw = ImGui::CalcTextSize("reset zoom").x;
        c.reset = draw_word(c, ImVec2(c.help.min.x - t.px(12) - rw, y), "reset zoom", false, true);
    }
    ImGui::PopFont();
    return below;
}

// What a scale switch does, or why log is refused.
std::string scale_tip(const char* axis, bool log, bool allowed, const ValueRange& shown,
                      const std::string& unit) {
    if (!allowed)
        return std::string("A log scale needs every shown value above 0; the ") + axis +
               " values go down to " + format_with_unit(shown.lo, unit) +
               " (series hidden from the legend do not count).";
    return std::string(axis) + " axis: " + (log ? "log" : "linear") + " scale. Click " +
           (log ? "lin" : "log") + " to switch.";
}

void draw_tooltips(const Chart& c) {
    if (!c.hovered || ImGui::IsMouseDragging(0)) return;
    const ImVec2 m = ImGui::GetIO().MousePos;
    std::string tip;
    if (c.help.contains(m)) tip = kHelp;
    if (c.reset.contains(m)) tip = "Back to all the data (or double-click the chart).";
    if (c.x_lin.contains(m) || c.x_log.contains(m))
        tip = scale_tip("x", c.ax.log, c.log_x_allowed, c.shown_x, c.s0.x_unit);
    if (c.y_lin.contains(m) || c.y_log.contains(m))
        tip = scale_tip("y", c.ay.log, c.log_y_allowed, c.shown_y, c.s0.y_unit);
    if (tip.empty()) return;
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(tip.c_str());
    ImGui::EndTooltip();
}

// ---- the chart ----------------------------------------------------------------------------------

// Axes, grid and data in the plot area below y (when there is room for one).
void draw_plot_area(Chart& c, float y) {
    const Theme& t = theme();
    const float lh = ImGui::GetTextLineHeight();
    const std::vector<double> yt = place_area(c, y, lh);
    c.has_area = c.a1.x - c.a0.x >= t.px(40) && c.a1.y - c.a0.y >= t.px(30);
    if (!c.has_area) return;
    draw_scale_switches(c, y, lh);
    draw_y_grid(c, yt);
    draw_x_axis(c, lh);
    c.dl->PushClipRect(ImVec2(c.a0.x, c.a0.y - t.px(2)), ImVec2(c.a1.x + t.px(2), c.a1.y + t.px(1)), true);
    draw_series(c);
    c.dl->PopClipRect();
}

void draw_chart(Chart& c, const View& v, const std::string& title) {
    const Theme& t = theme();
    c.dl = ImGui::GetWindowDrawList();
    c.dl->AddRectFilled(c.p0, c.p1, t.panel, t.px(6));
    c.dl->AddRect(c.p0, c.p1, t.border, t.px(6));
    for (Entry& e : c.entries) e.hidden = std::count(v.hidden.begin(), v.hidden.end(), *e.name) > 0;
    const float y = draw_header(c, title, v.zoomed_x || v.zoomed_y);
    ImGui::PushFont(fonts().small);
    fit_axes(c, v);
    draw_plot_area(c, draw_legend(c, y));
    ImGui::PopFont();
    const ImVec2 m = ImGui::GetIO().MousePos;
    const bool panning = c.active && ImGui::IsMouseDragging(0);
    if (c.has_area && c.hovered && !panning && m.x >= c.a0.x && m.x <= c.a1.x && m.y >= c.a0.y - t.px(4) &&
        m.y <= c.a1.y + t.px(4))
        draw_hover(c, m);
    draw_tooltips(c);
}

}  // namespace

}  // namespace k3::ui::plot

namespace k3::ui {

void draw_plot(const char* id, const std::string& title, const std::vector<const Series*>& series,
               const std::vector<const Series*>& baseline, float height) {
    if (series.empty()) return;
    plot::Chart c{*series[0]};
    c.bars = c.s0.style == SeriesStyle::bars;
    // Names on a points series name its points; on any other they are the x axis' categories.
    c.categorical = c.bars || (!c.s0.x_names.empty() && c.s0.style != SeriesStyle::points);
    ImGui::PushID(id);
    const float w = ImGui::GetContentRegionAvail().x;
    c.p0 = ImGui::GetCursorScreenPos();
    c.p1 = ImVec2(c.p0.x + w, c.p0.y + height);
    plot::read_button(c, ImGui::InvisibleButton("plot", ImVec2(w, height)));
    plot::collect(c, series, baseline);
    plot::View& v = plot::view_for(c);
    plot::draw_chart(c, v, title);
    plot::handle_input(c, v);
    ImGui::PopID();
}

}  // namespace k3::ui
