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

double TimelineLayout::max_scroll_px() const {
    return std::max(0.0, content_height_px - plot.height());
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
    layout.lane_count = lanes.size();
    if (lanes.empty()) return layout;
    // Rows grow to fill the height up to kMaxRowHeightPx; below the minimum heights the lanes
    // keep their size and scroll instead of shrinking to an unlabelled pixel.
    auto lane_height = [](const TimelineLane& lane, double row_px) {
        const double rows = static_cast<double>(std::max<std::size_t>(1, lane.rows.size()));
        return std::max(rows * row_px, TimelineLayout::kMinLaneHeightPx);
    };
    auto content_height = [&](double row_px) {
        double total_px = TimelineLayout::kLaneGapPx;
        for (const TimelineLane& lane : lanes)
            total_px += lane_height(lane, row_px) + TimelineLayout::kLaneGapPx;
        return total_px;
    };
    // The content height grows with the row height: bisect for the tallest rows that fit.
    double row_px = TimelineLayout::kMaxRowHeightPx;
    if (content_height(row_px) > layout.plot.height()) {
        double lo_px = TimelineLayout::kMinRowHeightPx;
        double hi_px = TimelineLayout::kMaxRowHeightPx;
        for (int i = 0; i < 20 && content_height(lo_px) <= layout.plot.height(); ++i) {
            const double mid_px = 0.5 * (lo_px + hi_px);
            (content_height(mid_px) <= layout.plot.height() ? lo_px : hi_px) = mid_px;
        }
        row_px = lo_px;
    }
    layout.content_height_px = content_height(row_px);
    layout.scroll_px = std::clamp(viewport.scroll_px, 0.0, layout.max_scroll_px());

    double top_px = layout.plot.top() + TimelineLayout::kLaneGapPx - layout.scroll_px;
    for (std::size_t l = 0; l < lanes.size(); ++l) {
        const TimelineLane& lane = lanes[l];
        const double height_px = lane_height(lane, row_px);
        // Lanes outside the window cost a few additions each: no boxes, no rows.
        if (top_px + height_px > layout.plot.top() && top_px < layout.plot.bottom()) {
            LaneBox box;
            box.lane = &lane;
            box.index = l;
            box.top_px = top_px;
            box.height_px = height_px;
            // A lane held up by its minimum height shares the extra among its rows.
            const double lane_row_px =
                height_px / static_cast<double>(std::max<std::size_t>(1, lane.rows.size()));
            double row_top_px = top_px;
            for (const TimelineRow& row : lane.rows) {
                box.rows.push_back({&row, row_top_px, lane_row_px});
                row_top_px += lane_row_px;
            }
            layout.lanes.push_back(std::move(box));
        }
        top_px += height_px + TimelineLayout::kLaneGapPx;
        if (top_px >= layout.plot.bottom()) break;
    }
    return layout;
}

std::optional<TimelineHit> hit_test(const TimelineModel& model, const TimelineLayout& layout,
                                    QPointF point) {
    // Lanes scrolled under the axis or the colour key are hidden there.
    if (point.y() < layout.plot.top() || point.y() >= layout.plot.bottom()) return std::nullopt;
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
