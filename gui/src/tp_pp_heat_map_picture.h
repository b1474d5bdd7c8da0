#pragma once
// The tp × pp heat map: each cell the best tokens/s per GPU of layouts with that tensor- and
// pipeline-parallel degree (planner::best_per_tp_pp), darker for faster, grey where nothing
// fits, the fastest outlined — the sweep people read off Calculon's and Megatron's figures.
#include "chart_picture.h"
#include "trident/planner/tp_pp_map.h"

#include <vector>

namespace trident::gui {

struct HeatMapPicture : ChartPicture {
    std::vector<QRectF> cells; // in the order of the map's cells
    std::vector<QColor> cell_colors;
    int fastest = -1; // index of the fastest cell, -1 when none fits
};

// 0 (slowest shown) to 1 (fastest): pale yellow through teal to dark blue.
QColor heat_color(double fraction);
QColor no_layout_color();

HeatMapPicture layout_tp_pp_heat_map(const std::vector<planner::TpPpCell>& cells,
                                     std::int64_t devices, QSizeF size);

} // namespace trident::gui
