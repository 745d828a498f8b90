// The generic parameter panel, driven by the module's parameter declarations.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/experiments/experiment.h"

namespace k3::ui {

struct ParamPanelResult {
    bool changed = false;   // a value changed this frame
    bool dragging = false;  // a slider is being dragged (non-live modules wait for release)
    // Screen rectangle (x, y, w, h in device pixels) of each parameter's widget: the browser test
    // finds the sliders it drags through this.
    std::map<std::string, std::array<float, 4>> rects;
};

// Draws the panel for `e`, editing `p` in place; `issues` (validation) are shown on top.
ParamPanelResult draw_param_panel(const Experiment& e, Params& p, const std::vector<ParamIssue>& issues);

}  // namespace k3::ui
