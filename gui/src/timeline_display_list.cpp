#include "timeline_display_list.h"

#include "timeline_colors.h"

#include <QFontMetricsF>
#include <algorithm>
#include <array>
#include <cmath>

namespace trident::gui {
namespace {

constexpr double kDigitWidthEm = 0.65; // DejaVu Sans digits are 0.636 em wide
constexpr double kMaxTextPx = 11.0;
constexpr double kMinTextPx = 6.0;
constexpr double kRowLabelWidthPx = 44.0; // "compute" at 10 px

QString short_stream_name(core::Stream stream) {
    switch (stream) {
    case core::Stream::compute:
        return QStringLiteral("compute");
    case core::Stream::pipeline_p2p:
        return QStringLiteral("p2p");
    case core::Stream::data_parallel:
        return QStringLiteral("dp");
    case core::Stream::tensor_parallel:
        return QStringLiteral("tp");
    }
    return {};
}
// A merged block stops growing at this width, so a zoomed-out row still shows where forwards
// (warm-up) and backwards (cool-down) dominate instead of one colour for the whole row.
constexpr double kMaxMergedPx = 3.0;

// A run of narrow events that touch on screen, drawn as one block.
struct PendingBlock {
    double x0_px = 0.0;
    double x1_px = 0.0;
    std::uint32_t count = 0;
    std::uint32_t first_event = 0;
    std::array<double, kBlockCategoryCount> category_s{};
};

// Text cut with "…" to fit `width_px` (titles and lane labels in the label column).
QString elided(const QString& text, double pixel_size, bool bold, double width_px,
               Qt::TextElideMode mode = Qt::ElideRight) {
    return QFontMetricsF(primitive_font(pixel_size, bold)).elidedText(text, mode, width_px);
}

class Builder {
public:
    Builder(const TimelineModel& model, const TimelineLayout& layout,
            const DisplayListOptions& options)
        : model_(model), layout_(layout), options_(options) {}

    TimelineDisplayList build() {
        list_.size = QSize(layout_.viewport.width_px, layout_.viewport.height_px);
        list_.background = background_color();
        list_.lane_count = layout_.lane_count;
        add_axis();
        for (const LaneBox& lane : layout_.lanes) add_idle(lane);
        for (std::size_t l = 0; l < layout_.lanes.size(); ++l) {
            const LaneBox& lane = layout_.lanes[l];
            for (const RowBox& row : lane.rows) add_blocks(row);
            // Rank lanes are grouped by stage: a darker line closes each group. The next lane
            // may be scrolled out of the window, so ask the model.
            const std::vector<TimelineLane>& lanes = model_.lanes(layout_.viewport.collapsed);
            const bool stage_ends =
                lane.index + 1 >= lanes.size() || lanes[lane.index + 1].stage != lane.lane->stage;
            add_lane_labels(lane, stage_ends);
        }
        add_selection();
        add_legend();
        return std::move(list_);
    }

private:
    double clip_x(double x_px) const {
        return std::clamp(x_px, layout_.plot.left(), layout_.plot.right());
    }

    // A lane half scrolled under the axis or the key is cut at the plot's top and bottom.
    QRectF clip_y(const QRectF& rect) const {
        const double top_px = std::max(rect.top(), layout_.plot.top());
        const double bottom_px = std::min(rect.bottom(), layout_.plot.bottom());
        return QRectF(rect.left(), top_px, rect.width(), std::max(0.0, bottom_px - top_px));
    }

    bool inside_y(const QRectF& rect) const {
        return rect.top() >= layout_.plot.top() - 0.5 &&
               rect.bottom() <= layout_.plot.bottom() + 0.5;
    }

    void add_axis() {
        const QRectF& plot = layout_.plot;
        const double axis_y = plot.top() - 1.0;
        list_.lines.push_back({{0.0, axis_y}, {plot.right(), axis_y}, axis_color()});
        list_.lines.push_back({{plot.left(), 0.0}, {plot.left(), plot.bottom()}, axis_color()});
        if (!options_.title.isEmpty())
            list_.texts.push_back(
                {QRectF(4.0, 2.0, plot.left() - 8.0, plot.top() - 4.0),
                 // the middle goes: a file name's end tells files apart
                 elided(options_.title, kMaxTextPx, true, plot.left() - 8.0, Qt::ElideMiddle),
                 label_text_color(), TextRole::title, kMaxTextPx, false, true});
        // Ticks about every 100 px at 1, 2 or 5 times a power of ten.
        const double raw_step_s = 100.0 * layout_.seconds_per_px();
        if (!(raw_step_s > 0.0) || !std::isfinite(raw_step_s)) return;
        const double decade_s = std::pow(10.0, std::floor(std::log10(raw_step_s)));
        double step_s = decade_s * 10.0;
        for (double factor : {1.0, 2.0, 5.0})
            if (decade_s * factor >= raw_step_s) {
                step_s = decade_s * factor;
                break;
            }
        const double first_s = std::ceil(layout_.viewport.t0_s / step_s) * step_s;
        for (double t_s = first_s; t_s <= layout_.viewport.t1_s; t_s += step_s) {
            const double x_px = layout_.x_of(t_s);
            list_.lines.push_back({{x_px, axis_y - 5.0}, {x_px, axis_y}, axis_color()});
            list_.texts.push_back({QRectF(x_px + 3.0, 2.0, 90.0, plot.top() - 6.0),
                                   format_duration(std::abs(t_s) < 0.5 * step_s ? 0.0 : t_s),
                                   axis_color(), TextRole::axis_label, 10.0});
        }
    }

    void add_idle(const LaneBox& lane) {
        // The whole lane is shaded where its compute stream waits, so a bubble reads as a
        // band behind the communication that fills it. Gaps under a pixel are left out: merged
        // like blocks they would paint a false band over a stretch of busy, dense work.
        std::optional<QRectF> pending;
        for (const TimeInterval& gap :
             model_.visible_idle(*lane.lane, layout_.viewport.t0_s, layout_.viewport.t1_s)) {
            const double x0_px = clip_x(layout_.x_of(gap.start_s));
            const double x1_px = clip_x(layout_.x_of(gap.end_s));
            if (x1_px - x0_px < 1.0) continue;
            if (pending && x0_px <= pending->right() + 0.5) {
                pending->setRight(std::max(pending->right(), x1_px));
                continue;
            }
            if (pending) push_idle(*pending);
            pending = QRectF(x0_px, lane.top_px, x1_px - x0_px, lane.height_px);
        }
        if (pending) push_idle(*pending);
    }

    void push_idle(const QRectF& rect) {
        const QRectF clipped = clip_y(rect);
        if (clipped.height() <= 0.0) return;
        list_.rects.push_back({clipped, idle_color(), RectRole::idle, true, -1, 0});
    }

    void add_blocks(const RowBox& row) {
        PendingBlock pending;
        const double t0_s = layout_.viewport.t0_s;
        const double t1_s = layout_.viewport.t1_s;
        for (std::uint32_t index : model_.candidate_events(*row.row, t0_s, t1_s)) {
            if (!model_.overlaps(index, t0_s, t1_s)) continue;
            const core::TraceEvent& event = model_.event(index);
            const double x0_px = clip_x(layout_.x_of(event.start_s));
            const double x1_px = clip_x(layout_.x_of(event.end_s));
            if (x1_px - x0_px >= options_.min_block_px) {
                flush(pending, row);
                push_block(index, x0_px, x1_px, row);
                continue;
            }
            if (pending.count > 0 && x0_px <= pending.x1_px + 1.0 &&
                pending.x1_px - pending.x0_px < kMaxMergedPx) {
                pending.x1_px = std::max(pending.x1_px, x1_px);
            } else {
                flush(pending, row);
                pending.x0_px = x0_px;
                pending.x1_px = std::max(x1_px, x0_px + 1.0);
                pending.first_event = index;
            }
            ++pending.count;
            pending.category_s[static_cast<std::size_t>(block_category(event.kind))] +=
                event.end_s - event.start_s;
        }
        flush(pending, row);
    }

    void flush(PendingBlock& pending, const RowBox& row) {
        if (pending.count == 0) return;
        const QRectF rect =
            clip_y(QRectF(pending.x0_px, row.top_px, pending.x1_px - pending.x0_px, row.height_px));
        if (rect.height() <= 0.0) {
            pending = PendingBlock{};
            return;
        }
        if (pending.count == 1) {
            list_.rects.push_back({rect, event_color(model_.event(pending.first_event)),
                                   RectRole::block, true, pending.first_event, 1});
        } else {
            const auto most =
                std::max_element(pending.category_s.begin(), pending.category_s.end());
            const auto category = static_cast<BlockCategory>(most - pending.category_s.begin());
            list_.rects.push_back(
                {rect, category_color(category), RectRole::merged_block, true, -1, pending.count});
        }
        pending = PendingBlock{};
    }

    void push_block(std::uint32_t index, double x0_px, double x1_px, const RowBox& row) {
        const core::TraceEvent& event = model_.event(index);
        // A one-pixel gap on the right keeps back-to-back blocks of one colour apart.
        const double width_px = x1_px - x0_px >= 4.0 ? x1_px - x0_px - 1.0 : x1_px - x0_px;
        const QRectF rect(x0_px, row.top_px, width_px, row.height_px);
        const QRectF clipped = clip_y(rect);
        if (clipped.height() <= 0.0) return;
        list_.rects.push_back({clipped, event_color(event), RectRole::block, true, index, 1});
        if (event.microbatch < 0 || !inside_y(rect)) return;
        const double text_px = std::min(kMaxTextPx, row.height_px - 2.0);
        if (text_px < kMinTextPx) return;
        const QString label = QString::number(event.microbatch);
        if (width_px < label.size() * kDigitWidthEm * text_px + 4.0) return;
        list_.texts.push_back(
            {rect, label, block_text_color(), TextRole::block_label, text_px, true});
    }

    void add_lane_labels(const LaneBox& lane, bool stage_ends) {
        const TimelineLane& data = *lane.lane;
        const double separator_y = lane.top_px + lane.height_px + 0.5 * TimelineLayout::kLaneGapPx;
        if (separator_y >= layout_.plot.top() && separator_y <= layout_.plot.bottom())
            list_.lines.push_back({{0.0, separator_y},
                                   {layout_.plot.right(), separator_y},
                                   stage_ends ? stage_separator_color() : lane_separator_color()});
        const QString name = lane_name(data, layout_.viewport.collapsed);
        const QString bubble =
            QStringLiteral("bubble %1%").arg(100.0 * data.bubble_fraction, 0, 'f', 1);
        // A lane with several rows names each row's stream at the right of the label column.
        const bool row_names = lane.rows.size() > 1;
        const double width_px = layout_.plot.left() - 8.0 - (row_names ? kRowLabelWidthPx : 0.0);
        if (row_names) add_row_labels(lane);
        // Hundreds of ranks leave lanes too thin to label: the tooltip still names them.
        if (width_px <= 0.0 || lane.height_px < kMinTextPx) return;
        if (lane.height_px >= 2.0 * kMaxTextPx + 4.0) {
            // Each line is drawn only where it is whole: a lane half scrolled away keeps the
            // line still in view, and nothing is written over the axis or the key.
            const double half_px = 0.5 * lane.height_px;
            const QRectF name_box(4.0, lane.top_px, width_px, half_px);
            const QRectF bubble_box(4.0, lane.top_px + half_px, width_px, half_px);
            if (inside_y(name_box))
                list_.texts.push_back({name_box, name, label_text_color(), TextRole::lane_label,
                                       kMaxTextPx, false, true});
            if (inside_y(bubble_box))
                list_.texts.push_back(
                    {bubble_box, bubble, label_text_color(), TextRole::lane_bubble, kMaxTextPx});
            return;
        }
        const double text_px = std::clamp(lane.height_px - 1.0, kMinTextPx, kMaxTextPx);
        if (!inside_y(QRectF(4.0, lane.top_px, width_px, lane.height_px))) return;
        list_.texts.push_back(
            {QRectF(4.0, lane.top_px, width_px, lane.height_px),
             elided(name + QStringLiteral(" · ") + bubble, text_px, false, width_px),
             label_text_color(), TextRole::lane_label, text_px});
    }

    void add_row_labels(const LaneBox& lane) {
        for (const RowBox& row : lane.rows) {
            if (row.height_px < kMinTextPx) continue;
            const QRectF box(layout_.plot.left() - kRowLabelWidthPx - 2.0, row.top_px,
                             kRowLabelWidthPx, row.height_px);
            if (!inside_y(box)) continue;
            const double text_px = std::clamp(row.height_px - 1.0, kMinTextPx, 10.0);
            list_.texts.push_back({box, short_stream_name(row.row->stream), axis_color(),
                                   TextRole::row_label, text_px});
        }
    }

    void add_legend() {
        // Swatch and name for each block category and for idle time, left to right, as far as
        // they fit.
        const QRectF& legend = layout_.legend;
        if (legend.isEmpty()) return;
        constexpr double kSwatchPx = 10.0;
        const QFontMetricsF metrics(primitive_font(10.0, false));
        double x_px = legend.left() + 4.0;
        auto add = [&](const QString& name, const QColor& color) {
            const double text_px = metrics.horizontalAdvance(name) + 2.0;
            if (x_px + kSwatchPx + 4.0 + text_px > legend.right()) return;
            const double y_px = legend.center().y() - 0.5 * kSwatchPx;
            list_.rects.push_back(
                {QRectF(x_px, y_px, kSwatchPx, kSwatchPx), color, RectRole::legend, true, -1, 0});
            x_px += kSwatchPx + 4.0;
            list_.texts.push_back({QRectF(x_px, legend.top(), text_px, legend.height()), name,
                                   label_text_color(), TextRole::legend, 10.0});
            x_px += text_px + 14.0;
        };
        for (int c = 0; c < kBlockCategoryCount; ++c)
            add(QString::fromUtf8(kBlockCategoryNames[c].data(),
                                  static_cast<qsizetype>(kBlockCategoryNames[c].size())),
                category_color(static_cast<BlockCategory>(c)));
        add(QStringLiteral("idle (bubble)"), idle_color());
        if (model_.has_odd_chunks()) {
            core::TraceEvent second;
            second.kind = core::EventKind::forward;
            second.chunk = 1;
            add(QStringLiteral("lighter: 2nd chunk"), event_color(second));
        }
    }

    void add_selection() {
        if (!options_.selected_event) return;
        const std::uint32_t index = *options_.selected_event;
        if (index >= model_.events().size()) return;
        const core::TraceEvent& event = model_.event(index);
        if (!model_.overlaps(index, layout_.viewport.t0_s, layout_.viewport.t1_s)) return;
        for (const LaneBox& lane : layout_.lanes) {
            if (lane.lane->rank() != event.rank) continue;
            for (const RowBox& row : lane.rows) {
                if (row.row->stream != event.stream) continue;
                const double x0_px = clip_x(layout_.x_of(event.start_s));
                const double x1_px = std::max(clip_x(layout_.x_of(event.end_s)), x0_px + 2.0);
                const QRectF rect = clip_y(QRectF(x0_px, row.top_px, x1_px - x0_px, row.height_px));
                if (rect.height() <= 0.0) continue;
                list_.rects.push_back({rect, selection_color(), RectRole::selection, false,
                                       static_cast<std::int64_t>(index), 1});
            }
        }
    }

    const TimelineModel& model_;
    const TimelineLayout& layout_;
    const DisplayListOptions& options_;
    TimelineDisplayList list_;
};

} // namespace

TimelineDisplayList build_display_list(const TimelineModel& model, const TimelineLayout& layout,
                                       const DisplayListOptions& options) {
    return Builder(model, layout, options).build();
}

QFont primitive_font(double pixel_size, bool bold) {
    QFont font(QStringLiteral("DejaVu Sans"));
    font.setPixelSize(std::max(1, static_cast<int>(pixel_size)));
    font.setBold(bold);
    return font;
}

QString lane_name(const TimelineLane& lane, bool collapsed) {
    if (!collapsed) return QStringLiteral("stage %1 · rank %2").arg(lane.stage).arg(lane.rank());
    return QStringLiteral("stage %1 · %2 rank%3")
        .arg(lane.stage)
        .arg(lane.ranks.size())
        .arg(lane.ranks.size() == 1 ? "" : "s");
}

QString describe_lane(const TimelineLane& lane) {
    constexpr std::size_t kShownAtEachEnd = 8;
    QString ranks;
    const std::size_t n = lane.ranks.size();
    for (std::size_t i = 0; i < n; ++i) {
        if (n > 2 * kShownAtEachEnd && i == kShownAtEachEnd) {
            ranks += QStringLiteral(", …");
            i = n - kShownAtEachEnd;
        }
        ranks += (i ? QStringLiteral(", ") : QString()) + QString::number(lane.ranks[i]);
    }
    return QStringLiteral("stage %1: rank%2 %3\nbusy %4, idle %5 (%6%)\nends at %7")
        .arg(lane.stage)
        .arg(n == 1 ? "" : "s")
        .arg(ranks)
        .arg(format_duration(lane.busy_s))
        .arg(format_duration(lane.idle_s))
        .arg(100.0 * lane.bubble_fraction, 0, 'f', 1)
        .arg(format_duration(lane.end_s));
}

QString format_duration(double seconds) {
    const double magnitude = std::abs(seconds);
    if (magnitude == 0.0) return QStringLiteral("0");
    if (magnitude >= 1.0) return QStringLiteral("%1 s").arg(seconds, 0, 'g', 4);
    if (magnitude >= 1e-3) return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'g', 4);
    if (magnitude >= 1e-6) return QStringLiteral("%1 µs").arg(seconds * 1e6, 0, 'g', 4);
    return QStringLiteral("%1 ns").arg(seconds * 1e9, 0, 'g', 4);
}

} // namespace trident::gui
