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
    const ImVec2 a1(a0.x + pw, a0.y + ph);
    ImGui::SetCursorScreenPos(a0);
    ImGui::InvisibleButton("heat", ImVec2(pw, ph));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float cw = pw / float(nx), ch = ph / float(ny);
    auto zf = [&](size_t ix, size_t iy) { return h.z[iy * nx + ix]; };
    for (size_t iy = 0; iy < ny; ++iy)
        for (size_t ix = 0; ix < nx; ++ix) {
            const double z = zf(ix, iy);
            const ImU32 c = std::isfinite(z) ? colormap((z - zlo) / (zhi - zlo)) : t.panel_alt;
            const float x = a0.x + float(ix) * cw, y = a1.y - float(iy + 1) * ch;
            dl->AddRectFilled(ImVec2(x, y), ImVec2(x + cw + 0.5f, y + ch + 0.5f), c);
        }
    // Contour by marching squares over cell centres.
    if (h.contour && nx > 1 && ny > 1) {
        auto cx = [&](double ix) { return a0.x + float(ix + 0.5) * cw; };
        auto cy = [&](double iy) { return a1.y - float(iy + 0.5) * ch; };
        const double L = *h.contour;
        for (size_t iy = 0; iy + 1 < ny; ++iy)
            for (size_t ix = 0; ix + 1 < nx; ++ix) {
                const double v[4] = {zf(ix, iy), zf(ix + 1, iy), zf(ix + 1, iy + 1), zf(ix, iy + 1)};
                if (!(std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]) &&
                      std::isfinite(v[3])))
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
                    dl->AddLine(hits[k], hits[k + 1], IM_COL32(255, 255, 255, 230), t.px(2.5f));
            }
    }
    dl->AddRect(a0, a1, t.border);
    // Axis labels: a few values of each axis.
    const int xt = std::max(2, int(pw / t.px(80)));
    for (int k = 0; k < xt; ++k) {
        const size_t ix = size_t(std::lround(double(k) * double(nx - 1) / double(xt - 1)));
        const std::string s = format_tick(h.x[ix], "");
        const float x = a0.x + (float(ix) + 0.5f) * cw - ImGui::CalcTextSize(s.c_str()).x * 0.5f;
        dl->AddText(ImVec2(x, a1.y + t.px(3)), t.text_dim, s.c_str());
    }
    const int yt = std::max(2, int(ph / t.px(40)));
    for (int k = 0; k < yt; ++k) {
        const size_t iy = size_t(std::lround(double(k) * double(ny - 1) / double(yt - 1)));
        const std::string s = format_tick(h.y[iy], "");
        const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
        dl->AddText(ImVec2(a0.x - ts.x - t.px(5), a1.y - (float(iy) + 0.5f) * ch - ts.y * 0.5f), t.text_dim,
                    s.c_str());
    }
    const ImVec2 xls = ImGui::CalcTextSize(h.x_label.c_str());
    dl->AddText(ImVec2((a0.x + a1.x - xls.x) * 0.5f, a1.y + lh + t.px(6)), t.text_dim, h.x_label.c_str());
    // Colour bar.
    const ImVec2 b0(a1.x + t.px(14), a0.y), b1(a1.x + t.px(28), a1.y);
    const int steps = 48;
    for (int k = 0; k < steps; ++k) {
        const float y0 = b1.y - (b1.y - b0.y) * float(k + 1) / steps,
                    y1 = b1.y - (b1.y - b0.y) * float(k) / steps;
        dl->AddRectFilled(ImVec2(b0.x, y0), ImVec2(b1.x, y1 + 0.5f), colormap((k + 0.5) / steps));
    }
    dl->AddText(ImVec2(b1.x + t.px(4), b0.y), t.text_dim, format_tick(zhi, "").c_str());
    dl->AddText(ImVec2(b1.x + t.px(4), b1.y - lh), t.text_dim, format_tick(zlo, "").c_str());
    if (h.contour && *h.contour > zlo && *h.contour < zhi) {
        const float yc = b1.y - float((*h.contour - zlo) / (zhi - zlo)) * (b1.y - b0.y);
        dl->AddLine(ImVec2(b0.x - t.px(3), yc), ImVec2(b1.x + t.px(3), yc), IM_COL32(255, 255, 255, 230),
                    t.px(2));
    }
    ImGui::SetCursorScreenPos(ImVec2(p0.x, a1.y + bottom));
    ImGui::TextDisabled(
        "colour: %s%s", h.z_label.c_str(),
        h.contour ? ("; white line: " + format_number(*h.contour) + " (break-even)").c_str() : "");
    ImGui::PopFont();
    if (hovered) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int ix = int((m.x - a0.x) / cw), iy = int((a1.y - m.y) / ch);
        if (ix >= 0 && iy >= 0 && size_t(ix) < nx && size_t(iy) < ny)
            tooltip_wrapped(h.x_label + ": " + format_number(h.x[size_t(ix)]) + "\n" + h.y_label + ": " +
                            format_number(h.y[size_t(iy)]) + "\n" + h.z_label + ": " +
                            format_sig(zf(size_t(ix), size_t(iy)), 4));
    }
    ImGui::PopID();
}

}  // namespace k3::ui
