// The planner tab's what-if: tokens/s and cost against nodes, and the tp × pp heat map — laid
// out from the numbers, then read back from the pixels as the timeline tests do; and the panel
// driven as a user would (type sizes, click Compare sizes, wait).
#include "planner_panel.h"
#include "what_if_panel.h"

#include <QComboBox>
#include <QLineEdit>
#include <QPainter>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>
#include <gtest/gtest.h>
#include <limits>

namespace trident::gui {
namespace {

std::vector<ScalingPoint> three_sizes() {
    return {{1, 100.0, 10.0}, {2, 190.0, 10.5}, {4, 340.0, 11.8}};
}

planner::TpPpCell cell(std::int64_t tp, std::int64_t pp, std::optional<double> tokens_per_s) {
    planner::TpPpCell c;
    c.tp = tp;
    c.pp = pp;
    if (tokens_per_s) {
        c.best = planner::Candidate{};
        c.best->tokens_per_s = *tokens_per_s;
    } else {
        c.none_reason = "memory budget: no layout fits";
    }
    return c;
}

TEST(WhatIfCharts, ThroughputAndCostCurvesFollowTheNumbers) {
    const ScalingChartPicture p = layout_scaling_chart(three_sizes(), QSizeF(800, 300));
    ASSERT_EQ(p.throughput_points.size(), 3u);
    // Nodes on a log2 axis: 1, 2, 4 equally spaced; more tokens/s is higher on screen.
    EXPECT_NEAR(p.throughput_points[1].x() - p.throughput_points[0].x(),
                p.throughput_points[2].x() - p.throughput_points[1].x(), 1e-9);
    EXPECT_GT(p.throughput_points[0].y(), p.throughput_points[1].y());
    EXPECT_GT(p.throughput_points[1].y(), p.throughput_points[2].y());
    // 190 / 100 of the way: the y offsets from the axis are in the numbers' ratio.
    const double base = p.throughput_plot.bottom();
    EXPECT_NEAR((base - p.throughput_points[1].y()) / (base - p.throughput_points[0].y()), 1.9,
                1e-9);
    // The ideal line starts at the first size and runs above the measured curve (400 > 340).
    EXPECT_EQ(p.ideal_points[0], p.throughput_points[0]);
    EXPECT_LT(p.ideal_points[2].y(), p.throughput_points[2].y());
    // The cost plot is to the right, its points rising with the GPU-hours.
    EXPECT_GT(p.cost_points[0].x(), p.throughput_plot.right());
    EXPECT_GT(p.cost_points[0].y(), p.cost_points[2].y());

    // The pixels: each dot in its series' colour.
    WhatIfPanel panel([] { return PlannerRequest{}; });
    const QImage image = [&] {
        QImage i(QSize(800, 300), QImage::Format_ARGB32);
        i.fill(Qt::white);
        QPainter painter(&i);
        paint_chart(p, painter);
        return i;
    }();
    for (const QPointF& c : p.throughput_points)
        EXPECT_EQ(image.pixelColor(c.toPoint()), throughput_color()) << c.x() << "," << c.y();
    for (const QPointF& c : p.cost_points)
        EXPECT_EQ(image.pixelColor(c.toPoint()), cost_color()) << c.x() << "," << c.y();
    EXPECT_TRUE(chart_svg(p).contains(">tokens/s (dashed: linear scaling)<"));
}

TEST(WhatIfCharts, SizesWithoutAFiniteFigureAreLeftOut) {
    std::vector<ScalingPoint> points = three_sizes();
    points[1].gpu_hours_per_billion = std::numeric_limits<double>::infinity();
    const ScalingChartPicture p = layout_scaling_chart(points, QSizeF(800, 300));
    EXPECT_EQ(p.throughput_points.size(), 2u);
    EXPECT_EQ(p.cost_points.size(), 2u);
    const ScalingChartPicture none = layout_scaling_chart({}, QSizeF(800, 300));
    EXPECT_TRUE(none.throughput_points.empty());
    EXPECT_EQ(tick_step(std::numeric_limits<double>::infinity(), 5), 1.0);
}

TEST(WhatIfCharts, HeatMapCellsColourTheirThroughput) {
    // tp 1, 2 × pp 1, 2: fastest (tp 2, pp 1), slowest (tp 1, pp 2), (tp 1, pp 1) fits nothing.
    const std::vector<planner::TpPpCell> cells = {cell(1, 1, std::nullopt), cell(1, 2, 100.0),
                                                  cell(2, 1, 300.0), cell(2, 2, 200.0)};
    const HeatMapPicture p = layout_tp_pp_heat_map(cells, 8, QSizeF(400, 300));
    ASSERT_EQ(p.cells.size(), 4u);
    EXPECT_EQ(p.fastest, 2);
    EXPECT_EQ(p.cell_colors[0], no_layout_color());
    EXPECT_EQ(p.cell_colors[1], heat_color(0.0));
    EXPECT_EQ(p.cell_colors[2], heat_color(1.0));
    EXPECT_EQ(p.cell_colors[3], heat_color(0.5));
    // Rows are tp (top to bottom), columns pp (left to right).
    EXPECT_LT(p.cells[0].top(), p.cells[2].top());
    EXPECT_LT(p.cells[2].left(), p.cells[3].left());
    QImage image(QSize(400, 300), QImage::Format_ARGB32);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        paint_chart(p, painter);
    }
    for (std::size_t i = 0; i < 4; ++i) {
        // A quarter in from the top-left corner: inside the cell, clear of its centred label
        // and of the fastest cell's outline.
        const QRectF& r = p.cells[i];
        const QPoint inside(int(r.left() + r.width() / 4), int(r.top() + r.height() / 4));
        EXPECT_EQ(image.pixelColor(inside), p.cell_colors[i]) << "cell " << i;
    }
    const QRectF& best = p.cells[2];
    EXPECT_EQ(image.pixelColor(QPoint(int(best.center().x()), int(best.top()))), QColor(Qt::black))
        << "the fastest cell is outlined";
    EXPECT_TRUE(chart_svg(p).contains(">tp 2<"));
    // Faster is darker.
    EXPECT_LT(heat_color(1.0).lightnessF(), heat_color(0.5).lightnessF());
    EXPECT_LT(heat_color(0.5).lightnessF(), heat_color(0.0).lightnessF());
}

TEST(WhatIfPanelTest, CompareSizesPlotsEachSizeAndTheMap) {
    PlannerPanel planner;
    planner.resize(1400, 900);
    planner.show();
    planner.model_box()->setCurrentIndex(planner.model_box()->findText("gpt2-124m"));
    planner.cluster_box()->setCurrentIndex(planner.cluster_box()->findText("dgx-h100"));
    planner.nodes_box()->setValue(1);
    planner.devices_per_node_box()->setValue(8);
    WhatIfPanel& what_if = *planner.what_if();
    what_if.sizes_edit()->setText("1,2");
    QSignalSpy finished(&what_if, &WhatIfPanel::finished);
    QTest::mouseClick(what_if.compare_button(), Qt::LeftButton);
    ASSERT_TRUE(!finished.isEmpty() || finished.wait(60000)) << "the what-if did not finish";
    ASSERT_TRUE(finished.front().front().toBool()) << what_if.message().toStdString();
    const WhatIfOutcome& o = what_if.outcome();
    ASSERT_EQ(o.sizes.size(), 2u);
    EXPECT_EQ(o.sizes[0].nodes, 1);
    EXPECT_EQ(o.sizes[1].nodes, 2);
    EXPECT_GT(o.sizes[1].tokens_per_s, o.sizes[0].tokens_per_s);
    EXPECT_EQ(o.map_devices, 8);
    EXPECT_EQ(o.map.size(), 4u * 4u); // tp 1, 2, 4, 8 × pp 1, 2, 4, 8 on one node
    const QImage image = what_if.render_image(QSize(1000, 320));
    const ScalingChartPicture s = what_if.scaling_picture(QSizeF(1000, 320));
    for (const QPointF& c : s.throughput_points)
        EXPECT_EQ(image.pixelColor(c.toPoint()), throughput_color());
    const HeatMapPicture h = what_if.heat_map_picture(QSizeF(1000, 320));
    ASSERT_GE(h.fastest, 0);
    const QPointF offset = what_if.heat_map_rect(QSizeF(1000, 320)).topLeft();
    const QRectF& r = h.cells[std::size_t(h.fastest)];
    EXPECT_EQ(image.pixelColor(
                  (offset + QPointF(r.left() + r.width() / 4, r.top() + r.height() / 4)).toPoint()),
              heat_color(1.0));
    // The fastest cell at one node is the plot's one-node throughput.
    EXPECT_DOUBLE_EQ(o.map[std::size_t(h.fastest)].best->tokens_per_s, o.sizes[0].tokens_per_s);

    what_if.sizes_edit()->setText("1,x");
    QSignalSpy again(&what_if, &WhatIfPanel::finished);
    QTest::mouseClick(what_if.compare_button(), Qt::LeftButton);
    ASSERT_TRUE(!again.isEmpty() || again.wait(20000));
    EXPECT_FALSE(again.front().front().toBool());
    EXPECT_TRUE(what_if.message().startsWith("sizes: ")) << what_if.message().toStdString();
}

} // namespace
} // namespace trident::gui
