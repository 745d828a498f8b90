// One frame of the explorer, the same in the desktop app and the web page: rebuild fonts and
// style when the scale or theme changed, run the app for a time slice, draw, render.
#pragma once

namespace k3::ui {

class App;

// Before ImGui's platform NewFrame: fonts and style for `scale` (device pixels per layout pixel).
void prepare_style(App& app, float scale);
// Between the platform backends' NewFrame calls and the swap: ImGui::NewFrame, app.update for
// `budget_ms`, app.draw, render into the current framebuffer of w x h device pixels.
void draw_frame(App& app, double budget_ms, int w, int h);

}  // namespace k3::ui
