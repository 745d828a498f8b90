// What differs between the desktop app and the web page, behind one small interface.
// platform_desktop.cpp and platform_web.cpp implement it; the rest of ui/ is shared.
#pragma once

#include <string>

namespace k3::ui::platform {

const char* build_name();  // "native", "wasm-simd", "wasm-scalar"
float content_scale();     // device pixels per layout pixel (high-DPI)

// URL hash of the view. On the desktop there is no URL: the hash is kept in memory and shown
// as a link text to copy.
std::string url_hash();
void set_url_hash(const std::string& hash);       // replaces the hash, no history entry
std::string share_link(const std::string& hash);  // full link to the view

// Save a file: a download on the web, a file in the current folder on the desktop.
// Returns a message for the user ("Saved /path/k3-memory.json", "Downloading k3-memory.json").
std::string save_file(const std::string& name, const std::string& mime, const std::string& content);
bool copy_to_clipboard(const std::string& text);
// The Import button: on the web, opens the browser's file picker (the file comes back through
// App::import_file) and returns ""; on the desktop, which has no picker, returns how to import there.
std::string pick_import_file();

// Data files a run needs (Experiment::data_files). On the web: starts fetching "data/NAME" from the
// page's own server unless it is already registered or on its way, and returns true while the run
// must wait for it. On the desktop the core reads files from disk: always false.
bool fetch_data_file(const std::string& name);
// Why fetching NAME failed ("HTTP 404"), or "" if it did not fail.
std::string data_file_error(const std::string& name);
// What the core is running now ("" when nothing) and the link of the result on screen. If the web
// page's WebAssembly stops (out of memory), the page names the run and offers to reopen that result;
// the desktop app needs neither.
void run_state(const std::string& running, const std::string& result_link);

#ifdef __EMSCRIPTEN__
void data_file_arrived(const std::string& name, const char* bytes, size_t size, const std::string& error);
#endif

}  // namespace k3::ui::platform
