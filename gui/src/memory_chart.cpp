#include "memory_chart.h"

#include <QPainter>

namespace trident::gui {

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent) {
    setMinimumSize(240, 160);
    setToolTip("Memory per rank of each pipeline stage against the budget (dashed)");
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
    paint_memory_chart(picture(size), painter);
    return image;
}

QString MemoryChart::render_svg(QSize size) const {
    return memory_chart_svg(picture(size));
}

void MemoryChart::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    paint_memory_chart(picture(size()), painter);
}

} // namespace trident::gui
