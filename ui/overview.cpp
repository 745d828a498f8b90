// The Overview page: what the project is, live headline figures (each linking to its module) and
// the serving components with their modules.
#include <imgui.h>

#include <algorithm>

#include "core/base/clock.h"
#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/experiments/url_state.h"
#include "ui/app.h"
#include "ui/doc_view.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace k3::ui {

namespace {

const char* kIntro =
    "Hybrid models such as Kimi Linear interleave Kimi Delta Attention (KDA) layers, which keep a fixed-size "
    "recurrent state per sequence, with full-attention (MLA) layers, which keep a growing KV cache. The "
    "fixed "
    "state breaks the assumptions of today's serving infrastructure: a state cannot be cut at a prefix, two "
    "states "
    "cannot be added, and a request that is split, paused, resumed, verified speculatively or moved must get "
    "back "
    "exactly the state it had.\n\n"
    "This explorer runs a real, scaled-down serving core for such a model in your browser (WebAssembly) or "
    "on your "
    "desktop: every figure on these pages is computed live by the same C++ code the command-line tool runs, "
    "and "
    "every module checks its own invariants; each check is proven to fail on a run corrupted on purpose "
    "(k3cli audit-checks), and the texts quote the figures of the current run.";

const char* kHonesty =
    "- The runnable model is small and has seeded random weights; every exactness claim is checked on it.\n"
    "- Memory accounting uses the published configurations (Kimi-Linear-48B-A3B, Qwen3-Next-80B-A3B).\n"
    "- Times for GPU-class hardware are roofline estimates from a hardware preset and are labelled so; times "
    "for "
    "this device are measured live in the running build.";

struct ComponentText {
    const char* id;
    const char* what;
};
const ComponentText kComponents[] = {
    {"foundation",
     "The KDA kernels under everything, and what a fixed state costs against a growing KV cache."},
    {"page pool", "One memory pool for heterogeneous caches: KV pages and state slots."},
    {"prefix caching",
     "Dual-granularity prefix caching: KV at page granularity, states at checkpoint granularity."},
    {"speculative decoding",
     "Projection replay instead of a state snapshot per draft token, and the ring buffer of records."},
    {"context parallelism", "Splitting a prompt over ranks when states cannot be added: affine composition."},
    {"request lifecycle", "Split, pause, resume and migrate a request with its exact state."},
    {"fleet scheduling",
     "Routing with instance affinity, budget isolation between tenants, faults and recovery, and what a "
     "deployment costs."},
    {"opposition", "Break-even maps of every method above, and a verdict on when to use each."},
};

}  // namespace

// A clickable card: the figure, what it means, and the module it comes from.
bool App::overview_card(const OverviewFigure& fig, float width) {
    const Theme& t = theme();
    const Fonts& f = fonts();
    ImGui::PushID(&fig);
    const float pad = t.px(14);
    ImGui::PushFont(f.small);
    const float cap_h = ImGui::CalcTextSize(fig.caption.c_str(), nullptr, false, width - 2 * pad).y;
    ImGui::PopFont();
    const float h = t.px(44) + cap_h + t.px(40);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const bool clicked = ImGui::InvisibleButton("card", ImVec2(width, h));
    const bool hov = ImGui::IsItemHovered();
    if (hov) ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, ImVec2(p0.x + width, p0.y + h), hov ? t.panel_alt : t.panel, t.px(6));
    dl->AddRect(p0, ImVec2(p0.x + width, p0.y + h), hov ? t.accent : t.border, t.px(6));
    const auto [value, unit] = value_and_unit(fig.scalar);
    ImGui::PushFont(f.headline);
    const ImVec2 vs = ImGui::CalcTextSize(value.c_str());
    dl->AddText(ImVec2(p0.x + pad, p0.y + t.px(10)), t.text, value.c_str());
    ImGui::PopFont();
    ImGui::PushFont(f.body);
    if (!unit.empty())
        dl->AddText(ImVec2(p0.x + pad + vs.x + t.px(6),
                           p0.y + t.px(10) + vs.y - ImGui::GetTextLineHeight() - t.px(3)),
                    t.text_dim, unit.c_str());
    ImGui::PopFont();
    ImGui::PushFont(f.small);
    dl->AddText(nullptr, 0, ImVec2(p0.x + pad, p0.y + t.px(48)), t.text, fig.caption.c_str(), nullptr,
                width - 2 * pad);
    const std::string from =
        ellipsize("Module " + std::to_string(fig.exp->number) + " \xc2\xb7 " + fig.exp->title,
                  width - 2 * pad - t.px(24)) +
        "  \xe2\x86\x92";
    dl->AddText(ImVec2(p0.x + pad, p0.y + h - t.px(24)), t.accent, from.c_str());
    ImGui::PopFont();
    ImGui::PopID();
    return clicked;
}

// The Overview's headline figures, computed live with the modules' own code (cheap runs), run in
// slices like any run: the page is drawn at once, stays responsive, and the cards fill in.
void App::overview_step(double budget_ms) {
    if (overview_built_ || !overview_shown_) return;
    std::vector<std::pair<const Experiment*, const Headline*>> all;  // the lead figures first
    for (const bool lead : {true, false})
        for (const auto& e : experiments())
            for (const auto& h : e.headlines)
                if (h.lead == lead) all.push_back({&e, &h});
    overview_total_ = all.size();
    const Stopwatch sw;
    while (overview_next_ < all.size() && sw.ms() < budget_ms) {
        const auto [e, h] = all[overview_next_];
        if (!overview_run_) {
            ParsedParams pp = parse_params(e->params, h->params, RangePolicy::strict);
            if (!pp.ok()) {
                ++overview_next_;
                continue;
            }
            overview_link_ = format_url_hash(e->id, &pp.params);
            overview_run_ = e->start(pp.params);
        }
        if (overview_run_->step(budget_ms - sw.ms()) < 1.0) break;
        if (const Scalar* s = overview_run_->report().find_scalar(h->scalar_key))
            overview_.push_back({e, h->caption, *s, overview_link_});
        overview_run_.reset();
        ++overview_next_;
    }
    overview_built_ = overview_next_ >= all.size();
}

void App::draw_overview() {
    const Theme& t = theme();
    overview_shown_ = true;  // the figures are computed from the next frame on (overview_step)
    ImGui::BeginChild("overview", ImVec2(0, 0), false);
    ImGui::PushFont(fonts().title);
    ImGui::TextUnformatted("K3 Serve Explorer");
    ImGui::PopFont();
    text_wrapped_colored(t.text_dim,
                         "A serving core for hybrid linear-attention models, and an explorer on top of it");
    ImGui::Dummy(ImVec2(0, t.px(4)));
    draw_doc(kIntro);

    if (!overview_.empty() || !overview_built_) {
        section_heading("Headline figures (computed live; click to open the module)");
        if (!overview_built_) {
            const std::string label = "computing " + std::to_string(overview_.size() + 1) + " of " +
                                      std::to_string(overview_total_);
            ImGui::ProgressBar(float(overview_.size()) / float(std::max<size_t>(1, overview_total_)),
                               ImVec2(t.px(320), 0), label.c_str());
        }
        const float avail = ImGui::GetContentRegionAvail().x;
        const float gap = t.px(10);
        const int per_row =
            std::max(1, std::min(int(overview_.size()), int((avail + gap) / (t.px(300) + gap))));
        const float w = (avail - gap * float(per_row - 1)) / float(per_row);
        for (size_t i = 0; i < overview_.size(); ++i) {
            if (i % size_t(per_row)) ImGui::SameLine(0, gap);
            if (overview_card(overview_[i], w)) {
                open_link(overview_[i].link);
                ImGui::EndChild();
                return;
            }
        }
    }

    section_heading("Components");
    for (const auto& c : components()) {
        std::vector<const Experiment*> mods;
        for (const auto& e : experiments())
            if (e.component == c.id) mods.push_back(&e);
        if (mods.empty()) continue;  // modules not built yet are not shown
        ImGui::PushFont(fonts().bold);
        ImGui::TextUnformatted(c.title);
        ImGui::PopFont();
        for (const auto& ct : kComponents)
            if (std::string(ct.id) == c.id) text_wrapped_colored(t.text_dim, ct.what);
        for (const Experiment* e : mods) {
            ImGui::PushID(e->id.c_str());
            const std::string label = std::to_string(e->number) + "  " + e->title;
            if (ImGui::Button(label.c_str())) {
                link_issues_.clear();
                select(e);
                ImGui::PopID();
                ImGui::EndChild();
                return;
            }
            ImGui::SameLine();
            text_wrapped_colored(t.text_dim, e->purpose);
            ImGui::PopID();
        }
        ImGui::Dummy(ImVec2(0, t.px(6)));
    }
    section_heading("What this is, and is not");
    draw_doc(kHonesty);
    ImGui::EndChild();
}

}  // namespace k3::ui
