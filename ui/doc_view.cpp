#include "ui/doc_view.h"

#include <imgui.h>

#include <sstream>

#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

void draw_doc(const std::string& text) {
    const Theme& t = theme();
    const float max_w = t.px(820);
    const float wrap = std::min(ImGui::GetContentRegionAvail().x, max_w);
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap);
    std::istringstream in(text);
    std::string line;
    bool gap = false;
    while (std::getline(in, line)) {
        if (line.empty()) {
            gap = true;
            continue;
        }
        if (gap) ImGui::Dummy(ImVec2(0, t.px(6)));
        gap = false;
        if (line.rfind("## ", 0) == 0) {
            ImGui::PushFont(fonts().bold);
            ImGui::TextUnformatted(line.c_str() + 3);
            ImGui::PopFont();
        } else if (line.rfind("- ", 0) == 0) {
            ImGui::Bullet();
            ImGui::TextUnformatted(line.c_str() + 2);
        } else {
            ImGui::TextUnformatted(line.c_str());
        }
    }
    ImGui::PopTextWrapPos();
}

}  // namespace k3::ui
