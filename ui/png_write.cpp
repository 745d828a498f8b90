#include "ui/png_write.h"

// Debian's libstb-dev (copied into .deps/include by scripts/setup.sh): deflated PNGs, header only.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace k3::ui {

bool write_png(const std::string& path, int width, int height, const std::vector<unsigned char>& rgba) {
    if (width <= 0 || height <= 0 || rgba.size() != size_t(width) * size_t(height) * 4) return false;
    stbi_write_png_compression_level = 9;  // screenshots are mostly flat colour: the smallest file pays
    return stbi_write_png(path.c_str(), width, height, 4, rgba.data(), width * 4) != 0;
}

}  // namespace k3::ui
