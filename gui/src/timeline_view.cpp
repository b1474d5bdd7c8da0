#include "timeline_view.h"

#include "timeline_colors.h"
#include "timeline_layout.h"
#include "timeline_render.h"

#include <QContextMenuEvent>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QResizeEvent>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace trident::gui {
namespace {

constexpr double kDragThresholdPx = 4.0;
constexpr double kZoomPerNotch = 0.8; // one wheel notch shows 80% of the time span
constexpr double kMinSpanS = 1e-9;
constexpr int kScrollPerNotchPx = 60; // Shift+wheel: about two lanes per notch

} // namespace

TimelineView::TimelineView(QWidget* parent)
    : QWidget(parent), model_(std::make_shared<const TimelineModel>()) {
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumSize(300, 120);
    setAttribute(Qt::WA_OpaquePaintEvent);
    scrollbar_ = new QScrollBar(Qt::Vertical, this);
    scrollbar_->setSingleStep(20);
    scrollbar_->hide();
    connect(scrollbar_, &QScrollBar::valueChanged, this,
            [this](int value) { set_lane_scroll(value); });
}

QSize TimelineView::canvas_size() const {
    if (scrollbar_->isHidden()) return size();
    return {std::max(1, width() - scrollbar_->sizeHint().width()), height()};
}

void TimelineView::set_lane_scroll(double scroll_px) {
    // Whole pixels, as the scrollbar counts them; the layout clamps the last fraction.
    const double max_px =
        std::ceil(layout_timeline(*model_, viewport(canvas_size())).max_scroll_px());
    const double clamped = std::clamp(std::round(scroll_px), 0.0, max_px);
    if (clamped == scroll_px_) return;
    scroll_px_ = clamped;
    scrollbar_->setValue(static_cast<int>(std::lround(scroll_px_)));
    update();
}

void TimelineView::update_scrollbar() {
    // Lane heights depend on the height only, so the full width tells whether lanes overflow.
    const TimelineLayout geometry = layout_timeline(*model_, viewport(size()));
    const int max_px = static_cast<int>(std::ceil(geometry.max_scroll_px()));
    const QSignalBlocker blocker(scrollbar_);
    scrollbar_->setRange(0, max_px);
    scrollbar_->setPageStep(std::max(1, static_cast<int>(geometry.plot.height())));
    scrollbar_->setHidden(max_px == 0);
    const int bar_px = scrollbar_->sizeHint().width();
    scrollbar_->setGeometry(width() - bar_px, static_cast<int>(geometry.plot.top()), bar_px,
                            static_cast<int>(geometry.plot.height()));
    scroll_px_ = std::clamp(scroll_px_, 0.0, static_cast<double>(max_px));
    scrollbar_->setValue(static_cast<int>(std::lround(scroll_px_)));
    update();
}

void TimelineView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    update_scrollbar();
}

void TimelineView::set_trace(const core::Trace& trace, const QString& title) {
    set_model(std::make_shared<const TimelineModel>(trace), title);
}

void TimelineView::set_model(std::shared_ptr<const TimelineModel> model, const QString& title) {
    model_ = model ? std::move(model) : std::make_shared<const TimelineModel>();
    title_ = title;
    selected_.reset();
    const double length_s = model_->step_length_s();
    set_time_extent(model_->step_start_s(),
                    model_->step_start_s() + (length_s > 0.0 ? length_s : 1.0));
    scroll_px_ = 0.0;
    update_scrollbar();
}

void TimelineView::set_time_extent(double start_s, double end_s) {
    if (!std::isfinite(start_s) || !std::isfinite(end_s) || !(end_s > start_s)) return;
    extent_start_s_ = start_s;
    extent_end_s_ = end_s;
    reset_time_range();
}

void TimelineView::reset_time_range() {
    set_time_range(extent_start_s_, extent_end_s_);
}

void TimelineView::set_time_range(double t0_s, double t1_s) {
    if (!std::isfinite(t0_s) || !std::isfinite(t1_s)) return;
    if (t1_s < t0_s) std::swap(t0_s, t1_s);
    // Zooming out stops a little beyond the step, panning stops at its ends: the view never
    // wanders into empty time.
    const double extent_s = std::max(extent_end_s_ - extent_start_s_, kMinSpanS);
    const double lo_s = extent_start_s_ - 0.05 * extent_s;
    const double hi_s = extent_end_s_ + 0.05 * extent_s;
    double span_s = std::clamp(t1_s - t0_s, kMinSpanS, hi_s - lo_s);
    t0_s = std::clamp(t0_s, lo_s, hi_s - span_s);
    t1_s = t0_s + span_s;
    if (t0_s == t0_s_ && t1_s == t1_s_) return;
    t0_s_ = t0_s;
    t1_s_ = t1_s;
    update();
    emit time_range_changed(t0_s_, t1_s_);
}

void TimelineView::set_collapsed(bool collapsed) {
    if (collapsed == collapsed_) return;
    collapsed_ = collapsed;
    update_scrollbar();
    emit collapsed_changed(collapsed_);
}

void TimelineView::select_event(std::optional<std::uint32_t> index) {
    if (index && *index >= model_->events().size()) index.reset();
    selected_ = index;
    update();
    if (selected_) emit event_selected(model_->event(*selected_), *selected_);
}

TimelineViewport TimelineView::viewport() const {
    return viewport(canvas_size());
}

TimelineViewport TimelineView::viewport(QSize size) const {
    return {t0_s_, t1_s_, size.width(), size.height(), collapsed_, scroll_px_};
}

TimelineLayout TimelineView::layout() const {
    return layout_timeline(*model_, viewport());
}

DisplayListOptions TimelineView::options() const {
    DisplayListOptions options;
    options.title = title_;
    options.selected_event = selected_;
    return options;
}

TimelineDisplayList TimelineView::display_list(QSize size) const {
    return build_display_list(*model_, layout_timeline(*model_, viewport(size)), options());
}

void TimelineView::render_png(const QString& path, QSize size) const {
    save_image_png(render_display_list(display_list(size.isEmpty() ? canvas_size() : size)), path);
}

void TimelineView::render_svg(const QString& path, QSize size) const {
    save_text_file(display_list_svg(display_list(size.isEmpty() ? canvas_size() : size)), path);
}

void TimelineView::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    const QSize canvas = canvas_size();
    // The strip behind the scrollbar, above and below it, in the canvas's colour.
    if (canvas.width() < width())
        painter.fillRect(QRect(canvas.width(), 0, width() - canvas.width(), height()),
                         background_color());
    paint_display_list(painter, display_list(canvas));
}

void TimelineView::zoom_around(double x_px, double factor) {
    const TimelineLayout geometry = layout();
    const double x_clamped = std::clamp(x_px, geometry.plot.left(), geometry.plot.right());
    const double t_s = geometry.t_of(x_clamped);
    // The time under the cursor stays under the cursor.
    set_time_range(t_s - (t_s - t0_s_) * factor, t_s + (t1_s_ - t_s) * factor);
}

void TimelineView::wheelEvent(QWheelEvent* event) {
    if (event->modifiers() & Qt::ShiftModifier) {
        // Some platforms turn Shift+wheel into a horizontal wheel: take either axis.
        const QPoint delta = event->angleDelta();
        const double notches = (delta.y() != 0 ? delta.y() : delta.x()) / 120.0;
        if (notches == 0.0 || scrollbar_->isHidden()) {
            event->ignore();
            return;
        }
        set_lane_scroll(scroll_px_ - notches * kScrollPerNotchPx);
        event->accept();
        return;
    }
    const double notches = event->angleDelta().y() / 120.0;
    if (notches == 0.0) {
        event->ignore();
        return;
    }
    zoom_around(event->position().x(), std::pow(kZoomPerNotch, notches));
    event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton) return QWidget::mousePressEvent(event);
    press_px_ = event->position();
    press_t0_s_ = t0_s_;
    press_t1_s_ = t1_s_;
    dragged_ = false;
    event->accept();
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
    if (!press_px_ || !(event->buttons() & Qt::LeftButton)) return;
    const double dx_px = event->position().x() - press_px_->x();
    if (!dragged_ && std::abs(dx_px) < kDragThresholdPx) return;
    dragged_ = true;
    setCursor(Qt::ClosedHandCursor);
    const double seconds_per_px =
        (press_t1_s_ - press_t0_s_) / std::max(1.0, layout().plot.width());
    set_time_range(press_t0_s_ - dx_px * seconds_per_px, press_t1_s_ - dx_px * seconds_per_px);
    event->accept();
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton || !press_px_) return QWidget::mouseReleaseEvent(event);
    if (!dragged_) {
        const std::optional<TimelineHit> hit = hit_test(*model_, layout(), event->position());
        select_event(hit ? hit->event : std::nullopt);
    }
    press_px_.reset();
    dragged_ = false;
    unsetCursor();
    event->accept();
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
    // A double click on the labels toggles the stage grouping; on the plot it shows all.
    if (event->position().x() < layout().plot.left()) {
        set_collapsed(!collapsed_);
    } else {
        reset_time_range();
    }
    event->accept();
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
    switch (event->key()) {
    case Qt::Key_C:
        set_collapsed(!collapsed_);
        break;
    case Qt::Key_Home:
    case Qt::Key_R:
        reset_time_range();
        break;
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        zoom_around(layout().plot.center().x(), kZoomPerNotch);
        break;
    case Qt::Key_Minus:
        zoom_around(layout().plot.center().x(), 1.0 / kZoomPerNotch);
        break;
    case Qt::Key_PageUp:
        set_lane_scroll(scroll_px_ - layout().plot.height());
        break;
    case Qt::Key_PageDown:
        set_lane_scroll(scroll_px_ + layout().plot.height());
        break;
    default:
        return QWidget::keyPressEvent(event);
    }
    event->accept();
}

void TimelineView::contextMenuEvent(QContextMenuEvent* event) {
    QMenu menu(this);
    QAction* collapse = menu.addAction(tr("One lane per pipeline stage"));
    collapse->setCheckable(true);
    collapse->setChecked(collapsed_);
    connect(collapse, &QAction::toggled, this, &TimelineView::set_collapsed);
    menu.addAction(tr("Show the whole step"), this, &TimelineView::reset_time_range);
    menu.exec(event->globalPos());
}

bool TimelineView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const std::optional<TimelineHit> hit = hit_test(*model_, layout(), help->pos());
        if (hit && hit->event) {
            QToolTip::showText(help->globalPos(), describe_event(model_->event(*hit->event)), this);
        } else if (hit && help->pos().x() < layout().plot.left()) {
            QToolTip::showText(help->globalPos(), describe_lane(*layout().lanes[hit->lane].lane),
                               this);
        } else if (help->pos().y() < layout().plot.top() &&
                   help->pos().x() < layout().plot.left() && !title_.isEmpty()) {
            QToolTip::showText(help->globalPos(), title_, this); // the title, never elided
        } else {
            QToolTip::hideText();
            event->ignore();
        }
        return true;
    }
    return QWidget::event(event);
}

QString timeline_controls_text() {
    return QStringLiteral(
        "Mouse\n"
        "  wheel: zoom in or out around the cursor\n"
        "  Shift+wheel (or the scroll bar): scroll the lanes\n"
        "  drag: pan in time\n"
        "  click a block: select it; hover a block or a lane label: its details\n"
        "  double-click the plot: show the whole step\n"
        "  double-click the labels: one lane per pipeline stage, or per rank\n"
        "  right-click: the same as a menu\n"
        "\n"
        "Keys\n"
        "  + or =: zoom in    -: zoom out\n"
        "  Home or R: show the whole step\n"
        "  C: one lane per pipeline stage, or per rank\n"
        "  Page Up / Page Down: scroll the lanes by a screen\n"
        "\n"
        "Colours\n"
        "  blue forward, orange backward (input), vermilion backward (weight), pink recompute,\n"
        "  green communication, violet optimizer; grey: idle (pipeline bubbles); a lighter\n"
        "  shade: the second model chunk (interleaved 1F1B, ZB-V, DualPipe)");
}

QString describe_event(const core::TraceEvent& event) {
    QString text = QStringLiteral("%1\nrank %2, %3 stream")
                       .arg(QString::fromUtf8(
                           core::kEventKindNames[static_cast<std::size_t>(event.kind)].data()))
                       .arg(event.rank)
                       .arg(QString::fromUtf8(
                           core::kStreamNames[static_cast<std::size_t>(event.stream)].data()));
    if (event.microbatch >= 0) text += QStringLiteral("\nmicro-batch %1").arg(event.microbatch);
    if (event.chunk >= 0) text += QStringLiteral(", chunk %1").arg(event.chunk);
    text += QStringLiteral("\n%1 → %2 (%3)")
                .arg(format_duration(event.start_s))
                .arg(format_duration(event.end_s))
                .arg(format_duration(event.end_s - event.start_s));
    if (event.bytes > 0.0) text += QStringLiteral("\n%1 MB").arg(event.bytes / 1e6, 0, 'g', 4);
    if (event.flops > 0.0) text += QStringLiteral("\n%1 GFLOP").arg(event.flops / 1e9, 0, 'g', 4);
    return text;
}

} // namespace trident::gui
