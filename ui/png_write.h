// The desktop app's PNG writer (--screenshot and the PNG export): RGBA8, deflated.
#pragma once

#include <string>
#include <vector>

namespace k3::ui {

// `rgba` is top-to-bottom rows of width*4 bytes. Returns false if the file cannot be written.
bool write_png(const std::string& path, int width, int height, const std::vector<unsigned char>& rgba);

}  // namespace k3::ui
