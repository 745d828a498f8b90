// The explorer's state and frame: sidebar, Overview, module pages, runs in slices, URL state and
// export. The same code runs in the desktop app and in the web page (see platform.h).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/experiments/compare.h"
#include "core/experiments/experiment.h"
#include "core/experiments/import.h"
#include "core/experiments/url_state.h"

namespace k3::ui {

class App {
  public:
    App();

    // Opens the view a link describes ("#m=memory&context=1048576"). Problems are shown on screen.
    void open_link(const std::string& hash);
    // Opens a module with parameters from "key=value" pairs (desktop --module/--set).
    void open_module(const std::string& id, const std::vector<std::pair<std::string, std::string>>& kv);

    // Advances the current run by about budget_ms; call once per frame before drawing.
    void update(double budget_ms);
    // Draws the whole UI for this frame (between ImGui::NewFrame and ImGui::Render).
    void draw();

    // True while something needs more frames (a run, a debounce, an animation).
    bool needs_frames() const;
    // A run, the baseline's, or the Overview's figures, still to compute.
    bool busy() const {
        return bool(run_) || bool(baseline_run_) || pending_start_ || !waiting_data_.empty() ||
               (!exp_ && !overview_built_);
    }

    // Test hooks and scripted screenshots.
    std::string report_json() const;
    std::string baseline_json() const;  // the baseline's report ("" when none is on screen)
    // The view's state as JSON: module, busy, stage and progress of the run, report (a report is on
    // screen), stale (for other parameters), messages (the problems and refusals drawn in the last
    // frame, as shown).
    std::string view_state_json() const;
    std::string module_id() const { return exp_ ? exp_->id : "overview"; }
    bool has_report() const { return has_report_; }
    // "x,y,w,h" (device pixels) of a parameter's widget on the current page, "" if not shown.
    std::string widget_rect(const std::string& key) const;

    // Theme and scale: main loops rebuild fonts between frames when this says so.
    bool style_dirty = true;
    bool dark = true;
    // Set by the toolbar; the main loop saves a PNG of the next rendered frame and clears it.
    bool want_png = false;
    void notify(std::string message);  // a toast
    // A file the user brought (a trace, a config.json, a report): applied, or refused with a banner.
    void import_file(const std::string& name, std::string bytes);
    void import_path(const std::string& path);  // the desktop app: --import, a file dropped on the window
    // A banner until dismissed: what happened before this view (the web page restarted after a crash).
    void set_notice(std::string message) { notice_ = std::move(message); }

  private:
    void select(const Experiment* e);
    void show(const ResolvedView& v, const std::string& tab);  // a resolved link or --module
    void params_changed(bool immediate);
    void start_run();
    // Compare mode (compare.cpp).
    void pin_current();
    void unpin();
    void refresh_baseline();  // the baseline for the module on screen, run if it must be
    void step_baseline(double budget_ms);
    void set_baseline(Pin pin, Report report);  // pinned, and shown or run in the module on screen
    void draw_compare_bar();
    const Report* baseline_shown() const;  // the baseline to draw beside the report, or null
    // Imports (import.cpp).
    void import_trace(const std::string& data_name, std::string bytes);
    std::string import_baseline(const ImportResult& r);  // "" or why the report cannot be a baseline
    void publish_hash();
    void draw_sidebar(float width);
    void draw_module(const Experiment& e);
    void draw_overview();
    void draw_toolbar(const Experiment& e);
    void draw_status();
    void handle_keys();
    void remember_rect(const std::string& key);  // the last item's rectangle, for widget_rect()
    void draw_link_issues();
    // A problem drawn on screen: the text goes into view_state_json() as shown.
    void draw_message(unsigned color, const std::string& text);
    std::string run_description() const;  // "module 1 kda with heads=1, group=8" for a crash report

    const Experiment* exp_ = nullptr;  // null: Overview
    Params params_;
    std::map<std::string, Params> saved_params_;  // per module, kept while switching
    std::vector<ParamIssue> link_issues_;         // from the last link, shown until dismissed
    bool link_applied_ = true;                    // the last link was followed, its issues aside
    std::string notice_;                          // set_notice()
    std::vector<std::string> shown_messages_;     // drawn in this frame (draw_message)
    std::vector<ParamIssue> validation_;          // of the current parameters
    std::string tab_;                             // "", "how", "limits"
    int tab_request_ = -1;                        // select a tab on the next frame

    Pin pin_;                 // pin_.module null: nothing pinned
    Params baseline_params_;  // the pin's settings in the module on screen
    Report baseline_;         // their report (baseline_.module: for which module)
    bool has_baseline_ = false;
    std::unique_ptr<Run> baseline_run_;  // computing baseline_, after the current run
    std::string baseline_why_;           // why the pin has no baseline in this module

    std::unique_ptr<Run> run_;
    double progress_ = 0;
    std::string stage_;
    Report report_;
    bool has_report_ = false;
    bool report_stale_ = false;
    bool pending_start_ = false;
    std::vector<std::string> waiting_data_;  // data files being fetched before the run can start
    std::string data_error_;
    double start_at_ms_ = 0;
    double run_ms_ = 0;
    std::string run_desc_;      // what the run in progress is (run_description at its start)
    std::string result_link_;   // the link of the report on screen
    std::string told_running_;  // what platform::run_state was last told is running

    struct OverviewFigure {
        const Experiment* exp;
        std::string caption;
        Scalar scalar;
        std::string link;
    };
    std::vector<OverviewFigure> overview_;
    bool overview_card(const OverviewFigure& fig, float width);
    void overview_step(double budget_ms);
    bool overview_built_ = false;
    bool overview_shown_ = false;  // drawn once without its figures
    size_t overview_next_ = 0, overview_total_ = 0;
    std::unique_ptr<Run> overview_run_;  // the figure being computed
    std::string overview_link_;          // its module's link

    std::map<std::string, std::array<float, 4>> widget_rects_;
    bool animating_ = false;  // a view asked for frames during the last draw (ui/anim.h)
    std::string toast_;
    double toast_until_ = 0;
    std::string last_hash_;
};

}  // namespace k3::ui
