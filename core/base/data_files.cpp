#include "core/base/data_files.h"

#include <map>

namespace k3 {

static std::map<std::string, std::shared_ptr<const std::string>>& files() {
    static std::map<std::string, std::shared_ptr<const std::string>> f;
    return f;
}

void register_data_file(const std::string& name, std::string bytes) {
    files()[name] = std::make_shared<const std::string>(std::move(bytes));
}

std::shared_ptr<const std::string> registered_data_file(const std::string& name) {
    const auto it = files().find(name);
    return it == files().end() ? nullptr : it->second;
}

static bool g_disk_files = true;

void set_disk_files(bool allowed) { g_disk_files = allowed; }
bool disk_files() { return g_disk_files; }

}  // namespace k3
