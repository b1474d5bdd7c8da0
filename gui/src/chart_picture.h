#pragma once
// A chart as a display list: boxes, lines and texts laid out once, then painted on screen, into
// a PNG or written as SVG text, so the three pictures cannot disagree. The memory chart, the
// scaling plot and the tp × pp heat map are each a layout function over this.
#include <QColor>
#include <QLineF>
#include <QPointF>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <vector>

class QPainter;

namespace trident::gui {

struct ChartBox {
    QRectF rect;
    QColor fill;
};
struct ChartLine {
    QLineF line;
    QColor color;
    bool dashed = false;
    double width = 1.0; // dashed lines are drawn 2 wide
};
struct ChartText {
    QPointF anchor; // baseline start, or baseline centre when centred
    QString text;
    QColor color;
    bool centred = false;
};

struct ChartPicture {
    QSizeF size;
    std::vector<ChartBox> boxes; // painted first, in order
    std::vector<ChartLine> lines;
    std::vector<ChartText> texts; // painted last
};

inline const QColor kChartTextColor(40, 40, 40);
inline const QColor kChartAxisColor(120, 120, 120);

// 1, 2 or 5 times a power of ten, so ticks read as round numbers; at most `ticks` of them
// below `max_units` so their labels never overlap.
double tick_step(double max_units, int ticks);

void paint_chart(const ChartPicture& picture, QPainter& painter);
QString chart_svg(const ChartPicture& picture);

} // namespace trident::gui
