#include <GLFW/glfw3.h>

#include <cstdio>
#include <filesystem>

#include "ui/platform.h"

namespace k3::ui::platform {

static std::string g_hash;

const char* build_name() { return K3_BUILD_NAME; }

float content_scale() {
    GLFWwindow* w = glfwGetCurrentContext();
    float x = 1, y = 1;
    if (w) glfwGetWindowContentScale(w, &x, &y);
    return x > 0 ? x : 1.0f;
}

std::string url_hash() { return g_hash; }
void set_url_hash(const std::string& hash) { g_hash = hash; }
std::string share_link(const std::string& hash) {
    return "k3explorer" + std::string(" --link '") + hash + "'";
}

std::string save_file(const std::string& name, const std::string&, const std::string& content) {
    std::error_code ec;
    const auto path = std::filesystem::absolute(name, ec);
    FILE* f = std::fopen(path.string().c_str(), "wb");
    if (!f) return "Could not write " + path.string();
    const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    const bool ok = (std::fclose(f) == 0) && written;
    return ok ? "Saved " + path.string() : "Could not write " + path.string();
}

bool copy_to_clipboard(const std::string& text) {
    GLFWwindow* w = glfwGetCurrentContext();
    if (!w) return false;
    glfwSetClipboardString(w, text.c_str());
    return true;
}

std::string pick_import_file() {
    return "Drop a trace (.jsonl), a model's config.json or an exported report onto the window, or start "
           "the app with --import PATH";
}

bool fetch_data_file(const std::string&) { return false; }
std::string data_file_error(const std::string&) { return {}; }
void run_state(const std::string&, const std::string&) {}

}  // namespace k3::ui::platform
