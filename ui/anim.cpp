#include "ui/anim.h"

namespace k3::ui {

static bool g_requested = false;

void request_frames() { g_requested = true; }

bool take_frame_request() {
    const bool r = g_requested;
    g_requested = false;
    return r;
}

}  // namespace k3::ui
