#pragma once
// The what-if across cluster sizes as two plots side by side, as Calculon's sweeps are read:
// tokens/s against nodes (with the ideal linear scaling from the smallest size, dashed) and
// GPU-hours per billion tokens — the cost — against nodes. Nodes on a log2 axis.
#include "chart_picture.h"

#include <cstdint>
#include <vector>

namespace trident::gui {

struct ScalingPoint {
    std::int64_t nodes = 0;
    double tokens_per_s = 0.0;
    double gpu_hours_per_billion = 0.0; // with failures and saves where the cluster has rates
};

struct ScalingChartPicture : ChartPicture {
    QRectF throughput_plot, cost_plot;
    // Pixel centres of each point, in the order given.
    std::vector<QPointF> throughput_points, ideal_points, cost_points;
};

QColor throughput_color();
QColor cost_color();

// Points with a non-finite or non-positive figure are left out.
ScalingChartPicture layout_scaling_chart(const std::vector<ScalingPoint>& points, QSizeF size);

} // namespace trident::gui
