// Hundreds of ranks: lanes keep a readable height and scroll under a fixed axis and colour key,
// only the lanes in the vertical window are laid out and drawn, and the view's scrollbar,
// Shift+wheel and Page Down reach the last rank while the plain wheel still zooms.
#include "compare_view.h"
#include "timeline_colors.h"
#include "timeline_display_list.h"
#include "timeline_layout.h"
#include "timeline_render.h"
#include "timeline_test_traces.h"
#include "timeline_view.h"

#include <QApplication>
#include <QScrollBar>
#include <QTest>
#include <QWheelEvent>
#include <cmath>
#include <gtest/gtest.h>

namespace trident::gui {
namespace {

using testing::two_stage_trace;

constexpr int kRanks = 300; // two stages of 150 ranks; rank 299 is the last lane

TimelineViewport tall_view(double scroll_px = 0.0, bool collapsed = false) {
    return {0.0, 8.5, 1000, 600, collapsed, scroll_px};
}

// The middle of `stream`'s row of the laid-out lane holding model lane `index`.
std::optional<QPoint> point_at(const TimelineLayout& layout, std::size_t index, core::Stream stream,
                               double t_s) {
    for (const LaneBox& lane : layout.lanes) {
        if (lane.index != index) continue;
        for (const RowBox& row : lane.rows)
            if (row.row->stream == stream)
                return QPoint(static_cast<int>(layout.x_of(t_s)),
                              static_cast<int>(row.top_px + 0.5 * row.height_px));
    }
    return std::nullopt;
}

class TimelineScroll : public ::testing::Test {
protected:
    const TimelineModel model{two_stage_trace(kRanks / 2)};
};

TEST_F(TimelineScroll, LanesKeepTheirMinimumHeightAndOverflow) {
    ASSERT_EQ(model.lanes(false).size(), static_cast<std::size_t>(kRanks));
    const TimelineLayout layout = layout_timeline(model, tall_view());
    EXPECT_EQ(layout.lane_count, static_cast<std::size_t>(kRanks));
    double needed_px = TimelineLayout::kLaneGapPx;
    for (const TimelineLane& lane : model.lanes(false))
        needed_px += std::max<double>(TimelineLayout::kMinLaneHeightPx,
                                      TimelineLayout::kMinRowHeightPx *
                                          static_cast<double>(lane.rows.size())) +
                     TimelineLayout::kLaneGapPx;
    EXPECT_GE(layout.content_height_px, needed_px - 1e-6);
    EXPECT_NEAR(layout.max_scroll_px(), layout.content_height_px - layout.plot.height(), 1e-9);
    // Only the window is laid out: a few more lanes than fit, not all 300.
    const auto fit = static_cast<std::size_t>(
        layout.plot.height() / (TimelineLayout::kMinLaneHeightPx + TimelineLayout::kLaneGapPx));
    EXPECT_GE(layout.lanes.size(), fit - 1);
    EXPECT_LE(layout.lanes.size(), fit + 2);
    for (const LaneBox& lane : layout.lanes) {
        EXPECT_GE(lane.height_px, TimelineLayout::kMinLaneHeightPx);
        for (const RowBox& row : lane.rows)
            EXPECT_GE(row.height_px, TimelineLayout::kMinRowHeightPx);
    }
    EXPECT_EQ(layout.lanes.front().index, 0u);
    // A handful of ranks still fill the height without a scroll.
    const TimelineModel few(two_stage_trace(2));
    EXPECT_EQ(layout_timeline(few, tall_view()).max_scroll_px(), 0.0);
}

TEST_F(TimelineScroll, OnlyVisibleLanesProducePrimitives) {
    const TimelineLayout layout = layout_timeline(model, tall_view());
    const TimelineDisplayList list = build_display_list(model, layout);
    EXPECT_EQ(list.lane_count, static_cast<std::size_t>(kRanks));
    std::size_t labels = 0;
    for (const TextPrimitive& text : list.texts)
        if (text.role == TextRole::lane_label) ++labels;
    EXPECT_GE(labels, layout.lanes.size() - 1); // a lane cut at the bottom may lose its name
    EXPECT_LE(labels, layout.lanes.size());
    // Nothing is drawn over the axis or the colour key.
    for (const RectPrimitive& rect : list.rects) {
        if (rect.role == RectRole::legend) continue;
        EXPECT_GE(rect.rect.top(), layout.plot.top() - 1e-9);
        EXPECT_LE(rect.rect.bottom(), layout.plot.bottom() + 1e-9);
    }
    // At most ~6 blocks, an idle band, two labels, a name per row and a separator per visible
    // lane.
    EXPECT_LT(list.primitive_count(), 14 * layout.lanes.size() + 100);
}

TEST_F(TimelineScroll, ScrollingToTheEndShowsTheLastRank) {
    const TimelineViewport viewport = tall_view(1e9); // clamped to the end
    const TimelineLayout layout = layout_timeline(model, viewport);
    EXPECT_EQ(layout.scroll_px, layout.max_scroll_px());
    ASSERT_FALSE(layout.lanes.empty());
    const LaneBox& last = layout.lanes.back();
    EXPECT_EQ(last.index, static_cast<std::size_t>(kRanks - 1));
    EXPECT_EQ(last.lane->rank(), kRanks - 1);
    EXPECT_LE(last.top_px + last.height_px, layout.plot.bottom() + 1e-6);

    const TimelineDisplayList list = build_display_list(model, layout);
    bool labelled = false;
    for (const TextPrimitive& text : list.texts)
        labelled =
            labelled || (text.role == TextRole::lane_label && text.text == "stage 1 · rank 299");
    EXPECT_TRUE(labelled);
    // Rank 299 (stage 1) runs forward mb0 over [1.2, 2.2] s.
    const std::optional<QPoint> at = point_at(layout, kRanks - 1, core::Stream::compute, 1.7);
    ASSERT_TRUE(at);
    const QImage image = render_timeline(model, viewport);
    EXPECT_EQ(image.pixelColor(*at), kind_color(core::EventKind::forward));
}

TEST_F(TimelineScroll, CollapseStillGivesOneLanePerStage) {
    const TimelineLayout layout = layout_timeline(model, tall_view(500.0, true));
    ASSERT_EQ(layout.lanes.size(), 2u);
    EXPECT_EQ(layout.max_scroll_px(), 0.0);
    EXPECT_EQ(layout.scroll_px, 0.0);
}

class TimelineViewScroll : public ::testing::Test {
protected:
    void SetUp() override {
        view.resize(1000, 600);
        view.set_trace(two_stage_trace(kRanks / 2), QStringLiteral("300 ranks"));
        view.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    }

    void wheel(Qt::KeyboardModifiers modifiers, int delta) {
        const QPointF at(500.0, 300.0);
        QWheelEvent event(at, view.mapToGlobal(at), QPoint(), QPoint(0, delta), Qt::NoButton,
                          modifiers, Qt::NoScrollPhase, false);
        QApplication::sendEvent(&view, &event);
    }

    TimelineView view;
};

TEST_F(TimelineViewScroll, TheScrollbarCoversEveryLane) {
    QScrollBar* bar = view.lane_scrollbar();
    ASSERT_FALSE(bar->isHidden());
    const TimelineLayout layout = view.layout();
    EXPECT_EQ(bar->minimum(), 0);
    EXPECT_EQ(bar->maximum(), static_cast<int>(std::ceil(layout.max_scroll_px())));
    EXPECT_EQ(view.canvas_size().width(), view.width() - bar->sizeHint().width());

    bar->setValue(bar->maximum());
    EXPECT_EQ(view.lane_scroll(), bar->maximum());
    const TimelineLayout end = view.layout();
    ASSERT_FALSE(end.lanes.empty());
    EXPECT_EQ(end.lanes.back().lane->rank(), kRanks - 1);
    // The widget shows the last rank's forward block at that place.
    const std::optional<QPoint> at = point_at(end, kRanks - 1, core::Stream::compute, 1.7);
    ASSERT_TRUE(at);
    EXPECT_EQ(view.grab().toImage().pixelColor(*at), kind_color(core::EventKind::forward));
}

TEST_F(TimelineViewScroll, ShiftWheelScrollsAndThePlainWheelStillZooms) {
    wheel(Qt::ShiftModifier, -120); // one notch down
    EXPECT_GT(view.lane_scroll(), 0.0);
    EXPECT_EQ(view.time_range(), std::make_pair(0.0, 8.5));
    const double scrolled = view.lane_scroll();
    wheel(Qt::NoModifier, 120);
    EXPECT_EQ(view.lane_scroll(), scrolled);
    EXPECT_LT(view.time_range().second - view.time_range().first, 8.5);
    QTest::keyClick(&view, Qt::Key_PageDown);
    EXPECT_GT(view.lane_scroll(), scrolled);
    wheel(Qt::ShiftModifier, 120 * 1000); // far up: stops at the first lane
    EXPECT_EQ(view.lane_scroll(), 0.0);
}

TEST_F(TimelineViewScroll, CollapsingHidesTheScrollbar) {
    view.lane_scrollbar()->setValue(400);
    QTest::keyClick(&view, Qt::Key_C);
    EXPECT_TRUE(view.collapsed());
    EXPECT_TRUE(view.lane_scrollbar()->isHidden());
    EXPECT_EQ(view.lane_scroll(), 0.0);
    EXPECT_EQ(view.layout().lanes.size(), 2u);
    QTest::keyClick(&view, Qt::Key_C);
    EXPECT_FALSE(view.lane_scrollbar()->isHidden());
}

TEST(CompareViewScroll, EachTimelineScrollsOnItsOwn) {
    CompareView compare;
    compare.resize(1000, 1200);
    compare.set_traces(two_stage_trace(kRanks / 2), QStringLiteral("A"),
                       two_stage_trace(kRanks / 2), QStringLiteral("B"));
    compare.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&compare));
    ASSERT_FALSE(compare.view_a()->lane_scrollbar()->isHidden());
    compare.view_a()->set_lane_scroll(300.0);
    EXPECT_EQ(compare.view_a()->lane_scroll(), 300.0);
    EXPECT_EQ(compare.view_b()->lane_scroll(), 0.0);
}

} // namespace
} // namespace trident::gui
