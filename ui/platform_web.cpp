#include <emscripten.h>

#include <cstdlib>
#include <map>
#include <set>

#include "core/base/data_files.h"

#include "ui/platform.h"

// JavaScript side of the platform layer; web/k3.js holds the rest of the glue.
// JavaScript inside: clang-format would break its "=>" and "!==".
// clang-format off
EM_JS(char*, k3js_get_hash, (), {
    const s = window.location.hash || "";
    const n = lengthBytesUTF8(s) + 1;
    const p = _malloc(n);
    stringToUTF8(s, p, n);
    return p;
});
EM_JS(void, k3js_set_hash, (const char* h), {
    const s = UTF8ToString(h);
    if (window.location.hash !== s)
        history.replaceState(null, "", s.length > 1 ? s : window.location.pathname);
});
EM_JS(char*, k3js_page_url, (), {
    const s = window.location.origin + window.location.pathname;
    const n = lengthBytesUTF8(s) + 1;
    const p = _malloc(n);
    stringToUTF8(s, p, n);
    return p;
});
EM_JS(void, k3js_download, (const char* name, const char* mime, const char* data, int size), {
    const bytes = HEAPU8.slice(data, data + size);
    const blob = new Blob([bytes], {type: UTF8ToString(mime)});
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = UTF8ToString(name);
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
});
EM_JS(int, k3js_copy, (const char* text), {
    const s = UTF8ToString(text);
    if (!navigator.clipboard) return 0;
    navigator.clipboard.writeText(s).catch(() => {});
    return 1;
});
EM_JS(void, k3js_pick_import, (), { document.getElementById("k3-import").click(); });
EM_JS(double, k3js_dpr, (), { return window.devicePixelRatio || 1; });
EM_JS(void, k3js_fetch, (const char* name_ptr), {
    const name = UTF8ToString(name_ptr);
    const done = (ptr, size, error) => {
        const n = lengthBytesUTF8(name) + 1, np = _malloc(n);
        stringToUTF8(name, np, n);
        const e = lengthBytesUTF8(error) + 1, ep = _malloc(e);
        stringToUTF8(error, ep, e);
        Module._k3_data_file_loaded(np, ptr, size, ep);
        _free(np);
        _free(ep);
    };
    fetch("data/" + encodeURIComponent(name))
        .then((r) => r.ok ? r.arrayBuffer() : Promise.reject(new Error("HTTP " + r.status)))
        .then((buf) => {
            const bytes = new Uint8Array(buf);
            const p = _malloc(Math.max(1, bytes.length));
            if (!p) return done(0, 0, "no memory left for " + bytes.length + " bytes");
            HEAPU8.set(bytes, p);
            done(p, bytes.length, "");
            _free(p);
        })
        .catch((err) => done(0, 0, String(err && err.message || err)));
});
// web/k3.js reads these when the WebAssembly stops, to say what was running and offer the result.
EM_JS(void, k3js_run_state, (const char* running, const char* result_link), {
    window.k3.running = UTF8ToString(running);
    window.k3.resultLink = UTF8ToString(result_link);
});
// clang-format on

namespace k3::ui::platform {

static std::string take(char* p) {
    std::string s(p);
    std::free(p);
    return s;
}

const char* build_name() { return K3_BUILD_NAME; }
float content_scale() { return float(k3js_dpr()); }
std::string url_hash() { return take(k3js_get_hash()); }
void set_url_hash(const std::string& hash) { k3js_set_hash(hash.c_str()); }
std::string share_link(const std::string& hash) { return take(k3js_page_url()) + hash; }

std::string save_file(const std::string& name, const std::string& mime, const std::string& content) {
    k3js_download(name.c_str(), mime.c_str(), content.data(), int(content.size()));
    return "Downloading " + name;
}

bool copy_to_clipboard(const std::string& text) { return k3js_copy(text.c_str()) != 0; }

std::string pick_import_file() {
    k3js_pick_import();
    return {};
}

void run_state(const std::string& running, const std::string& result_link) {
    k3js_run_state(running.c_str(), result_link.c_str());
}

static std::set<std::string> g_fetching;
static std::map<std::string, std::string> g_fetch_errors;

bool fetch_data_file(const std::string& name) {
    if (registered_data_file(name) || g_fetch_errors.count(name)) return false;
    if (g_fetching.insert(name).second) k3js_fetch(name.c_str());
    return true;
}

std::string data_file_error(const std::string& name) {
    const auto it = g_fetch_errors.find(name);
    return it == g_fetch_errors.end() ? std::string() : it->second;
}

void data_file_arrived(const std::string& name, const char* bytes, size_t size, const std::string& error) {
    g_fetching.erase(name);
    if (error.empty())
        register_data_file(name, std::string(bytes, size));
    else
        g_fetch_errors[name] = error;
}

}  // namespace k3::ui::platform
