// Colours, fonts and sizes of the explorer, in one place. Dark and light themes.
#pragma once

#include <imgui.h>

namespace k3::ui {

struct Fonts {
    ImFont* body = nullptr;      // Inter Regular
    ImFont* bold = nullptr;      // Inter SemiBold
    ImFont* small = nullptr;     // Inter Regular, smaller
    ImFont* title = nullptr;     // Inter SemiBold, page titles
    ImFont* headline = nullptr;  // Inter SemiBold, big figures
    ImFont* mono = nullptr;      // JetBrains Mono, numbers in tables
};

struct Theme {
    bool dark = true;
    float scale = 1.0f;  // device pixels per layout pixel
    ImU32 bg, panel, panel_alt, border, text, text_dim, accent, accent_soft, good, bad, warn, grid, axis;
    ImU32 series[8];
    float px(float v) const { return v * scale; }  // layout pixels -> device pixels
};

// The current theme and fonts (one UI per process).
Theme& theme();
const Fonts& fonts();

// (Re)build fonts and style for a scale and colour scheme. Call before a frame, never inside one.
void apply_theme(bool dark, float scale);

// Small helpers used by several views.
ImU32 with_alpha(ImU32 c, float a);
ImU32 series_color(int i);

}  // namespace k3::ui
