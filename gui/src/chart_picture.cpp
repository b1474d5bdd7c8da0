#include "chart_picture.h"

#include <QFontMetricsF>
#include <QPainter>
#include <algorithm>
#include <cmath>

namespace trident::gui {

// 1, 2 or 5 times a power of ten of the axis unit, so ticks read as round numbers; at most
// `ticks` of them so their labels never overlap.
double tick_step(double max_units, int ticks) {
    if (!std::isfinite(max_units) || max_units <= 0) return 1.0; // an axis of nothing
    const double raw = max_units / std::max(ticks, 1);
    const double power = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-6))));
    for (const double m : {1.0, 2.0, 5.0, 10.0})
        if (raw <= m * power) return m * power;
    return 10.0 * power;
}

void paint_chart(const ChartPicture& picture, QPainter& painter) {
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, false);
    for (const ChartBox& b : picture.boxes) painter.fillRect(b.rect, b.fill);
    for (const ChartLine& l : picture.lines) {
        QPen pen(l.color, l.dashed ? 2.0 : l.width);
        if (l.dashed) pen.setStyle(Qt::DashLine);
        painter.setPen(pen);
        painter.drawLine(l.line);
    }
    const QFontMetricsF metrics(painter.font());
    for (const ChartText& t : picture.texts) {
        painter.setPen(t.color);
        const double shift = t.centred ? metrics.horizontalAdvance(t.text) / 2 : 0.0;
        painter.drawText(QPointF(t.anchor.x() - shift, t.anchor.y()), t.text);
    }
    painter.restore();
}

QString chart_svg(const ChartPicture& picture) {
    QString svg;
    const auto num = [](double v) { return QString::number(v, 'f', 1); };
    svg += QString("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%1\" height=\"%2\" "
                   "viewBox=\"0 0 %1 %2\" font-family=\"DejaVu Sans, sans-serif\" "
                   "font-size=\"11\">\n")
               .arg(num(picture.size.width()), num(picture.size.height()));
    for (const ChartBox& b : picture.boxes)
        svg += QString("<rect x=\"%1\" y=\"%2\" width=\"%3\" height=\"%4\" fill=\"%5\"/>\n")
                   .arg(num(b.rect.x()), num(b.rect.y()), num(b.rect.width()), num(b.rect.height()),
                        b.fill.name());
    for (const ChartLine& l : picture.lines)
        svg += QString("<line x1=\"%1\" y1=\"%2\" x2=\"%3\" y2=\"%4\" stroke=\"%5\" "
                       "stroke-width=\"%6\"%7/>\n")
                   .arg(num(l.line.x1()), num(l.line.y1()), num(l.line.x2()), num(l.line.y2()),
                        l.color.name(), QString::number(l.dashed ? 2.0 : l.width),
                        l.dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (const ChartText& t : picture.texts)
        svg += QString("<text x=\"%1\" y=\"%2\" fill=\"%3\"%4>%5</text>\n")
                   .arg(num(t.anchor.x()), num(t.anchor.y()), t.color.name(),
                        t.centred ? " text-anchor=\"middle\"" : "", t.text.toHtmlEscaped());
    svg += "</svg>\n";
    return svg;
}

} // namespace trident::gui
