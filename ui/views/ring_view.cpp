// A ring buffer over time: slots around a circle, the occupied span coloured from tail to head,
// a step slider with playback, and the event of the current step.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "core/base/clock.h"

static constexpr float IM_PI = 3.14159265358979f;
#include "ui/anim.h"
#include "ui/theme.h"
#include "ui/views/views.h"
#include "ui/widgets.h"

namespace k3::ui {

void draw_ring(const Ring& g, int index) {
    const Theme& t = theme();
    ImGui::PushID(index);
    const int nf = int(g.frames.size());
    if (g.capacity <= 0 || nf == 0) {
        ImGui::TextDisabled("(empty ring)");
        ImGui::PopID();
        return;
    }
    ImGuiStorage* st = ImGui::GetStateStorage();
    const ImGuiID id_frame = ImGui::GetID("frame"), id_play = ImGui::GetID("play"), id_t = ImGui::GetID("t");
    int frame = std::clamp(st->GetInt(id_frame, 0), 0, nf - 1);
    bool playing = st->GetBool(id_play, false);
    if (playing) {
        request_frames();
        const float now = float(now_ms());
        if (now - st->GetFloat(id_t, 0) > 350) {
            st->SetFloat(id_t, now);
            frame = frame + 1 < nf ? frame + 1 : 0;
        }
    }
    if (ImGui::Button(playing ? "Pause" : "Play")) playing = !playing;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(std::max(t.px(120), ImGui::GetContentRegionAvail().x - t.px(10)));
    ImGui::SliderInt("##step", &frame, 0, nf - 1, "step %d");
    st->SetInt(id_frame, frame);
    st->SetBool(id_play, playing);

    const RingFrame& f = g.frames[size_t(frame)];
    const float size = std::min(t.px(240), ImGui::GetContentRegionAvail().x * 0.45f);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(size, size));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 c(p0.x + size * 0.5f, p0.y + size * 0.5f);
    const float r1 = size * 0.48f, r0 = size * 0.30f;
    const int L = g.capacity;
    const float gap = L <= 64 ? 0.02f : 0.0f;
    for (int s = 0; s < L; ++s) {
        const int rel = ((s - f.tail) % L + L) % L;
        const bool used = rel < f.count;
        const float a0 = -IM_PI / 2 + 2 * IM_PI * float(s) / float(L) + gap;
        const float a1 = -IM_PI / 2 + 2 * IM_PI * float(s + 1) / float(L) - gap;
        const ImU32 col = used ? (rel == f.count - 1 ? t.accent : with_alpha(t.accent, 0.55f)) : t.panel_alt;
        dl->PathArcTo(c, r1, a0, a1, 8);
        dl->PathArcTo(c, r0, a1, a0, 8);
        dl->PathFillConvex(col);
    }
    // Tail and head markers.
    auto mark = [&](int slot, const char* text, ImU32 col) {
        const float a = -IM_PI / 2 + 2 * IM_PI * (float(slot) + 0.5f) / float(L);
        const ImVec2 q(c.x + std::cos(a) * (r1 + t.px(8)), c.y + std::sin(a) * (r1 + t.px(8)));
        dl->AddCircleFilled(q, t.px(3.5f), col);
        dl->AddText(ImVec2(q.x + t.px(5), q.y - t.px(7)), col, text);
    };
    mark(f.tail % L, "tail", t.text_dim);
    if (f.count > 0) mark((f.tail + f.count - 1) % L, "head", t.accent);
    char mid[64];
    std::snprintf(mid, sizeof mid, "%d / %d", f.count, L);
    ImGui::PushFont(fonts().bold);
    const ImVec2 ms = ImGui::CalcTextSize(mid);
    dl->AddText(ImVec2(c.x - ms.x * 0.5f, c.y - ms.y * 0.5f), t.text, mid);
    ImGui::PopFont();
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::Text("step %d of %d", frame, nf - 1);
    text_wrapped_colored(t.text, f.event);
    ImGui::TextDisabled("occupied %d of %d records", f.count, L);
    ImGui::EndGroup();
    ImGui::PopID();
}

}  // namespace k3::ui
