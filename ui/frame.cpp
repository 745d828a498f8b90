#include "ui/frame.h"

#include <GLFW/glfw3.h>  // the GL functions of the platform (desktop GL or WebGL)
#include <imgui.h>
#include <imgui_impl_opengl3.h>

#include "ui/app.h"
#include "ui/theme.h"

namespace k3::ui {

void prepare_style(App& app, float scale) {
    if (scale != theme().scale) app.style_dirty = true;
    if (!app.style_dirty) return;
    apply_theme(app.dark, scale);
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
    app.style_dirty = false;
}

void draw_frame(App& app, double budget_ms, int w, int h) {
    ImGui::NewFrame();
    app.update(budget_ms);
    app.draw();
    ImGui::Render();
    glViewport(0, 0, w, h);
    const ImVec4 bg = ImGui::ColorConvertU32ToFloat4(theme().bg);
    glClearColor(bg.x, bg.y, bg.z, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

}  // namespace k3::ui
