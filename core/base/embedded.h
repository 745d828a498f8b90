// Files embedded in the binary at build time (cmake/embed_files.sh): fonts for the UI, the
// modules' Markdown texts for the core.
#pragma once

#include <cstddef>

namespace k3 {

struct EmbeddedFile {
    const char* name;           // as given to embed_files.sh
    const unsigned char* data;  // `size` bytes, then a 0 byte
    size_t size;
};

}  // namespace k3
