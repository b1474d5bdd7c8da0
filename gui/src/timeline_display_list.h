#pragma once
// TimelineDisplayList: what to draw for one viewport, as plain primitives (filled rectangles,
// lines, text). Built once from the model; QPainter draws it into the widget or a PNG, and the
// SVG writer turns the same list into SVG text, so the export matches the screen.
//
// Level of detail: events narrower than a few pixels that touch on screen are merged into
// blocks of up to three pixels (each coloured by the category that fills most of it), and idle
// gaps under a pixel are not drawn, so a row holds at most about one primitive per pixel
// column however many events fall into the view. Only the lanes in the layout's vertical
// window are drawn, cut at the plot's top and bottom; the axis and the colour key stay put.
#include "timeline_layout.h"
#include "timeline_model.h"

#include <QColor>
#include <QFont>
#include <QRectF>
#include <QSize>
#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

namespace trident::gui {

enum class RectRole : std::uint8_t { idle, block, merged_block, selection, legend };

struct RectPrimitive {
    QRectF rect;
    QColor color;
    RectRole role = RectRole::block;
    bool filled = true;      // false: an outline (the selection)
    std::int64_t event = -1; // a single block: index into the model's events
    std::uint32_t merged_events = 1;
};

struct LinePrimitive {
    QPointF from;
    QPointF to;
    QColor color;
};

enum class TextRole : std::uint8_t {
    title,
    lane_label,
    lane_bubble,
    row_label, // the stream a row of a lane shows ("compute", "p2p", "dp", "tp")
    block_label,
    axis_label,
    legend
};

struct TextPrimitive {
    QRectF box;
    QString text;
    QColor color;
    TextRole role = TextRole::lane_label;
    double pixel_size = 11.0;
    bool centered = false; // else left-aligned, vertically centred
    bool bold = false;
};

struct TimelineDisplayList {
    QSize size;
    QColor background;
    std::vector<RectPrimitive> rects; // drawn in order: idle shading, blocks, selection
    std::vector<LinePrimitive> lines;
    std::vector<TextPrimitive> texts;
    std::size_t lane_count = 0; // all lanes; only those in the vertical window are drawn

    std::size_t primitive_count() const { return rects.size() + lines.size() + texts.size(); }
};

struct DisplayListOptions {
    QString title;
    std::optional<std::uint32_t> selected_event;
    // An event at least this wide is drawn on its own; narrower ones that touch are merged.
    double min_block_px = 3.0;
};

TimelineDisplayList build_display_list(const TimelineModel& model, const TimelineLayout& layout,
                                       const DisplayListOptions& options = {});

// The font text primitives are drawn in (DejaVu Sans at a pixel size).
QFont primitive_font(double pixel_size, bool bold);

// "12.3 ms", "850 µs", "1.25 s": the axis and the tooltips write times like this.
QString format_duration(double seconds);

// A lane's label: "stage 2 · rank 5" (one lane per rank) or "stage 2 · 4 ranks" (collapsed).
QString lane_name(const TimelineLane& lane, bool collapsed);
// The label's tooltip: the stage, every rank in it ("ranks 4, 5, 6, 7"; long lists keep the
// first and last few), busy and idle time and when the lane ends.
QString describe_lane(const TimelineLane& lane);

} // namespace trident::gui
