// The frame: one full-screen window with the sidebar on the left and the current page on the right.
#include <imgui.h>

#include "core/base/clock.h"
#include "core/experiments/registry.h"
#include "ui/anim.h"
#include "ui/app.h"
#include "ui/platform.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

void App::draw() {
    const Theme& t = theme();
    widget_rects_.clear();
    shown_messages_.clear();
    handle_keys();
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(vp->WorkPos);
    ImGui::SetNextWindowSize(vp->WorkSize);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
    ImGui::Begin("K3 Serve Explorer", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                     ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollbar);
    ImGui::PopStyleVar();

    const float side_w = std::min(t.px(270), vp->WorkSize.x * 0.28f);
    draw_sidebar(side_w);
    ImGui::SameLine(0, 0);

    ImGui::PushStyleColor(ImGuiCol_ChildBg, t.bg);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(t.px(20), t.px(14)));
    ImGui::BeginChild("page", ImVec2(0, 0), ImGuiChildFlags_AlwaysUseWindowPadding);
    ImGui::PopStyleVar();
    if (!notice_.empty()) {
        shown_messages_.push_back(notice_);
        if (banner(t.warn, notice_, "notice", true)) notice_.clear();
    }
    draw_link_issues();
    if (exp_)
        draw_module(*exp_);
    else
        draw_overview();
    ImGui::EndChild();
    ImGui::PopStyleColor();

    // Toast in the bottom-right corner.
    if (!toast_.empty() && now_ms() < toast_until_) {
        ImGui::PushFont(fonts().small);
        const ImVec2 ts = ImGui::CalcTextSize(toast_.c_str());
        const ImVec2 p1(vp->WorkPos.x + vp->WorkSize.x - t.px(16), vp->WorkPos.y + vp->WorkSize.y - t.px(16));
        const ImVec2 p0(p1.x - ts.x - t.px(24), p1.y - ts.y - t.px(16));
        ImDrawList* dl = ImGui::GetForegroundDrawList();
        dl->AddRectFilled(p0, p1, t.panel_alt, t.px(6));
        dl->AddRect(p0, p1, t.accent, t.px(6));
        dl->AddText(ImVec2(p0.x + t.px(12), p0.y + t.px(8)), t.text, toast_.c_str());
        ImGui::PopFont();
    }
    ImGui::End();
    animating_ = take_frame_request();
}

// What became of the last link: the header says whether any of it was applied, each line what became of
// one part. In a link that was followed, an error is a part that was not applied (url_state.h: the
// parameter keeps its default) and a warning one applied as adjusted (clamped, read literally). A
// hostile link can carry hundreds of problems and values of thousands of characters, so the banner
// shows a few lines, each cut to a readable length.
void App::draw_link_issues() {
    if (link_issues_.empty()) return;
    const Theme& t = theme();
    constexpr size_t kLines = 6, kChars = 200;
    std::string text = link_applied_
                           ? "The link had problems; everything else in it was applied:"
                           : "The link was not opened, none of it was applied; the Overview is shown:";
    bool any_error = false;
    for (size_t n = 0; n < link_issues_.size(); ++n) {
        const ParamIssue& i = link_issues_[n];
        any_error |= i.level == ParamIssue::error;
        if (n == kLines) {
            text += "\n- and " + std::to_string(link_issues_.size() - kLines) + " more problems";
            break;
        }
        std::string line = (link_applied_ && i.level == ParamIssue::error ? "ignored: " : "") + i.message;
        if (line.size() > kChars) line = line.substr(0, kChars - 3) + "...";
        text += "\n- " + line;
    }
    shown_messages_.push_back(text);
    if (banner(any_error ? t.bad : t.warn, text, "link_issues", true)) link_issues_.clear();
}

void App::draw_message(unsigned color, const std::string& text) {
    text_wrapped_colored(color, text);
    shown_messages_.push_back(text);
}

void App::handle_keys() {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.WantTextInput) return;
    const bool ctrl = io.KeyCtrl || io.KeySuper;
    int dir = 0;
    if ((ctrl && ImGui::IsKeyPressed(ImGuiKey_DownArrow)) || ImGui::IsKeyPressed(ImGuiKey_RightBracket))
        dir = 1;
    if ((ctrl && ImGui::IsKeyPressed(ImGuiKey_UpArrow)) || ImGui::IsKeyPressed(ImGuiKey_LeftBracket))
        dir = -1;
    if (!dir) return;
    // Order: Overview, then modules in sidebar order.
    std::vector<const Experiment*> order{nullptr};
    for (const auto& c : components())
        for (const auto& e : experiments())
            if (e.component == c.id) order.push_back(&e);
    int cur = 0;
    for (int i = 0; i < int(order.size()); ++i)
        if (order[size_t(i)] == exp_) cur = i;
    const int next = std::clamp(cur + dir, 0, int(order.size()) - 1);
    if (next != cur) {
        link_issues_.clear();
        select(order[size_t(next)]);
    }
}

void App::draw_sidebar(float width) {
    const Theme& t = theme();
    ImGui::PushStyleColor(ImGuiCol_ChildBg, t.panel);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(t.px(12), t.px(14)));
    ImGui::BeginChild("sidebar", ImVec2(width, 0), ImGuiChildFlags_AlwaysUseWindowPadding);
    ImGui::PopStyleVar();
    ImGui::PushFont(fonts().title);
    ImGui::TextUnformatted("K3 Serve Explorer");
    ImGui::PopFont();
    ImGui::PushFont(fonts().small);
    text_wrapped_colored(t.text_dim, "Serving hybrid linear-attention models, measured");
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(0, t.px(6)));

    auto item = [&](const Experiment* e, const std::string& label) {
        const bool sel = exp_ == e;
        ImGui::PushID(e ? e->id.c_str() : "overview");
        if (sel) ImGui::PushStyleColor(ImGuiCol_Header, with_alpha(t.accent, 0.22f));
        // Long titles are cut with an ellipsis; the tooltip has the whole title and the purpose.
        const std::string shown = ellipsize(label, ImGui::GetContentRegionAvail().x - t.px(6));
        if (ImGui::Selectable(shown.c_str(), sel, 0, ImVec2(0, t.px(24))) && !sel) {
            link_issues_.clear();
            select(e);
        }
        if (sel) ImGui::PopStyleColor();
        if (e && ImGui::IsItemHovered(ImGuiHoveredFlags_DelayNormal))
            tooltip_wrapped(e->title + "\n\n" + e->purpose);
        ImGui::PopID();
    };
    // Tight rows so that all fourteen modules and the footer fit a 800-pixel-high window.
    ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(ImGui::GetStyle().ItemSpacing.x, t.px(2)));
    item(nullptr, "Overview");
    for (const auto& c : components()) {
        bool any = false;
        for (const auto& e : experiments()) any |= e.component == c.id;
        if (!any) continue;  // a component whose modules are not built yet is not shown
        ImGui::Dummy(ImVec2(0, t.px(8)));
        ImGui::PushFont(fonts().small);
        ImGui::PushStyleColor(ImGuiCol_Text, t.text_dim);
        ImGui::TextUnformatted(c.title);
        ImGui::PopStyleColor();
        ImGui::PopFont();
        for (const auto& e : experiments())
            if (e.component == c.id) item(&e, std::to_string(e.number) + "  " + e.title);
    }
    ImGui::PopStyleVar();

    // Footer: theme, build, keyboard hint.
    const float footer_h = t.px(78);
    if (ImGui::GetContentRegionAvail().y > footer_h)
        ImGui::SetCursorPosY(ImGui::GetWindowHeight() - footer_h);
    ImGui::Separator();
    if (ImGui::SmallButton(dark ? "Light theme" : "Dark theme")) {
        dark = !dark;
        style_dirty = true;
    }
    ImGui::PushFont(fonts().small);
    ImGui::TextDisabled("build %s", platform::build_name());
    ImGui::TextDisabled("Ctrl+Up/Down or [ ] : modules");
    ImGui::PopFont();
    ImGui::EndChild();
    ImGui::PopStyleColor();
}

}  // namespace k3::ui
