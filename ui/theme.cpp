#include "ui/theme.h"

#include <cmath>

namespace k3::ui {

namespace embedded {
extern const unsigned char inter_regular[];
extern const size_t inter_regular_size;
extern const unsigned char inter_semibold[];
extern const size_t inter_semibold_size;
extern const unsigned char jetbrains_mono[];
extern const size_t jetbrains_mono_size;
}  // namespace embedded

static Theme g_theme;
static Fonts g_fonts;

Theme& theme() { return g_theme; }
const Fonts& fonts() { return g_fonts; }

ImU32 with_alpha(ImU32 c, float a) {
    const ImU32 alpha = ImU32(std::lround(a * float((c >> IM_COL32_A_SHIFT) & 0xff)));
    return (c & ~IM_COL32_A_MASK) | (alpha << IM_COL32_A_SHIFT);
}

ImU32 series_color(int i) { return g_theme.series[((i % 8) + 8) % 8]; }

static ImFont* add_font(const unsigned char* data, size_t size, float px) {
    ImFontConfig cfg;
    cfg.FontDataOwnedByAtlas = false;  // static data
    cfg.OversampleH = 2;
    cfg.OversampleV = 1;
    cfg.PixelSnapH = false;
    // The glyphs the embedded fonts were cut down to (ui/CMakeLists.txt lists them once).
    static const ImWchar ranges[] = {K3_GLYPH_RANGES 0};
    return ImGui::GetIO().Fonts->AddFontFromMemoryTTF(const_cast<unsigned char*>(data), int(size), px, &cfg,
                                                      ranges);
}

static void set_colors(bool dark) {
    Theme& t = g_theme;
    t.dark = dark;
    if (dark) {
        t.bg = IM_COL32(17, 19, 24, 255);
        t.panel = IM_COL32(24, 27, 34, 255);
        t.panel_alt = IM_COL32(31, 35, 44, 255);
        t.border = IM_COL32(48, 54, 66, 255);
        t.text = IM_COL32(226, 230, 238, 255);
        t.text_dim = IM_COL32(140, 149, 166, 255);
        t.accent = IM_COL32(94, 161, 255, 255);
        t.grid = IM_COL32(255, 255, 255, 18);
        t.axis = IM_COL32(255, 255, 255, 70);
        t.good = IM_COL32(63, 185, 110, 255);
        t.bad = IM_COL32(240, 90, 90, 255);
        t.warn = IM_COL32(236, 178, 60, 255);
        const ImU32 s[8] = {IM_COL32(94, 161, 255, 255),  IM_COL32(255, 145, 77, 255),
                            IM_COL32(98, 200, 130, 255),  IM_COL32(221, 110, 200, 255),
                            IM_COL32(240, 206, 90, 255),  IM_COL32(120, 220, 230, 255),
                            IM_COL32(180, 140, 255, 255), IM_COL32(200, 200, 200, 255)};
        for (int i = 0; i < 8; ++i) t.series[i] = s[i];
    } else {
        t.bg = IM_COL32(246, 247, 250, 255);
        t.panel = IM_COL32(255, 255, 255, 255);
        t.panel_alt = IM_COL32(238, 241, 246, 255);
        t.border = IM_COL32(214, 219, 228, 255);
        t.text = IM_COL32(28, 32, 40, 255);
        t.text_dim = IM_COL32(100, 108, 124, 255);
        t.accent = IM_COL32(30, 110, 230, 255);
        t.grid = IM_COL32(0, 0, 0, 20);
        t.axis = IM_COL32(0, 0, 0, 90);
        t.good = IM_COL32(30, 150, 80, 255);
        t.bad = IM_COL32(210, 50, 50, 255);
        t.warn = IM_COL32(190, 130, 0, 255);
        const ImU32 s[8] = {IM_COL32(30, 110, 230, 255), IM_COL32(230, 110, 30, 255),
                            IM_COL32(40, 160, 80, 255),  IM_COL32(190, 60, 170, 255),
                            IM_COL32(190, 150, 0, 255),  IM_COL32(0, 150, 170, 255),
                            IM_COL32(120, 80, 220, 255), IM_COL32(110, 110, 110, 255)};
        for (int i = 0; i < 8; ++i) t.series[i] = s[i];
    }
    t.accent_soft = with_alpha(t.accent, 0.18f);

    ImGuiStyle& st = ImGui::GetStyle();
    ImVec4* c = st.Colors;
    auto v = [](ImU32 u) { return ImGui::ColorConvertU32ToFloat4(u); };
    if (dark)
        ImGui::StyleColorsDark(&st);
    else
        ImGui::StyleColorsLight(&st);
    c[ImGuiCol_WindowBg] = v(t.bg);
    c[ImGuiCol_ChildBg] = v(t.panel);
    c[ImGuiCol_PopupBg] = v(t.panel_alt);
    c[ImGuiCol_Border] = v(t.border);
    c[ImGuiCol_Text] = v(t.text);
    c[ImGuiCol_TextDisabled] = v(t.text_dim);
    c[ImGuiCol_FrameBg] = v(t.panel_alt);
    c[ImGuiCol_FrameBgHovered] = v(with_alpha(t.accent, 0.25f));
    c[ImGuiCol_FrameBgActive] = v(with_alpha(t.accent, 0.35f));
    c[ImGuiCol_Button] = v(t.panel_alt);
    c[ImGuiCol_ButtonHovered] = v(with_alpha(t.accent, 0.30f));
    c[ImGuiCol_ButtonActive] = v(with_alpha(t.accent, 0.45f));
    c[ImGuiCol_Header] = v(with_alpha(t.accent, 0.20f));
    c[ImGuiCol_HeaderHovered] = v(with_alpha(t.accent, 0.28f));
    c[ImGuiCol_HeaderActive] = v(with_alpha(t.accent, 0.40f));
    c[ImGuiCol_SliderGrab] = v(t.accent);
    c[ImGuiCol_SliderGrabActive] = v(t.accent);
    c[ImGuiCol_CheckMark] = v(t.accent);
    c[ImGuiCol_Tab] = v(t.panel);
    c[ImGuiCol_TabHovered] = v(with_alpha(t.accent, 0.30f));
    c[ImGuiCol_TabActive] = v(with_alpha(t.accent, 0.22f));
    c[ImGuiCol_TableHeaderBg] = v(t.panel_alt);
    c[ImGuiCol_TableRowBgAlt] = v(with_alpha(t.panel_alt, 0.5f));
    c[ImGuiCol_TableBorderLight] = v(t.border);
    c[ImGuiCol_TableBorderStrong] = v(t.border);
    c[ImGuiCol_PlotHistogram] = v(t.accent);
    c[ImGuiCol_Separator] = v(t.border);
    c[ImGuiCol_ScrollbarBg] = v(with_alpha(t.bg, 0.0f));
    c[ImGuiCol_TextSelectedBg] = v(with_alpha(t.accent, 0.35f));
    c[ImGuiCol_NavHighlight] = v(t.accent);
}

void apply_theme(bool dark, float scale) {
    Theme& t = g_theme;
    const bool rebuild_fonts = !g_fonts.body || std::fabs(scale - t.scale) > 1e-3f;
    t.scale = scale;

    ImGuiStyle& st = ImGui::GetStyle();
    st = ImGuiStyle();
    set_colors(dark);
    st.WindowPadding = ImVec2(14, 12);
    st.FramePadding = ImVec2(8, 5);
    st.ItemSpacing = ImVec2(8, 7);
    st.ItemInnerSpacing = ImVec2(6, 4);
    st.CellPadding = ImVec2(8, 4);
    st.IndentSpacing = 14;
    st.ScrollbarSize = 12;
    st.GrabMinSize = 10;
    st.WindowRounding = 0;
    st.ChildRounding = 6;
    st.FrameRounding = 4;
    st.PopupRounding = 6;
    st.GrabRounding = 4;
    st.TabRounding = 4;
    st.ScrollbarRounding = 6;
    st.WindowBorderSize = 0;
    st.ChildBorderSize = 1;
    st.FrameBorderSize = 0;
    st.ScaleAllSizes(scale);

    if (rebuild_fonts) {
        ImGuiIO& io = ImGui::GetIO();
        io.Fonts->Clear();
        const float s = scale;
        g_fonts.body = add_font(embedded::inter_regular, embedded::inter_regular_size, 15.0f * s);
        g_fonts.bold = add_font(embedded::inter_semibold, embedded::inter_semibold_size, 15.0f * s);
        g_fonts.small = add_font(embedded::inter_regular, embedded::inter_regular_size, 13.0f * s);
        g_fonts.title = add_font(embedded::inter_semibold, embedded::inter_semibold_size, 21.0f * s);
        g_fonts.headline = add_font(embedded::inter_semibold, embedded::inter_semibold_size, 27.0f * s);
        g_fonts.mono = add_font(embedded::jetbrains_mono, embedded::jetbrains_mono_size, 13.5f * s);
        io.FontDefault = g_fonts.body;
        io.Fonts->Build();
    }
}

}  // namespace k3::ui
