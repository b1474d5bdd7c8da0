#pragma once
// TimelineLayout: where things go on the canvas for one viewport — the label column on the
// left, the time axis on top, and a band per lane split into a row per stream. Shared by the
// display-list builder (drawing) and hit testing (hover, click), so both agree on geometry.
//
// Lanes never shrink below a readable height (two label lines, every stream row tall enough
// for its blocks); when they do not fit, the lanes scroll under a fixed axis and colour key and
// only the lanes inside the vertical window are laid out, so drawing stays O(visible).
#include "timeline_model.h"

#include <QPointF>
#include <QRectF>
#include <optional>
#include <vector>

namespace trident::gui {

struct TimelineViewport {
    double t0_s = 0.0;
    double t1_s = 1.0;
    int width_px = 800;
    int height_px = 400;
    bool collapsed = false; // one lane per stage instead of one per rank
    double scroll_px = 0.0; // how far the lanes are scrolled up; clamped by the layout
};

struct RowBox {
    const TimelineRow* row = nullptr;
    double top_px = 0.0;
    double height_px = 0.0;
};

struct LaneBox {
    const TimelineLane* lane = nullptr;
    std::size_t index = 0; // into model.lanes(collapsed)
    double top_px = 0.0;
    double height_px = 0.0;
    std::vector<RowBox> rows;
};

struct TimelineLayout {
    static constexpr double kLabelWidthPx = 150.0;
    static constexpr double kAxisHeightPx = 22.0;
    static constexpr double kLaneGapPx = 3.0;
    static constexpr double kMaxRowHeightPx = 22.0;
    static constexpr double kLegendHeightPx = 18.0;
    static constexpr double kMinRowHeightPx = 8.0;   // a block label's smallest text fits
    static constexpr double kMinLaneHeightPx = 26.0; // two label lines: name and bubble

    TimelineViewport viewport;
    QRectF plot;   // where blocks are drawn: right of the labels, below the axis
    QRectF legend; // the colour key along the bottom; empty when the canvas is too short
    std::vector<LaneBox> lanes;     // only the lanes that reach into the plot (the vertical window)
    std::size_t lane_count = 0;     // all lanes, visible or not
    double content_height_px = 0.0; // every lane stacked, gaps included
    double scroll_px = 0.0;         // the viewport's scroll, clamped to [0, max_scroll_px()]

    double max_scroll_px() const;

    double x_of(double t_s) const;
    double t_of(double x_px) const;
    double seconds_per_px() const;
};

TimelineLayout layout_timeline(const TimelineModel& model, const TimelineViewport& viewport);

struct TimelineHit {
    std::size_t lane = 0; // index into layout.lanes
    std::optional<std::uint32_t> event;
};

// The lane under `point` and the event under it (within two pixels), if any.
std::optional<TimelineHit> hit_test(const TimelineModel& model, const TimelineLayout& layout,
                                    QPointF point);

} // namespace trident::gui
