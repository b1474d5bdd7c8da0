#include "scaling_chart_picture.h"

#include <algorithm>
#include <cmath>

namespace trident::gui {
namespace {

constexpr double kLeft = 58.0, kRight = 14.0, kTop = 30.0, kBottom = 34.0, kGap = 24.0;
constexpr double kDot = 7.0;

// "1.2M", "950K", "12": values on an axis in three characters or so.
QString short_number(double v) {
    const char* units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (std::abs(v) >= 1000.0 && u < 4) {
        v /= 1000.0;
        ++u;
    }
    return QString::number(v, 'g', 3) + units[u];
}

// Where `n` nodes sit on the plot's log2 axis from the first size to the last.
double x_of(const QRectF& plot, const std::vector<std::int64_t>& nodes, std::int64_t n) {
    const double lo = std::log2(double(nodes.front())), hi = std::log2(double(nodes.back()));
    return hi > lo ? plot.left() + plot.width() * (std::log2(double(n)) - lo) / (hi - lo)
                   : plot.center().x();
}

// One plot: title, axes, y ticks from 0, x ticks at each size, the series as dots joined by
// lines; returns the dots' centres.
std::vector<QPointF> plot_series(ChartPicture& p, const QRectF& plot, const QString& title,
                                 const std::vector<std::int64_t>& nodes,
                                 const std::vector<double>& values, double top_value,
                                 const QColor& color, bool dashed) {
    const auto y_of = [&](double v) { return plot.bottom() - plot.height() * v / top_value; };
    std::vector<QPointF> centres;
    for (std::size_t i = 0; i < values.size(); ++i) {
        centres.emplace_back(x_of(plot, nodes, nodes[i]), y_of(values[i]));
        if (i > 0) p.lines.push_back({QLineF(centres[i - 1], centres[i]), color, dashed, 2.0});
    }
    if (!dashed) {
        for (const QPointF& c : centres)
            p.boxes.push_back({QRectF(c.x() - kDot / 2, c.y() - kDot / 2, kDot, kDot), color});
        p.texts.push_back({QPointF(plot.left(), plot.top() - 10), title, kChartTextColor});
    }
    return centres;
}

void axes(ChartPicture& p, const QRectF& plot, const std::vector<std::int64_t>& nodes,
          double top_value) {
    p.lines.push_back({QLineF(plot.bottomLeft(), plot.topLeft()), kChartAxisColor});
    p.lines.push_back({QLineF(plot.bottomLeft(), plot.bottomRight()), kChartAxisColor});
    const double step = tick_step(top_value, std::min(5, int(plot.height() / 20.0)));
    for (double v = 0; v <= top_value * 1.0001; v += step) {
        const double y = plot.bottom() - plot.height() * v / top_value;
        p.lines.push_back({QLineF(plot.left() - 4, y, plot.left(), y), kChartAxisColor});
        p.texts.push_back({QPointF(4, y + 4), short_number(v), kChartTextColor});
    }
    for (const std::int64_t n : nodes) {
        const double x = x_of(plot, nodes, n);
        p.lines.push_back({QLineF(x, plot.bottom(), x, plot.bottom() + 4), kChartAxisColor});
        p.texts.push_back(
            {QPointF(x, plot.bottom() + 16), QString::number(n), kChartTextColor, true});
    }
    p.texts.push_back(
        {QPointF(plot.center().x(), plot.bottom() + 30), "nodes", kChartTextColor, true});
}

} // namespace

QColor throughput_color() {
    return {31, 119, 180};
}
QColor cost_color() {
    return {214, 96, 39};
}

ScalingChartPicture layout_scaling_chart(const std::vector<ScalingPoint>& given, QSizeF size) {
    // Only finite, positive figures can be placed (a size the failures stall has no cost).
    std::vector<ScalingPoint> points;
    for (const ScalingPoint& s : given)
        if (s.nodes > 0 && std::isfinite(s.tokens_per_s) && s.tokens_per_s > 0 &&
            std::isfinite(s.gpu_hours_per_billion) && s.gpu_hours_per_billion > 0)
            points.push_back(s);
    ScalingChartPicture p;
    p.size = size;
    p.boxes.push_back({QRectF(QPointF(0, 0), size), Qt::white});
    if (points.empty()) {
        p.texts.push_back({QPointF(size.width() / 2, size.height() / 2),
                           "Compare sizes to plot tokens/s and cost against nodes", kChartTextColor,
                           true});
        return p;
    }
    std::vector<std::int64_t> nodes;
    std::vector<double> rate, ideal, cost;
    for (const ScalingPoint& s : points) {
        nodes.push_back(s.nodes);
        rate.push_back(s.tokens_per_s);
        ideal.push_back(points.front().tokens_per_s * double(s.nodes) /
                        double(points.front().nodes));
        cost.push_back(s.gpu_hours_per_billion);
    }
    const double half = (size.width() - kGap) / 2;
    p.throughput_plot = QRectF(kLeft, kTop, std::max(1.0, half - kLeft - kRight),
                               std::max(1.0, size.height() - kTop - kBottom));
    p.cost_plot = p.throughput_plot.translated(half + kGap, 0);
    const double rate_top = 1.1 * std::max(*std::max_element(rate.begin(), rate.end()),
                                           *std::max_element(ideal.begin(), ideal.end()));
    const double cost_top = 1.1 * *std::max_element(cost.begin(), cost.end());
    axes(p, p.throughput_plot, nodes, rate_top);
    // The cost plot's tick labels sit left of its own axis.
    ChartPicture right;
    axes(right, p.cost_plot, nodes, cost_top);
    for (ChartText& t : right.texts)
        if (t.anchor.x() < 10) t.anchor.setX(p.cost_plot.left() - kLeft + 4);
    p.lines.insert(p.lines.end(), right.lines.begin(), right.lines.end());
    p.texts.insert(p.texts.end(), right.texts.begin(), right.texts.end());
    p.ideal_points =
        plot_series(p, p.throughput_plot, "", nodes, ideal, rate_top, kChartAxisColor, true);
    p.throughput_points = plot_series(p, p.throughput_plot, "tokens/s (dashed: linear scaling)",
                                      nodes, rate, rate_top, throughput_color(), false);
    p.cost_points = plot_series(p, p.cost_plot, "GPU-hours per billion tokens", nodes, cost,
                                cost_top, cost_color(), false);
    return p;
}

} // namespace trident::gui
