#include "timeline_layout.h"

#include <algorithm>
#include <cmath>

namespace trident::gui {

double TimelineLayout::x_of(double t_s) const {
    return plot.left() + (t_s - viewport.t0_s) / seconds_per_px();
}

double TimelineLayout::t_of(double x_px) const {
    return viewport.t0_s + (x_px - plot.left()) * seconds_per_px();
}

double TimelineLayout::seconds_per_px() const {
    return (viewport.t1_s - viewport.t0_s) / std::max(1.0, plot.width());
}

TimelineLayout layout_timeline(const TimelineModel& model, const TimelineViewport& viewport) {
    TimelineLayout layout;
    layout.viewport = viewport;
    const double width_px = std::max(viewport.width_px, 1);
    const double height_px = std::max(viewport.height_px, 1);
    const double label_px = std::min(TimelineLayout::kLabelWidthPx, width_px / 3.0);
    const bool has_legend = height_px >= 4.0 * TimelineLayout::kLegendHeightPx;
    const double legend_px = has_legend ? TimelineLayout::kLegendHeightPx : 0.0;
    layout.plot = QRectF(label_px, TimelineLayout::kAxisHeightPx, width_px - label_px,
                         std::max(0.0, height_px - TimelineLayout::kAxisHeightPx - legend_px));
    if (has_legend)
        layout.legend = QRectF(label_px, height_px - legend_px, width_px - label_px, legend_px);

    const std::vector<TimelineLane>& lanes = model.lanes(viewport.collapsed);
    std::size_t row_count = 0;
    for (const TimelineLane& lane : lanes) row_count += std::max<std::size_t>(1, lane.rows.size());
    if (row_count == 0) return layout;
    // Every lane fits the height: rows shrink (to a pixel at the least) rather than scroll.
    const double gaps_px = TimelineLayout::kLaneGapPx * static_cast<double>(lanes.size());
    const double row_px =
        std::clamp((layout.plot.height() - gaps_px) / static_cast<double>(row_count), 1.0,
                   TimelineLayout::kMaxRowHeightPx);
    double top_px = layout.plot.top() + TimelineLayout::kLaneGapPx;
    for (const TimelineLane& lane : lanes) {
        LaneBox box;
        box.lane = &lane;
        box.top_px = top_px;
        for (const TimelineRow& row : lane.rows) {
            box.rows.push_back({&row, top_px, row_px});
            top_px += row_px;
        }
        if (lane.rows.empty()) top_px += row_px;
        box.height_px = top_px - box.top_px;
        layout.lanes.push_back(std::move(box));
        top_px += TimelineLayout::kLaneGapPx;
    }
    return layout;
}

std::optional<TimelineHit> hit_test(const TimelineModel& model, const TimelineLayout& layout,
                                    QPointF point) {
    for (std::size_t l = 0; l < layout.lanes.size(); ++l) {
        const LaneBox& lane = layout.lanes[l];
        if (point.y() < lane.top_px || point.y() >= lane.top_px + lane.height_px) continue;
        TimelineHit hit{l, std::nullopt};
        if (point.x() < layout.plot.left()) return hit;
        for (const RowBox& row : lane.rows) {
            if (point.y() < row.top_px || point.y() >= row.top_px + row.height_px) continue;
            const double t_s = layout.t_of(point.x());
            const double slack_s = 2.0 * layout.seconds_per_px();
            // Prefer the event that contains the point; else the nearest within the slack.
            double best_distance_s = slack_s;
            for (std::uint32_t index :
                 model.visible_events(*row.row, t_s - slack_s, t_s + slack_s)) {
                const core::TraceEvent& event = model.event(index);
                const double distance_s = t_s < event.start_s ? event.start_s - t_s
                                          : t_s > event.end_s ? t_s - event.end_s
                                                              : 0.0;
                if (!hit.event || distance_s < best_distance_s) {
                    hit.event = index;
                    best_distance_s = distance_s;
                }
            }
        }
        return hit;
    }
    return std::nullopt;
}

} // namespace trident::gui
