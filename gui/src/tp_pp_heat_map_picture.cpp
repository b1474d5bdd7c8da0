#include "tp_pp_heat_map_picture.h"

#include <algorithm>

namespace trident::gui {
namespace {

constexpr double kLeft = 44.0, kRight = 10.0, kTop = 30.0, kBottom = 36.0;

QColor mix(const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * t),
                            float(a.greenF() + (b.greenF() - a.greenF()) * t),
                            float(a.blueF() + (b.blueF() - a.blueF()) * t));
}

template <typename T>
void add_unique(std::vector<T>& values, T v) {
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
}

} // namespace

QColor heat_color(double fraction) {
    const QColor low(255, 247, 188), mid(65, 182, 196), high(8, 48, 107);
    const double t = std::clamp(fraction, 0.0, 1.0);
    return t < 0.5 ? mix(low, mid, 2 * t) : mix(mid, high, 2 * t - 1);
}

QColor no_layout_color() {
    return {215, 215, 215};
}

HeatMapPicture layout_tp_pp_heat_map(const std::vector<planner::TpPpCell>& cells,
                                     std::int64_t devices, QSizeF size) {
    HeatMapPicture p;
    p.size = size;
    p.boxes.push_back({QRectF(QPointF(0, 0), size), Qt::white});
    if (cells.empty()) {
        p.texts.push_back({QPointF(size.width() / 2, size.height() / 2),
                           "Compare sizes to map tp × pp", kChartTextColor, true});
        return p;
    }
    std::vector<std::int64_t> tps, pps;
    double fastest = 0.0, slowest = 0.0;
    for (const planner::TpPpCell& c : cells) {
        add_unique(tps, c.tp);
        add_unique(pps, c.pp);
        if (!c.best) continue;
        slowest = slowest == 0.0 ? c.best->tokens_per_s : std::min(slowest, c.best->tokens_per_s);
        fastest = std::max(fastest, c.best->tokens_per_s);
    }
    const QRectF grid(kLeft, kTop, std::max(1.0, size.width() - kLeft - kRight),
                      std::max(1.0, size.height() - kTop - kBottom));
    const double w = grid.width() / double(pps.size()), h = grid.height() / double(tps.size());
    p.texts.push_back({QPointF(kLeft, kTop - 10),
                       "best tokens/s per GPU by tp (rows) × pp (columns)", kChartTextColor});
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const planner::TpPpCell& c = cells[i];
        const auto row = std::find(tps.begin(), tps.end(), c.tp) - tps.begin();
        const auto col = std::find(pps.begin(), pps.end(), c.pp) - pps.begin();
        const QRectF rect(grid.left() + w * double(col) + 1, grid.top() + h * double(row) + 1,
                          w - 2, h - 2);
        QColor fill = no_layout_color();
        QString label = "–";
        if (c.best) {
            const double t =
                fastest > slowest ? (c.best->tokens_per_s - slowest) / (fastest - slowest) : 1.0;
            fill = heat_color(t);
            label = QString::number(c.best->tokens_per_s / double(devices), 'f', 0);
            if (c.best->tokens_per_s == fastest && p.fastest < 0) p.fastest = int(i);
        }
        p.cells.push_back(rect);
        p.cell_colors.push_back(fill);
        p.boxes.push_back({rect, fill});
        if (h >= 14 && w >= 26)
            p.texts.push_back({QPointF(rect.center().x(), rect.center().y() + 4), label,
                               fill.lightnessF() < 0.45 ? QColor(Qt::white) : kChartTextColor,
                               true});
    }
    if (p.fastest >= 0) { // outlined in black, inside the cell's border
        const QRectF r = p.cells[std::size_t(p.fastest)];
        for (const QLineF& edge :
             {QLineF(r.topLeft(), r.topRight()), QLineF(r.topRight(), r.bottomRight()),
              QLineF(r.bottomRight(), r.bottomLeft()), QLineF(r.bottomLeft(), r.topLeft())})
            p.lines.push_back({edge, Qt::black, false, 2.0});
    }
    for (std::size_t r = 0; r < tps.size(); ++r)
        p.texts.push_back({QPointF(4, grid.top() + h * (double(r) + 0.5) + 4),
                           "tp " + QString::number(tps[r]), kChartTextColor});
    for (std::size_t c = 0; c < pps.size(); ++c)
        p.texts.push_back({QPointF(grid.left() + w * (double(c) + 0.5), grid.bottom() + 16),
                           QString::number(pps[c]), kChartTextColor, true});
    p.texts.push_back(
        {QPointF(grid.center().x(), grid.bottom() + 30), "pp", kChartTextColor, true});
    return p;
}

} // namespace trident::gui
