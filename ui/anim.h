// Views that animate (ring playback) ask for more frames; the main loops keep drawing while asked.
#pragma once

namespace k3::ui {

void request_frames();      // call during a frame to get another one soon
bool take_frame_request();  // main loop: was one requested during the last frame? (clears it)

}  // namespace k3::ui
