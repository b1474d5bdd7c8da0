// The planner's memory chart: one stacked bar per stage against the budget, the same picture
// on screen, in PNG and in SVG.
#include "memory_chart.h"
#include "planner_request.h"
#include "planner_table_model.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"

#include <gtest/gtest.h>

namespace trident::gui {
namespace {

using core::kGiB;

std::vector<simulator::StageMemory> two_stages() {
    simulator::StageMemory a;
    a.weights_bytes = 10 * kGiB;
    a.gradients_bytes = 10 * kGiB;
    a.optimizer_bytes = 20 * kGiB;
    a.activations_bytes = 15 * kGiB;
    a.buffers_bytes = 1 * kGiB;
    a.allocator_reserve_bytes = 2 * kGiB;
    a.runtime_bytes = 1 * kGiB;
    simulator::StageMemory b = a;
    b.activations_bytes = 5 * kGiB;
    return {a, b};
}

TEST(PlannerMemoryChart, OneStackedBarPerStageUnderTheBudgetLine) {
    const MemoryChartPicture p = layout_memory_chart(two_stages(), 70 * kGiB, QSizeF(600, 300));
    EXPECT_EQ(p.bar_count, 2);
    EXPECT_GE(p.axis_max_bytes, 70 * kGiB);
    int segments = 0;
    double stage0_top = 1e9, stage1_top = 1e9;
    for (const ChartBox& box : p.boxes) {
        for (int part = 0; part < kMemoryPartCount; ++part)
            // Bar segments, not the 10-pixel legend swatches.
            if (box.fill == memory_part_color(MemoryPart(part)) && box.rect.width() > 10) {
                ++segments;
                (box.rect.center().x() < 300 ? stage0_top : stage1_top) =
                    std::min(box.rect.center().x() < 300 ? stage0_top : stage1_top, box.rect.top());
            }
    }
    EXPECT_EQ(segments, 2 * kMemoryPartCount);
    // Stage 0 holds 59 GiB, stage 1 49 GiB: both below the 70 GiB line (smaller y is higher).
    EXPECT_GT(stage0_top, p.budget_y);
    EXPECT_GT(stage1_top, stage0_top);
}

TEST(PlannerMemoryChart, PixelsAndSvgShowTheSameBars) {
    MemoryChart chart;
    chart.set_stages(two_stages(), 70 * kGiB);
    const QImage image = chart.render_image(QSize(600, 300));
    const MemoryChartPicture p = chart.picture(QSizeF(600, 300));
    for (const ChartBox& box : p.boxes)
        if (box.fill == memory_part_color(MemoryPart::weights)) {
            const QPoint c = box.rect.center().toPoint();
            EXPECT_EQ(image.pixelColor(c), box.fill);
        }
    const QString svg = chart.render_svg(QSize(600, 300));
    EXPECT_TRUE(svg.startsWith("<svg"));
    EXPECT_EQ(svg.count(memory_part_color(MemoryPart::optimizer).name()), 1 + 2)
        << "legend swatch and one segment per stage";
    EXPECT_TRUE(svg.contains("stroke-dasharray")) << "the budget line";
    EXPECT_TRUE(svg.contains(">stage 1<"));
}

TEST(PlannerMemoryChart, HoveringABarDescribesItsStage) {
    MemoryChart chart;
    chart.resize(600, 300);
    chart.set_stages(two_stages(), 70 * kGiB);
    const MemoryChartPicture p = chart.picture(QSizeF(600, 300));
    ASSERT_EQ(p.bars.size(), 2u);
    const QString text = chart.describe_at(p.bars[1].center());
    EXPECT_TRUE(text.startsWith("stage 1: 49.00 GiB")) << text.toStdString();
    EXPECT_TRUE(text.contains("activations 5.00 GiB")) << text.toStdString();
    EXPECT_TRUE(chart.describe_at(QPointF(1, 1)).isEmpty());
}

TEST(PlannerMemoryChart, EmptyChartDrawsNoBars) {
    MemoryChart chart;
    EXPECT_EQ(chart.bar_count(), 0);
    EXPECT_FALSE(chart.render_image(QSize(200, 100)).isNull());
}

TEST(PlannerTable, SortRoleIsTheNumberAndDisplayIsForPeople) {
    planner::Candidate c;
    c.job.plan.tp = 2;
    c.job.plan.recompute.granularity = core::RecomputeGranularity::full;
    c.job.plan.recompute.num_layers = 3;
    c.step_time_s = 0.0125;
    c.mfu = 0.42;
    c.peak_memory_bytes = 12 * kGiB;
    PlannerTableModel model;
    model.set_candidates({c}, 70 * kGiB);
    ASSERT_EQ(model.rowCount(), 1);
    const auto at = [&](int column, int role) { return model.index(0, column).data(role); };
    EXPECT_EQ(at(PlannerTableModel::tp, PlannerTableModel::kSortRole).toLongLong(), 2);
    EXPECT_DOUBLE_EQ(at(PlannerTableModel::step_time, PlannerTableModel::kSortRole).toDouble(),
                     0.0125);
    EXPECT_EQ(at(PlannerTableModel::step_time, Qt::DisplayRole).toString(), "12.5 ms");
    EXPECT_EQ(at(PlannerTableModel::mfu, Qt::DisplayRole).toString(), "42.0 %");
    EXPECT_EQ(at(PlannerTableModel::recompute, Qt::DisplayRole).toString(), "full 3");
    EXPECT_EQ(at(PlannerTableModel::peak_memory, Qt::DisplayRole).toString(), "12.0 / 70.0 GiB");
    EXPECT_EQ(model.headerData(PlannerTableModel::zero, Qt::Horizontal, Qt::DisplayRole), "ZeRO");
}

} // namespace
} // namespace trident::gui
