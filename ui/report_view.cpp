// The generic report view: headline figures, checks, plots, custom views (grids, heat maps),
// tables, other figures, notes, and the wall-clock part measured in this build.
#include "ui/report_view.h"

#include <imgui.h>

#include <algorithm>
#include <map>

#include "core/base/numfmt.h"
#include "core/experiments/compare.h"
#include "ui/plot.h"
#include "ui/theme.h"
#include "ui/views/views.h"
#include "ui/widgets.h"

namespace k3::ui {

// Series with the same plot title share a chart; `titles` (when given) gets the titles in order of
// first appearance.
static std::map<std::string, std::vector<const Series*>> plot_groups(const std::vector<Series>& series,
                                                                     std::vector<std::string>* titles) {
    std::map<std::string, std::vector<const Series*>> groups;
    for (const auto& s : series) {
        const std::string key = s.plot.empty() ? s.name : s.plot;
        if (titles && !groups.count(key)) titles->push_back(key);
        groups[key].push_back(&s);
    }
    return groups;
}

// The baseline's series (may be null) join the current run's chart of their title; a title only the
// baseline has is not drawn.
static void draw_plots(const std::vector<Series>& series, const std::vector<Series>* baseline,
                       const char* id_prefix) {
    std::vector<std::string> titles;
    auto groups = plot_groups(series, &titles);
    if (titles.empty()) return;
    auto base = baseline ? plot_groups(*baseline, nullptr) : decltype(groups){};
    const Theme& t = theme();
    const float avail = ImGui::GetContentRegionAvail().x;
    const int cols = avail > t.px(900) && titles.size() > 1 ? 2 : 1;
    const float gap = t.px(12);
    const float w = (avail - gap * float(cols - 1)) / float(cols);
    const float h = std::clamp(w * 0.62f, t.px(230), t.px(360));
    for (size_t i = 0; i < titles.size(); ++i) {
        if (i % size_t(cols)) ImGui::SameLine(0, gap);
        ImGui::BeginGroup();
        ImGui::PushItemWidth(w);
        ImGui::BeginChild((std::string(id_prefix) + titles[i]).c_str(), ImVec2(w, h), false,
                          ImGuiWindowFlags_NoScrollbar);
        draw_plot(titles[i].c_str(), titles[i], groups[titles[i]], base[titles[i]], h);
        ImGui::EndChild();
        ImGui::PopItemWidth();
        ImGui::EndGroup();
    }
}

static std::string cell_text(const Cell& c, const std::string& unit) {
    if (const double* d = std::get_if<double>(&c)) return format_with_unit(*d, unit);
    return std::get<std::string>(c);
}

static void draw_table(const Table& tb, int index) {
    const Theme& t = theme();
    ImGui::PushFont(fonts().bold);
    ImGui::TextUnformatted(tb.name.c_str());
    ImGui::PopFont();
    const int ncol = int(tb.columns.size());
    if (ncol == 0) return;
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH |
                                  ImGuiTableFlags_BordersOuter | ImGuiTableFlags_SizingStretchProp |
                                  ImGuiTableFlags_ScrollY;
    const float row_h = ImGui::GetTextLineHeightWithSpacing() + t.px(4);
    const float h = std::min(row_h * float(tb.rows.size() + 1) + t.px(6), t.px(420));
    ImGui::PushID(index);
    if (ImGui::BeginTable("table", ncol, flags, ImVec2(0, h))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        for (int c = 0; c < ncol; ++c) ImGui::TableSetupColumn(tb.columns[size_t(c)].c_str());
        ImGui::TableHeadersRow();
        ImGuiListClipper clip;
        clip.Begin(int(tb.rows.size()));
        while (clip.Step()) {
            for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
                const auto& row = tb.rows[size_t(r)];
                ImGui::TableNextRow();
                for (int c = 0; c < ncol && c < int(row.size()); ++c) {
                    ImGui::TableSetColumnIndex(c);
                    const std::string unit = size_t(c) < tb.units.size() ? tb.units[size_t(c)] : "";
                    const bool number = std::holds_alternative<double>(row[size_t(c)]);
                    const std::string s = cell_text(row[size_t(c)], unit);
                    if (number) ImGui::PushFont(fonts().mono);
                    ImGui::TextUnformatted(s.c_str());
                    if (number) {
                        ImGui::PopFont();
                        if (ImGui::IsItemHovered())
                            tooltip_wrapped(format_number(std::get<double>(row[size_t(c)])));
                    }
                }
            }
        }
        ImGui::EndTable();
    }
    ImGui::PopID();
}

static void scalar_value_cell(const Scalar& s) {
    ImGui::PushFont(fonts().mono);
    ImGui::TextUnformatted(format_with_unit(s.value, s.unit).c_str());
    ImGui::PopFont();
    if (ImGui::IsItemHovered()) tooltip_wrapped(format_number(s.value) + " " + s.unit);
}

// Figure, value and key; with a baseline, its value and the difference between them.
static void draw_scalar_table(const std::vector<const Scalar*>& v, const char* id, const Report* baseline) {
    if (v.empty()) return;
    if (ImGui::BeginTable(
            id, baseline ? 5 : 3,
            ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingStretchProp)) {
        ImGui::TableSetupColumn("figure", ImGuiTableColumnFlags_WidthStretch, 3);
        ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch, 2);
        if (baseline) {
            ImGui::TableSetupColumn("baseline", ImGuiTableColumnFlags_WidthStretch, 2);
            ImGui::TableSetupColumn("difference", ImGuiTableColumnFlags_WidthStretch, 1.5f);
        }
        ImGui::TableSetupColumn("key", ImGuiTableColumnFlags_WidthStretch, 2);
        ImGui::TableHeadersRow();
        for (const Scalar* s : v) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(s->label.c_str());
            if (ImGui::IsItemHovered() && !s->help.empty()) tooltip_wrapped(s->help);
            ImGui::TableNextColumn();
            scalar_value_cell(*s);
            if (baseline) {
                const Scalar* b = baseline->find_scalar(s->key);
                ImGui::TableNextColumn();
                if (b) scalar_value_cell(*b);
                ImGui::TableNextColumn();
                if (b) ImGui::TextUnformatted(format_difference(s->value, b->value, s->unit).c_str());
            }
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", s->key.c_str());
        }
        ImGui::EndTable();
    }
}

// Headline figures: flagged ones, else the first four, in cards across the width.
static void draw_headlines(const std::vector<const Scalar*>& heads, const Report* baseline) {
    if (heads.empty()) return;
    const Theme& t = theme();
    const float avail = ImGui::GetContentRegionAvail().x - t.px(4);
    const float gap = t.px(10);
    const int per_row = std::max(1, std::min(int(heads.size()), int((avail + gap) / (t.px(200) + gap))));
    const float w = (avail - gap * float(per_row - 1)) / float(per_row);
    for (size_t i = 0; i < heads.size(); ++i) {
        if (i % size_t(per_row)) ImGui::SameLine(0, gap);
        headline_card(*heads[i], w, baseline ? baseline->find_scalar(heads[i]->key) : nullptr);
    }
}

// `e` says what each check's falsifier does ("Fails if: ..." in the tooltip).
using Rects = std::map<std::string, std::array<float, 4>>;

// One line, "16 of 16 checks pass", that opens the list. A failing check keeps the list open and
// comes first: a result that fails its own checks must not look like one that passes.
static void draw_checks(const Report& r, const Experiment& e, Rects& rects) {
    std::vector<const Check*> failing, passing;
    for (const auto* v : {&r.checks, &r.timing.checks})
        for (const auto& c : *v) (c.passed ? passing : failing).push_back(&c);
    const size_t n = failing.size() + passing.size();
    if (n == 0) return;
    const Theme& t = theme();
    const std::string summary =
        failing.empty() ? std::to_string(n) + " of " + std::to_string(n) + " checks pass"
                        : std::to_string(failing.size()) + " of " + std::to_string(n) + " checks FAIL";
    if (!failing.empty()) ImGui::SetNextItemOpen(true);
    ImGui::PushStyleColor(ImGuiCol_Text, failing.empty() ? t.good : t.bad);
    ImGui::PushFont(fonts().bold);
    const bool open = ImGui::TreeNodeEx("checks", ImGuiTreeNodeFlags_SpanAvailWidth, "%s", summary.c_str());
    ImGui::PopFont();
    ImGui::PopStyleColor();
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    rects["checks"] = {a.x, a.y, b.x - a.x, b.y - a.y};
    if (ImGui::IsItemHovered() && failing.empty())
        tooltip_wrapped(
            "Every check of this run holds. Open the list for each check, what it compares, and "
            "what makes it fail.");
    if (!open) return;
    for (const auto* list : {&failing, &passing})
        for (const Check* c : *list) {
            const FalsifierInfo* f = e.falsifier_for(c->key);
            const ImVec2 top = ImGui::GetCursorScreenPos();
            check_row(*c, f ? f->does : std::string());
            const float w = ImGui::GetContentRegionAvail().x;
            rects["check:" + c->key] = {top.x, top.y, w, ImGui::GetFrameHeight()};
        }
    ImGui::TreePop();
}

// Each view under a heading of its name, drawn by draw(view, index).
template <class View, class Draw>
static void draw_views(const std::vector<View>& views, Draw draw) {
    for (size_t i = 0; i < views.size(); ++i) {
        section_heading(views[i].name.c_str());
        draw(views[i], int(i));
    }
}

static void draw_notes(const std::vector<std::string>& notes) {
    if (notes.empty()) return;
    section_heading("Notes");
    for (const auto& n : notes) {
        ImGui::Bullet();
        text_wrapped_colored(theme().text_dim, n);
    }
}

// What a clock measured, kept apart from what is computed.
static void draw_timing(const Report::Timing& timing, const Report::Timing* baseline) {
    if (timing.scalars.empty() && timing.texts.empty() && timing.series.empty()) return;
    section_heading("Measured in this build (wall clock; varies between runs and machines)");
    // As in the report above: the pictures, then the tables, then every figure.
    for (const auto& x : timing.texts) ImGui::Text("%s: %s", x.label.c_str(), x.text.c_str());
    draw_plots(timing.series, baseline ? &baseline->series : nullptr, "tplot_");
    for (size_t i = 0; i < timing.tables.size(); ++i) draw_table(timing.tables[i], 1000 + int(i));
    std::vector<const Scalar*> ts;
    for (const auto& s : timing.scalars) ts.push_back(&s);
    draw_scalar_table(ts, "timing", nullptr);
}

// The baseline's table of the same name, or null.
static const Table* baseline_table(const Report* baseline, const std::string& name) {
    if (!baseline) return nullptr;
    for (const auto& t : baseline->tables)
        if (t.name == name) return &t;
    return nullptr;
}

Rects draw_report(const Report& r, bool stale, const Experiment& e, const Report* baseline) {
    Rects rects;
    const Theme& t = theme();
    if (stale) ImGui::PushStyleVar(ImGuiStyleVar_Alpha, 0.55f);
    std::vector<const Scalar*> heads, rest;
    for (const auto& s : r.scalars) (s.headline ? heads : rest).push_back(&s);
    if (heads.empty())
        for (size_t i = 0; i < r.scalars.size() && i < 4; ++i) heads.push_back(&r.scalars[i]);
    draw_headlines(heads, baseline);
    draw_checks(r, e, rects);
    // The module's own picture (pool map, tree, ring, timeline, heat map) first, then its curves:
    // both above the tables, in the first screen. The first of them is the page's main view.
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const auto mark_main_view = [&] {
        const float y = ImGui::GetCursorScreenPos().y;
        if (y > top.y && !rects.count("main_view"))
            rects["main_view"] = {top.x, top.y, ImGui::GetContentRegionAvail().x, y - top.y};
    };
    draw_views(r.grids, draw_cell_grid);
    mark_main_view();
    draw_views(r.heatmaps, draw_heatmap);
    mark_main_view();
    draw_views(r.rings, draw_ring);
    mark_main_view();
    draw_views(r.trees, draw_tree);
    mark_main_view();
    draw_views(r.timelines, draw_timeline);
    mark_main_view();
    if (!r.series.empty()) {
        section_heading("Plots");
        draw_plots(r.series, baseline ? &baseline->series : nullptr, "plot_");
    }
    mark_main_view();
    if (!r.tables.empty()) {
        section_heading("Tables");
        for (size_t i = 0; i < r.tables.size(); ++i) {
            const Table* b = baseline_table(baseline, r.tables[i].name);
            draw_table(b ? table_with_baseline(r.tables[i], *b) : r.tables[i], int(i));
            ImGui::Dummy(ImVec2(0, t.px(6)));
        }
    }
    if (!rest.empty()) {
        section_heading("All figures");
        draw_scalar_table(rest, "rest", baseline);
    }
    draw_notes(r.notes);
    draw_timing(r.timing, baseline ? &baseline->timing : nullptr);
    if (stale) ImGui::PopStyleVar();
    return rects;
}

}  // namespace k3::ui
