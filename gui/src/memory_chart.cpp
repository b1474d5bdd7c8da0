#include "memory_chart.h"

#include "trident/core/units.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

namespace trident::gui {

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent) {
    setMinimumSize(240, 160);
    setMouseTracking(true);
}

void MemoryChart::set_stages(std::vector<simulator::StageMemory> stages, double budget_bytes) {
    stages_ = std::move(stages);
    budget_bytes_ = budget_bytes;
    update();
}

void MemoryChart::clear() {
    set_stages({}, 0.0);
}

MemoryChartPicture MemoryChart::picture(QSizeF size) const {
    return layout_memory_chart(stages_, budget_bytes_, size);
}

QImage MemoryChart::render_image(QSize size) const {
    QImage image(size, QImage::Format_ARGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    paint_chart(picture(size), painter);
    return image;
}

QString MemoryChart::render_svg(QSize size) const {
    return chart_svg(picture(size));
}

void MemoryChart::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    paint_chart(picture(size()), painter);
}

QString MemoryChart::describe_at(QPointF point) const {
    const MemoryChartPicture p = picture(size());
    for (std::size_t s = 0; s < p.bars.size() && s < stages_.size(); ++s) {
        if (!p.bars[s].contains(point)) continue;
        const auto text_of = [](double bytes) {
            return QString::fromStdString(core::bytes_text(bytes, 2));
        };
        QString text =
            QString("stage %1: %2 per rank").arg(s).arg(text_of(stages_[s].total_bytes()));
        for (int i = 0; i < kMemoryPartCount; ++i)
            text += QString("\n  %1 %2")
                        .arg(QString::fromUtf8(kMemoryPartNames[i].data(),
                                               int(kMemoryPartNames[i].size())))
                        .arg(text_of(memory_part_bytes(stages_[s], MemoryPart(i))));
        if (budget_bytes_ > 0) text += QString("\n  budget %1").arg(text_of(budget_bytes_));
        return text;
    }
    return {};
}

bool MemoryChart::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString text = describe_at(help->pos());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(event);
}

} // namespace trident::gui
