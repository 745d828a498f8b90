// The desktop app: GLFW + OpenGL 3, the same UI as the web page.
//   k3explorer [--module ID] [--set key=value]... [--link '#m=...'] [--import PATH]...
//              [--screenshot out.png [--print-link]] [--size 1280x800] [--scale S] [--light]
// Files dropped onto the window are imported as --import imports them (core/experiments/import.h).
// It sleeps in glfwWaitEvents when nothing changes (no busy loop when idle).
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "ui/app.h"
#include "ui/frame.h"
#include "ui/platform.h"
#include "ui/png_write.h"
#include "ui/theme.h"

namespace {

bool g_event = false;                // set by any input callback; ImGui's backend chains to these
std::vector<std::string> g_dropped;  // paths dropped onto the window, imported by the next frame

void mark_event() { g_event = true; }

struct Options {
    std::string module, link, screenshot;
    std::vector<std::pair<std::string, std::string>> set;
    std::vector<std::string> imports;
    int width = 1280, height = 800;
    float scale = 0;  // 0: the monitor's content scale
    bool light = false;
    bool print_link = false;  // with --screenshot: print the view's link (what was applied) too
};

void usage() {
    std::fputs(
        "usage: k3explorer [--module ID] [--set key=value]... [--link '#m=...'] [--import PATH]...\n"
        "                  [--screenshot out.png [--print-link]] [--size WxH] [--scale S] [--light]\n",
        stderr);
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&](std::string& dst) {
            if (i + 1 >= argc) return false;
            dst = argv[++i];
            return true;
        };
        std::string v;
        if (a == "--module") {
            if (!next(o.module)) return false;
        } else if (a == "--link") {
            if (!next(o.link)) return false;
        } else if (a == "--screenshot") {
            if (!next(o.screenshot)) return false;
        } else if (a == "--import") {
            if (!next(v)) return false;
            o.imports.push_back(v);
        } else if (a == "--set") {
            if (!next(v) || v.find('=') == std::string::npos) return false;
            o.set.emplace_back(v.substr(0, v.find('=')), v.substr(v.find('=') + 1));
        } else if (a == "--size") {
            if (!next(v) || std::sscanf(v.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width < 320 ||
                o.height < 240)
                return false;
        } else if (a == "--scale") {
            if (!next(v)) return false;
            o.scale = std::strtof(v.c_str(), nullptr);
            if (!(o.scale >= 0.5f && o.scale <= 4.0f)) return false;
        } else if (a == "--print-link") {
            o.print_link = true;
        } else if (a == "--light") {
            o.light = true;
        } else {
            return false;
        }
    }
    return true;
}

bool save_framebuffer(GLFWwindow* w, const std::string& path) {
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(w, &fw, &fh);
    std::vector<unsigned char> px(size_t(fw) * size_t(fh) * 4), flipped(px.size());
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, fw, fh, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    for (int y = 0; y < fh; ++y)
        std::memcpy(&flipped[size_t(y) * size_t(fw) * 4], &px[size_t(fh - 1 - y) * size_t(fw) * 4],
                    size_t(fw) * 4);
    for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
    return k3::ui::write_png(path, fw, fh, flipped);
}

// A window with an OpenGL 3.2 core context, or null (no display).
GLFWwindow* open_window(const Options& opt) {
    glfwSetErrorCallback(
        [](int code, const char* msg) { std::fprintf(stderr, "glfw error %d: %s\n", code, msg); });
    if (!glfwInit()) return nullptr;
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 2);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
    GLFWwindow* window = glfwCreateWindow(opt.width, opt.height, "K3 Serve Explorer", nullptr, nullptr);
    if (!window) {
        std::fprintf(stderr, "k3explorer: could not open a window (is a display available?)\n");
        glfwTerminate();
        return nullptr;
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(1);
    return window;
}

// Any input wakes the loop. Installed before ImGui's backend, which chains to them.
void wake_on_events(GLFWwindow* window) {
    glfwSetCursorPosCallback(window, [](GLFWwindow*, double, double) { mark_event(); });
    glfwSetMouseButtonCallback(window, [](GLFWwindow*, int, int, int) { mark_event(); });
    glfwSetScrollCallback(window, [](GLFWwindow*, double, double) { mark_event(); });
    glfwSetKeyCallback(window, [](GLFWwindow*, int, int, int, int) { mark_event(); });
    glfwSetCharCallback(window, [](GLFWwindow*, unsigned int) { mark_event(); });
    glfwSetWindowFocusCallback(window, [](GLFWwindow*, int) { mark_event(); });
    glfwSetCursorEnterCallback(window, [](GLFWwindow*, int) { mark_event(); });
    glfwSetWindowSizeCallback(window, [](GLFWwindow*, int, int) { mark_event(); });
    glfwSetWindowRefreshCallback(window, [](GLFWwindow*) { mark_event(); });
    glfwSetWindowContentScaleCallback(window, [](GLFWwindow*, float, float) { mark_event(); });
    glfwSetDropCallback(window, [](GLFWwindow*, int n, const char** paths) {
        for (int i = 0; i < n; ++i) g_dropped.emplace_back(paths[i]);
        mark_event();
    });
}

void start_imgui(GLFWwindow* window) {
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 150");
}

void stop(GLFWwindow* window) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
}

// --screenshot: once the view has stopped changing, save it. Returns the exit code when done.
std::optional<int> screenshot_when_settled(GLFWwindow* window, const k3::ui::App& app, const Options& opt,
                                           int& settled, double t_start) {
    settled = app.busy() ? 0 : settled + 1;
    if (settled >= 6) {
        if (opt.print_link) std::printf("%s\n", k3::ui::platform::url_hash().c_str());
        if (save_framebuffer(window, opt.screenshot)) return 0;
        std::fprintf(stderr, "k3explorer: could not write %s\n", opt.screenshot.c_str());
        return 1;
    }
    if (k3::now_ms() - t_start > 300000) {
        std::fprintf(stderr, "k3explorer: the run did not finish within 300 s; no screenshot\n");
        return 1;
    }
    return std::nullopt;
}

// Draws frames while anything changes (and a few after the last event), sleeps otherwise.
int run_loop(GLFWwindow* window, k3::ui::App& app, const Options& opt) {
    int frames_left = 3;  // frames to draw after the last event
    int settled = 0;      // screenshot: frames drawn since the view stopped changing
    const double t_start = k3::now_ms();
    while (!glfwWindowShouldClose(window)) {
        if (opt.screenshot.empty() && !app.needs_frames() && frames_left <= 0)
            glfwWaitEventsTimeout(1.0);
        else
            glfwPollEvents();
        if (g_event) frames_left = 3;
        g_event = false;

        for (const std::string& path : g_dropped) app.import_path(path);
        g_dropped.clear();
        k3::ui::prepare_style(app, opt.scale > 0 ? opt.scale : k3::ui::platform::content_scale());
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        // Scripted screenshots show no hover state wherever the virtual display's pointer is.
        if (!opt.screenshot.empty()) ImGui::GetIO().AddMousePosEvent(-FLT_MAX, -FLT_MAX);
        int fw, fh;
        glfwGetFramebufferSize(window, &fw, &fh);
        k3::ui::draw_frame(app, 12.0, fw, fh);
        --frames_left;

        if (app.want_png) {
            app.want_png = false;
            const std::string name = "k3-" + app.module_id() + ".png";
            app.notify(save_framebuffer(window, name) ? "Saved " + name : "Could not write " + name);
        }
        if (!opt.screenshot.empty())
            if (const auto rc = screenshot_when_settled(window, app, opt, settled, t_start)) return *rc;
        glfwSwapBuffers(window);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    if (!parse(argc, argv, opt)) {
        usage();
        return 2;
    }
    GLFWwindow* window = open_window(opt);
    if (!window) return 1;
    wake_on_events(window);
    start_imgui(window);

    k3::ui::App app;
    app.dark = !opt.light;
    if (!opt.link.empty())
        app.open_link(opt.link);
    else if (!opt.module.empty())
        app.open_module(opt.module, opt.set);
    else
        app.open_link("");
    for (const std::string& path : opt.imports) app.import_path(path);
    const int rc = run_loop(window, app, opt);
    stop(window);
    return rc;
}
