#include <emscripten.h>

#include <cstdlib>

#include "ui/platform.h"

// JavaScript side of the platform layer; web/k3.js holds the rest of the glue.
EM_JS(char*, k3js_get_hash, (), {
    const s = window.location.hash || "";
    const n = lengthBytesUTF8(s) + 1;
    const p = _malloc(n);
    stringToUTF8(s, p, n);
    return p;
});
EM_JS(void, k3js_set_hash, (const char* h), {
    const s = UTF8ToString(h);
    if (window.location.hash !== s) history.replaceState(null, "", s.length > 1 ? s : window.location.pathname);
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
EM_JS(double, k3js_dpr, (), { return window.devicePixelRatio || 1; });

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

}  // namespace k3::ui::platform
