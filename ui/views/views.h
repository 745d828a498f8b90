// Views of the report's structured parts that are not plots: cell grids (pool maps, ring buffers)
// and heat maps with a break-even contour.
#pragma once

#include "core/experiments/report.h"

namespace k3::ui {

void draw_cell_grid(const CellGrid& g, int index);
void draw_heatmap(const HeatMap& h, int index);
void draw_tree(const Tree& t, int index);
void draw_ring(const Ring& g, int index);
void draw_timeline(const Timeline& tl, int index);

}  // namespace k3::ui
