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

}  // namespace k3
