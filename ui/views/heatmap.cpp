// Heat map over two parameters with a contour line at a chosen level (break-even maps).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/base/numfmt.h"
#include "ui/plot.h"
#include "ui/theme.h"
#include "ui/views/views.h"
#include "ui/widgets.h"

namespace k3::ui {

// A perceptually ordered colour map (viridis-like, 6 stops), f in [0, 1].
static ImU32 colormap(double f) {
    static const float stops[6][3] = {{68, 1, 84},    {65, 68, 135},  {42, 120, 142},
                                      {34, 168, 132}, {122, 209, 81}, {253, 231, 37}};
    f = std::clamp(f, 0.0, 1.0) * 5.0;
    const int i = std::min(4, int(f));
    const float u = float(f - i);
    float c[3];
    for (int k = 0; k < 3; ++k) c[k] = stops[i][k] + (stops[i + 1][k] - stops[i][k]) * u;
    return IM_COL32(int(c[0]), int(c[1]), int(c[2]), 255);
}

namespace {

// A heat map being drawn: cells of cw x ch between a0 (top left) and a1, colours over [zlo, zhi].
struct Frame {
    const HeatMap& h;
    size_t nx, ny;
    double zlo, zhi;
    ImDrawList* dl;
    ImVec2 a0, a1;
    float cw, ch;
    double z(size_t ix, size_t iy) const { return h.z[iy * nx + ix]; }
};

void draw_cells(const Frame& f) {
    for (size_t iy = 0; iy < f.ny; ++iy)
        for (size_t ix = 0; ix < f.nx; ++ix) {
            const double z = f.z(ix, iy);
            const ImU32 c = std::isfinite(z) ? colormap((z - f.zlo) / (f.zhi - f.zlo)) : theme().panel_alt;
            const float x = f.a0.x + float(ix) * f.cw, y = f.a1.y - float(iy + 1) * f.ch;
            f.dl->AddRectFilled(ImVec2(x, y), ImVec2(x + f.cw + 0.5f, y + f.ch + 0.5f), c);
        }
}

// The contour at level L by marching squares over cell centres.
void draw_contour(const Frame& f, double L) {
    if (f.nx < 2 || f.ny < 2) return;
    auto cx = [&](double ix) { return f.a0.x + float(ix + 0.5) * f.cw; };
    auto cy = [&](double iy) { return f.a1.y - float(iy + 0.5) * f.ch; };
    for (size_t iy = 0; iy + 1 < f.ny; ++iy)
        for (size_t ix = 0; ix + 1 < f.nx; ++ix) {
            const double v[4] = {f.z(ix, iy), f.z(ix + 1, iy), f.z(ix + 1, iy + 1), f.z(ix, iy + 1)};
            if (!(std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]) && std::isfinite(v[3])))
                continue;
            const double px[4] = {0, 1, 1, 0}, py[4] = {0, 0, 1, 1};
            ImVec2 hits[4];
            int nh = 0;
            for (int e = 0; e < 4; ++e) {
                const int a = e, b = (e + 1) % 4;
                if ((v[a] < L) != (v[b] < L)) {
                    const double u = (L - v[a]) / (v[b] - v[a]);
                    hits[nh++] = ImVec2(cx(double(ix) + px[a] + u * (px[b] - px[a])),
                                        cy(double(iy) + py[a] + u * (py[b] - py[a])));
                }
            }
            for (int k = 0; k + 1 < nh; k += 2)
                f.dl->AddLine(hits[k], hits[k + 1], IM_COL32(255, 255, 255, 230), theme().px(2.5f));
        }
}

// A few values of each axis, and the x label below.
void draw_axes(const Frame& f, float lh) {
    const Theme& t = theme();
    const float pw = f.a1.x - f.a0.x, ph = f.a1.y - f.a0.y;
    const int xt = std::max(2, int(pw / t.px(80)));
    for (int k = 0; k < xt; ++k) {
        const size_t ix = size_t(std::lround(double(k) * double(f.nx - 1) / double(xt - 1)));
        const std::string s = format_tick(f.h.x[ix], "");
        const float x = f.a0.x + (float(ix) + 0.5f) * f.cw - ImGui::CalcTextSize(s.c_str()).x * 0.5f;
        f.dl->AddText(ImVec2(x, f.a1.y + t.px(3)), t.text_dim, s.c_str());
    }
    const int yt = std::max(2, int(ph / t.px(40)));
    for (int k = 0; k < yt; ++k) {
        const size_t iy = size_t(std::lround(double(k) * double(f.ny - 1) / double(yt - 1)));
        const std::string s = format_tick(f.h.y[iy], "");
        const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
        f.dl->AddText(ImVec2(f.a0.x - ts.x - t.px(5), f.a1.y - (float(iy) + 0.5f) * f.ch - ts.y * 0.5f),
                      t.text_dim, s.c_str());
    }
    const ImVec2 xls = ImGui::CalcTextSize(f.h.x_label.c_str());
    f.dl->AddText(ImVec2((f.a0.x + f.a1.x - xls.x) * 0.5f, f.a1.y + lh + t.px(6)), t.text_dim,
                  f.h.x_label.c_str());
}

// The colour bar to the right, with its range and the contour level marked.
void draw_colour_bar(const Frame& f, float lh) {
    const Theme& t = theme();
    const ImVec2 b0(f.a1.x + t.px(14), f.a0.y), b1(f.a1.x + t.px(28), f.a1.y);
    const int steps = 48;
    for (int k = 0; k < steps; ++k) {
        const float y0 = b1.y - (b1.y - b0.y) * float(k + 1) / steps,
                    y1 = b1.y - (b1.y - b0.y) * float(k) / steps;
        f.dl->AddRectFilled(ImVec2(b0.x, y0), ImVec2(b1.x, y1 + 0.5f), colormap((k + 0.5) / steps));
    }
    f.dl->AddText(ImVec2(b1.x + t.px(4), b0.y), t.text_dim, format_tick(f.zhi, "").c_str());
    f.dl->AddText(ImVec2(b1.x + t.px(4), b1.y - lh), t.text_dim, format_tick(f.zlo, "").c_str());
    const std::optional<double>& L = f.h.contour;
    if (L && *L > f.zlo && *L < f.zhi) {
        const float yc = b1.y - float((*L - f.zlo) / (f.zhi - f.zlo)) * (b1.y - b0.y);
        f.dl->AddLine(ImVec2(b0.x - t.px(3), yc), ImVec2(b1.x + t.px(3), yc), IM_COL32(255, 255, 255, 230),
                      t.px(2));
    }
}

void hover_tooltip(const Frame& f) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int ix = int((m.x - f.a0.x) / f.cw), iy = int((f.a1.y - m.y) / f.ch);
    if (ix < 0 || iy < 0 || size_t(ix) >= f.nx || size_t(iy) >= f.ny) return;
    const HeatMap& h = f.h;
    tooltip_wrapped(h.x_label + ": " + format_number(h.x[size_t(ix)]) + "\n" + h.y_label + ": " +
                    format_number(h.y[size_t(iy)]) + "\n" + h.z_label + ": " +
                    format_sig(f.z(size_t(ix), size_t(iy)), 4));
}

}  // namespace

void draw_heatmap(const HeatMap& h, int index) {
    const Theme& t = theme();
    const size_t nx = h.x.size(), ny = h.y.size();
    if (nx == 0 || ny == 0 || h.z.size() != nx * ny) {
        ImGui::TextDisabled("(empty heat map)");
        return;
    }
    ImGui::PushID(index);
    double zlo = std::numeric_limits<double>::infinity(), zhi = -zlo;
    for (double z : h.z)
        if (std::isfinite(z)) zlo = std::min(zlo, z), zhi = std::max(zhi, z);
    if (!(zhi > zlo)) zhi = zlo + 1;

    ImGui::PushFont(fonts().small);
    const float lh = ImGui::GetTextLineHeight();
    const float avail = ImGui::GetContentRegionAvail().x;
    const float left = t.px(64), bottom = lh * 2 + t.px(10), bar_w = t.px(86);
    const float pw = std::max(t.px(120), avail - left - bar_w - t.px(8));
    const float ph = std::clamp(pw * 0.55f, t.px(160), t.px(340));
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::TextDisabled("%s", h.y_label.c_str());
    const ImVec2 a0(p0.x + left, p0.y + lh + t.px(4));
    ImGui::SetCursorScreenPos(a0);
    ImGui::InvisibleButton("heat", ImVec2(pw, ph));
    const bool hovered = ImGui::IsItemHovered();
    const Frame f{h,
                  nx,
                  ny,
                  zlo,
                  zhi,
                  ImGui::GetWindowDrawList(),
                  a0,
                  ImVec2(a0.x + pw, a0.y + ph),
                  pw / float(nx),
                  ph / float(ny)};
    draw_cells(f);
    if (h.contour) draw_contour(f, *h.contour);
    f.dl->AddRect(f.a0, f.a1, t.border);
    draw_axes(f, lh);
    draw_colour_bar(f, lh);
    ImGui::SetCursorScreenPos(ImVec2(p0.x, f.a1.y + bottom));
    ImGui::TextDisabled(
        "colour: %s%s", h.z_label.c_str(),
        h.contour ? ("; white line: " + format_number(*h.contour) + " (break-even)").c_str() : "");
    ImGui::PopFont();
    if (hovered) hover_tooltip(f);
    ImGui::PopID();
}

}  // namespace k3::ui
