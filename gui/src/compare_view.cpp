#include "compare_view.h"

#include "timeline_render.h"

#include <QHeaderView>
#include <QPainter>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>

namespace trident::gui {
namespace {

QString percent(double fraction) {
    return QStringLiteral("%1%").arg(100.0 * fraction, 0, 'f', 1);
}

QString signed_duration(double seconds) {
    return (seconds > 0.0 ? QStringLiteral("+") : QString()) + format_duration(seconds);
}

QString signed_points(double fraction) {
    return QStringLiteral("%1%2 pt")
        .arg(fraction > 0.0 ? "+" : "")
        .arg(100.0 * fraction, 0, 'f', 1);
}

} // namespace

CompareView::CompareView(QWidget* parent)
    : QWidget(parent), view_a_(new TimelineView), view_b_(new TimelineView),
      table_(new QTableWidget) {
    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(view_a_);
    splitter->addWidget(view_b_);
    splitter->addWidget(table_);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 3);
    splitter->setStretchFactor(2, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(splitter);

    table_->setColumnCount(10);
    table_->setHorizontalHeaderLabels({tr("lane"), tr("busy A"), tr("busy B"), tr("Δ busy"),
                                       tr("bubble A"), tr("bubble B"), tr("Δ bubble"), tr("end A"),
                                       tr("end B"), tr("Δ end")});
    table_->verticalHeader()->setVisible(false);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

    link(view_a_, view_b_);
    link(view_b_, view_a_);
}

void CompareView::link(TimelineView* from, TimelineView* to) {
    connect(from, &TimelineView::time_range_changed, this, [this, to](double t0_s, double t1_s) {
        if (syncing_) return;
        syncing_ = true;
        to->set_time_range(t0_s, t1_s);
        syncing_ = false;
    });
    connect(from, &TimelineView::collapsed_changed, to, &TimelineView::set_collapsed);
}

void CompareView::set_traces(const core::Trace& a, const QString& a_title, const core::Trace& b,
                             const QString& b_title) {
    set_models(std::make_shared<const TimelineModel>(a), a_title,
               std::make_shared<const TimelineModel>(b), b_title);
}

void CompareView::set_models(std::shared_ptr<const TimelineModel> a, const QString& a_title,
                             std::shared_ptr<const TimelineModel> b, const QString& b_title) {
    syncing_ = true; // the views get the same extent below; no copying while it settles
    view_a_->set_model(std::move(a), a_title);
    view_b_->set_model(std::move(b), b_title);
    const TimelineModel& model_a = view_a_->model();
    const TimelineModel& model_b = view_b_->model();
    const bool a_empty = model_a.events().empty();
    const bool b_empty = model_b.events().empty();
    double start_s = 0.0;
    double end_s = 1.0;
    if (!a_empty || !b_empty) {
        start_s = std::min(a_empty ? model_b.step_start_s() : model_a.step_start_s(),
                           b_empty ? model_a.step_start_s() : model_b.step_start_s());
        end_s = std::max(a_empty ? model_b.step_end_s() : model_a.step_end_s(),
                         b_empty ? model_a.step_end_s() : model_b.step_end_s());
    }
    view_a_->set_time_extent(start_s, end_s);
    view_b_->set_time_extent(start_s, end_s);
    syncing_ = false;
    differences_ = compare_lanes(model_a, model_b);
    fill_table();
}

void CompareView::fill_table() {
    table_->setRowCount(static_cast<int>(differences_.size()));
    for (int r = 0; r < static_cast<int>(differences_.size()); ++r) {
        const LaneDifference& row = differences_[static_cast<std::size_t>(r)];
        const QString missing = QStringLiteral("—");
        const bool both = row.in_a && row.in_b;
        const QStringList cells = {
            QString::fromStdString(row.lane),
            row.in_a ? format_duration(row.busy_a_s) : missing,
            row.in_b ? format_duration(row.busy_b_s) : missing,
            both ? signed_duration(row.busy_b_s - row.busy_a_s) : missing,
            row.in_a ? percent(row.bubble_a) : missing,
            row.in_b ? percent(row.bubble_b) : missing,
            both ? signed_points(row.bubble_b - row.bubble_a) : missing,
            row.in_a ? format_duration(row.end_a_s) : missing,
            row.in_b ? format_duration(row.end_b_s) : missing,
            both ? signed_duration(row.end_b_s - row.end_a_s) : missing,
        };
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            table_->setItem(r, c, item);
        }
    }
}

void CompareView::render_png(const QString& path, QSize size) const {
    const TimelineDisplayList a =
        view_a_->display_list(size.isEmpty() ? view_a_->canvas_size() : size);
    const TimelineDisplayList b =
        view_b_->display_list(size.isEmpty() ? view_b_->canvas_size() : size);
    QImage image(std::max(a.size.width(), b.size.width()), a.size.height() + b.size.height(),
                 QImage::Format_RGB32);
    image.fill(a.background);
    QPainter painter(&image);
    paint_display_list(painter, a);
    painter.translate(0, a.size.height());
    paint_display_list(painter, b);
    painter.end();
    save_image_png(image, path);
}

void CompareView::render_svg(const QString& path, QSize size) const {
    save_text_file(
        stacked_svg({view_a_->display_list(size.isEmpty() ? view_a_->canvas_size() : size),
                     view_b_->display_list(size.isEmpty() ? view_b_->canvas_size() : size)}),
        path);
}

} // namespace trident::gui
