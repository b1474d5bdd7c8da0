#pragma once
// TimelineView: the timeline widget. Shows a trace as lanes of coloured blocks with the
// bubbles shaded; the wheel zooms around the cursor, dragging pans, hovering shows an event's
// details, clicking selects it (event_selected), and `C` or the context menu collapses the
// lanes to one per pipeline stage. Lanes keep a readable height; when they do not fit, a
// scrollbar on the right, Shift+wheel and Page Up/Down scroll them (the wheel stays zoom, as it
// always was) while the time axis and the colour key stay put. render_png / render_svg export
// what the widget shows: the lanes in the current vertical window.
#include "timeline_display_list.h"
#include "timeline_model.h"

#include <QString>
#include <QWidget>
#include <memory>
#include <optional>
#include <utility>

class QScrollBar;

namespace trident::gui {

class TimelineView : public QWidget {
    Q_OBJECT

public:
    explicit TimelineView(QWidget* parent = nullptr);

    void set_trace(const core::Trace& trace, const QString& title);
    // Shares an already built model (the compare view, a planner candidate) without a copy.
    void set_model(std::shared_ptr<const TimelineModel> model, const QString& title);
    const TimelineModel& model() const { return *model_; }
    QString title() const { return title_; }

    // The visible time window in seconds; clamped to a span that is positive and to the
    // step's extent (with a small margin).
    void set_time_range(double t0_s, double t1_s);
    std::pair<double, double> time_range() const { return {t0_s_, t1_s_}; }
    void reset_time_range(); // the whole extent
    // The time the view may show: the step by default; the compare view widens both of its
    // timelines to the union of their steps so they share one axis.
    void set_time_extent(double start_s, double end_s);
    std::pair<double, double> time_extent() const { return {extent_start_s_, extent_end_s_}; }

    void set_collapsed(bool collapsed);
    bool collapsed() const { return collapsed_; }

    // How far the lanes are scrolled up, in pixels (0 shows the first lane); clamped to what
    // the lanes need at the current size.
    void set_lane_scroll(double scroll_px);
    double lane_scroll() const { return scroll_px_; }
    QScrollBar* lane_scrollbar() const { return scrollbar_; }
    // The widget's size less the scrollbar when it shows: what the lanes are drawn into.
    QSize canvas_size() const;

    std::optional<std::uint32_t> selected_event() const { return selected_; }
    void select_event(std::optional<std::uint32_t> index);

    // Geometry and primitives for the current size and state (tests, export).
    TimelineViewport viewport() const;
    TimelineViewport viewport(QSize size) const;
    TimelineLayout layout() const;
    TimelineDisplayList display_list(QSize size) const;

    // Export the current view at the widget's size, or at `size` when given. Throw SpecError.
    void render_png(const QString& path, QSize size = {}) const;
    void render_svg(const QString& path, QSize size = {}) const;

    QSize sizeHint() const override { return {1000, 500}; }

signals:
    void event_selected(const trident::core::TraceEvent& event, std::uint32_t index);
    void time_range_changed(double t0_s, double t1_s);
    void collapsed_changed(bool collapsed);

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void contextMenuEvent(QContextMenuEvent* event) override;
    bool event(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    DisplayListOptions options() const;
    void zoom_around(double x_px, double factor);
    void update_scrollbar(); // range, page and place for the current lanes and size

    std::shared_ptr<const TimelineModel> model_;
    QString title_;
    double extent_start_s_ = 0.0;
    double extent_end_s_ = 1.0;
    double t0_s_ = 0.0;
    double t1_s_ = 1.0;
    bool collapsed_ = false;
    QScrollBar* scrollbar_ = nullptr;
    double scroll_px_ = 0.0;
    std::optional<std::uint32_t> selected_;
    std::optional<QPointF> press_px_; // where the left button went down
    double press_t0_s_ = 0.0;         // the range when it went down
    double press_t1_s_ = 0.0;
    bool dragged_ = false;
};

// Multi-line details of an event: kind, rank, stream, micro-batch, times, bytes, FLOPs.
QString describe_event(const core::TraceEvent& event);

// The mouse and keyboard controls of the timeline (Help ▸ Timeline controls), written next to
// the handlers so the two change together.
QString timeline_controls_text();

} // namespace trident::gui

Q_DECLARE_METATYPE(trident::core::TraceEvent)
