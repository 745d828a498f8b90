// Data files the core reads (request traces, golden vectors) by name. The CLI and the desktop app
// read them from disk; the web page has no file system, so it fetches the files a run needs from
// its own server and registers their bytes here before the run starts (Experiment::data_files).
#pragma once

#include <memory>
#include <string>

namespace k3 {

void register_data_file(const std::string& name, std::string bytes);
// The registered bytes of `name`, or null if nothing was registered under it.
std::shared_ptr<const std::string> registered_data_file(const std::string& name);

// Whether the core may open files on disk (true unless turned off). The web page is linked without a
// file system: a file call there does not fail, it throws inside Emscripten's runtime and stops the
// page. So the page turns this off before anything runs, and every reader takes registered data
// files only and refuses any other name with a message, before touching a file.
void set_disk_files(bool allowed);
bool disk_files();

}  // namespace k3
