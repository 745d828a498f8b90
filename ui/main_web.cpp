// The web page: the same UI on WebGL2 through Emscripten's GLFW. web/k3.js wakes the loop on input
// and exposes the test hook window.k3 on top of the functions exported here.
#include <GLFW/glfw3.h>
#include <emscripten.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <emscripten/heap.h>

#include <cmath>
#include <cstdlib>
#include <new>
#include <string>

#include "core/base/data_files.h"

#include "ui/app.h"
#include "ui/frame.h"
#include "ui/platform.h"
#include "ui/theme.h"

namespace {

GLFWwindow* g_window = nullptr;
k3::ui::App* g_app = nullptr;
bool g_ready = false;
bool g_paused = false;
int g_idle_frames = 0;
int g_frames = 0;  // frames drawn; the browser test checks that an idle page stops drawing
std::string g_json;

// JavaScript inside: clang-format would break its "=>" and "!==".
// clang-format off
EM_JS(int, k3js_canvas_width, (), {
    return Math.max(1, Math.round(window.innerWidth * (window.devicePixelRatio || 1)));
});
EM_JS(int, k3js_canvas_height, (), {
    return Math.max(1, Math.round(window.innerHeight * (window.devicePixelRatio || 1)));
});
EM_JS(void, k3js_save_png, (const char* name), {
    // Called right after drawing, in the same task, so the WebGL buffer still holds the frame.
    const a = document.createElement("a");
    a.href = Module.canvas.toDataURL("image/png");
    a.download = UTF8ToString(name);
    document.body.appendChild(a);
    a.click();
    a.remove();
});
EM_JS(void, k3js_loaded, (), {
    if (window.k3Loaded) window.k3Loaded();
});
// Called by the new-handler below, just before the abort: web/k3.js's onAbort then says the run ran out
// of memory (Emscripten's abort gives no reason) and how far the memory had grown.
EM_JS(void, k3js_out_of_memory, (double heap_bytes, double max_bytes), {
    window.k3.outOfMemory = {heap: heap_bytes, max: max_bytes};
});
// clang-format on

// No allocation here: the heap is full. Aborting is the only way out of a run that cannot go on (the
// page is built without exceptions); the page then offers to restart on the last result (web/k3.js).
void out_of_memory() {
    k3js_out_of_memory(double(emscripten_get_heap_size()), double(emscripten_get_heap_max()));
    std::abort();
}

// Dear ImGui allocates with malloc, which returns null on the page when the heap cannot grow (and
// address 0 is writable in WebAssembly): its allocations fail as the run's do, with the message.
void* imgui_alloc(size_t n, void*) {
    void* p = std::malloc(n);
    if (!p && n) out_of_memory();
    return p;
}
void imgui_free(void* p, void*) { std::free(p); }

void frame() {
    k3::ui::App& app = *g_app;
    // Track the window size in device pixels: crisp on high-DPI screens.
    const int w = k3js_canvas_width(), h = k3js_canvas_height();
    int cw = 0, ch = 0;
    glfwGetWindowSize(g_window, &cw, &ch);
    if (w != cw || h != ch) glfwSetWindowSize(g_window, w, h);
    k3::ui::prepare_style(app, std::round(k3::ui::platform::content_scale() * 4.0f) / 4.0f);
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(float(w), float(h));  // everything in device pixels
    io.DisplayFramebufferScale = ImVec2(1, 1);
    k3::ui::draw_frame(app, 10.0, w, h);
    ++g_frames;
    if (app.want_png) {
        app.want_png = false;
        const std::string name = "k3-" + app.module_id() + ".png";
        k3js_save_png(name.c_str());
        app.notify("Downloading " + name);
    }
    if (!g_ready) {
        g_ready = true;
        k3js_loaded();
    }
    // No busy loop when idle: stop the animation-frame loop until input arrives (k3.js wakes it).
    g_idle_frames = app.needs_frames() ? 0 : g_idle_frames + 1;
    if (g_idle_frames > 4 && !g_paused) {
        g_paused = true;
        emscripten_pause_main_loop();
    }
}

}  // namespace

extern "C" {
EMSCRIPTEN_KEEPALIVE void k3_wake() {
    g_idle_frames = 0;
    if (g_paused) {
        g_paused = false;
        emscripten_resume_main_loop();
    }
}
EMSCRIPTEN_KEEPALIVE const char* k3_report_json() {
    g_json = g_app ? g_app->report_json() : std::string();
    return g_json.c_str();
}
EMSCRIPTEN_KEEPALIVE const char* k3_baseline_json() {
    static std::string j;
    j = g_app ? g_app->baseline_json() : std::string();
    return j.c_str();
}
EMSCRIPTEN_KEEPALIVE const char* k3_module_id() {
    static std::string id;
    id = g_app ? g_app->module_id() : "";
    return id.c_str();
}
EMSCRIPTEN_KEEPALIVE const char* k3_widget_rect(const char* key) {
    static std::string r;
    r = g_app ? g_app->widget_rect(key) : "";
    return r.c_str();
}
// web/k3.js and platform_web.cpp deliver fetched data files here.
EMSCRIPTEN_KEEPALIVE void k3_data_file_loaded(const char* name, const char* bytes, int size,
                                              const char* error) {
    k3::ui::platform::data_file_arrived(name, bytes, size_t(size > 0 ? size : 0), error);
    k3_wake();
}
EMSCRIPTEN_KEEPALIVE const char* k3_view_state() {
    static std::string j;
    j = g_app ? g_app->view_state_json() : "";
    return j.c_str();
}
// web/k3.js: a file picked with the Import button or dropped on the page (ui/import.cpp).
EMSCRIPTEN_KEEPALIVE void k3_import(const char* name, const char* bytes, int size) {
    if (g_app) g_app->import_file(name, std::string(bytes, size_t(size > 0 ? size : 0)));
    k3_wake();
}
// web/k3.js: what happened before a restart (the run that stopped the previous page).
EMSCRIPTEN_KEEPALIVE void k3_notice(const char* text) {
    if (g_app) g_app->set_notice(text);
    k3_wake();
}
EMSCRIPTEN_KEEPALIVE int k3_frame_count() { return g_frames; }
EMSCRIPTEN_KEEPALIVE int k3_busy() { return g_app && g_app->busy() ? 1 : 0; }
EMSCRIPTEN_KEEPALIVE int k3_ready() { return g_ready ? 1 : 0; }
// The user edited the URL or went back: open what the hash says.
EMSCRIPTEN_KEEPALIVE void k3_hash_changed() {
    if (g_app) g_app->open_link(k3::ui::platform::url_hash());
    k3_wake();
}
}

int main() {
    k3::set_disk_files(false);  // linked without a file system: see core/base/data_files.h
    std::set_new_handler(out_of_memory);
    if (!glfwInit()) return 1;
    glfwWindowHint(GLFW_CLIENT_API, GLFW_OPENGL_ES_API);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    g_window =
        glfwCreateWindow(k3js_canvas_width(), k3js_canvas_height(), "K3 Serve Explorer", nullptr, nullptr);
    if (!g_window) return 1;
    glfwMakeContextCurrent(g_window);
    IMGUI_CHECKVERSION();
    ImGui::SetAllocatorFunctions(imgui_alloc, imgui_free);
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
    ImGui_ImplGlfw_InitForOpenGL(g_window, true);
    ImGui_ImplOpenGL3_Init("#version 300 es");
    static k3::ui::App app;
    g_app = &app;
    app.open_link(k3::ui::platform::url_hash());
    emscripten_set_main_loop(frame, 0, true);
    return 0;
}
