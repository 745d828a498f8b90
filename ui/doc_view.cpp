#include "ui/doc_view.h"

#include <imgui.h>

#include "core/base/markdown.h"
#include "core/experiments/doc_figures.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

void draw_doc(const std::string& markdown, const Report* report) {
    const Theme& t = theme();
    const float max_w = t.px(820);
    const float wrap = std::min(ImGui::GetContentRegionAvail().x, max_w);
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap);
    const std::vector<MdBlock> blocks = parse_markdown(fill_figures(markdown, report));
    for (size_t i = 0; i < blocks.size(); ++i) {
        const MdBlock& b = blocks[i];
        // A gap between blocks, none inside a list.
        if (i > 0 && !(b.kind == MdBlock::bullet && blocks[i - 1].kind == MdBlock::bullet))
            ImGui::Dummy(ImVec2(0, t.px(6)));
        if (b.kind == MdBlock::heading) {
            ImGui::PushFont(fonts().bold);
            ImGui::TextUnformatted(b.text.c_str());
            ImGui::PopFont();
        } else if (b.kind == MdBlock::bullet) {
            ImGui::Bullet();
            ImGui::TextUnformatted(b.text.c_str());
        } else {
            ImGui::TextUnformatted(b.text.c_str());
        }
    }
    ImGui::PopTextWrapPos();
}

}  // namespace k3::ui
