// TimelineView and CompareView driven as a user would: wheel zoom around the cursor, drag to
// pan, click to select, collapse; the compare view keeps its two timelines on one axis.
#include "compare_view.h"
#include "timeline_colors.h"
#include "timeline_test_traces.h"
#include "timeline_view.h"
#include "trident/core/spec_error.h"

#include <QApplication>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QWheelEvent>
#include <gtest/gtest.h>

namespace trident::gui {
namespace {

using testing::two_stage_trace;

// Where time t_s of `stream` on lane `lane` is in the widget.
QPoint point_at(const TimelineView& view, std::size_t lane, core::Stream stream, double t_s) {
    const TimelineLayout layout = view.layout();
    for (const RowBox& row : layout.lanes.at(lane).rows)
        if (row.row->stream == stream)
            return QPoint(static_cast<int>(layout.x_of(t_s)),
                          static_cast<int>(row.top_px + 0.5 * row.height_px));
    ADD_FAILURE() << "no such row";
    return {};
}

void send_mouse(QWidget& widget, QEvent::Type type, QPoint at, Qt::MouseButtons buttons) {
    QMouseEvent event(type, QPointF(at), widget.mapToGlobal(QPointF(at)), Qt::LeftButton, buttons,
                      Qt::NoModifier);
    QApplication::sendEvent(&widget, &event);
}

class TimelineViewTest : public ::testing::Test {
protected:
    void SetUp() override {
        view.resize(1000, 300);
        view.set_trace(two_stage_trace(), QStringLiteral("two stages"));
        view.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    }
    TimelineView view;
};

TEST_F(TimelineViewTest, ShowsTheWholeStepAtFirst) {
    EXPECT_EQ(view.time_range(), std::make_pair(0.0, 8.5));
    EXPECT_EQ(view.layout().lanes.size(), 2u);
    EXPECT_EQ(view.title(), "two stages");
}

TEST_F(TimelineViewTest, WheelZoomsAroundTheCursor) {
    const QPoint cursor = point_at(view, 0, core::Stream::compute, 3.0);
    const double t_under_cursor = view.layout().t_of(cursor.x());
    QWheelEvent wheel(QPointF(cursor), view.mapToGlobal(QPointF(cursor)), QPoint(), QPoint(0, 120),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(&view, &wheel);
    const auto [t0, t1] = view.time_range();
    EXPECT_NEAR(t1 - t0, 0.8 * 8.5, 1e-9);
    EXPECT_GT(t0, 0.0);
    EXPECT_LT(t1, 8.5);
    EXPECT_NEAR(view.layout().t_of(cursor.x()), t_under_cursor, 1e-9);
    // Back out: the view stops a little past the step.
    for (int i = 0; i < 10; ++i) {
        QWheelEvent out(QPointF(cursor), view.mapToGlobal(QPointF(cursor)), QPoint(),
                        QPoint(0, -120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(&view, &out);
    }
    EXPECT_NEAR(view.time_range().second - view.time_range().first, 1.1 * 8.5, 1e-9);
}

TEST_F(TimelineViewTest, DragPans) {
    view.set_time_range(2.0, 4.0); // 850 px for 2 s
    const QPoint from = point_at(view, 1, core::Stream::compute, 3.0);
    send_mouse(view, QEvent::MouseButtonPress, from, Qt::LeftButton);
    send_mouse(view, QEvent::MouseMove, from + QPoint(-85, 0), Qt::LeftButton);
    send_mouse(view, QEvent::MouseButtonRelease, from + QPoint(-85, 0), Qt::NoButton);
    const auto [t0, t1] = view.time_range();
    EXPECT_NEAR(t0, 2.2, 1e-9); // dragging left by 85 px moves 0.2 s later
    EXPECT_NEAR(t1, 4.2, 1e-9);
    EXPECT_FALSE(view.selected_event()) << "a drag is not a click";
}

TEST_F(TimelineViewTest, ClickSelectsTheEventUnderTheCursor) {
    std::optional<core::TraceEvent> selected;
    QObject::connect(&view, &TimelineView::event_selected,
                     [&](const core::TraceEvent& event, std::uint32_t) { selected = event; });
    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier,
                      point_at(view, 1, core::Stream::compute, 3.7));
    ASSERT_TRUE(selected);
    EXPECT_EQ(selected->rank, 1);
    EXPECT_EQ(selected->kind, core::EventKind::backward_input);
    EXPECT_EQ(selected->microbatch, 0);
    EXPECT_DOUBLE_EQ(selected->start_s, 3.2);
    ASSERT_TRUE(view.selected_event());
    EXPECT_EQ(view.model().event(*view.selected_event()).start_s, 3.2);
    // The selection is outlined in the picture's display list.
    bool outlined = false;
    for (const RectPrimitive& rect : view.display_list(view.size()).rects)
        outlined |= rect.role == RectRole::selection;
    EXPECT_TRUE(outlined);
    // A click into a bubble clears it.
    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier,
                      point_at(view, 1, core::Stream::compute, 0.6));
    EXPECT_FALSE(view.selected_event());
}

TEST_F(TimelineViewTest, CollapseTogglesWithTheKey) {
    QTest::keyClick(&view, Qt::Key_C);
    EXPECT_TRUE(view.collapsed());
    EXPECT_EQ(view.layout().lanes.size(), 2u); // two stages of one rank each
    QTest::keyClick(&view, Qt::Key_C);
    EXPECT_FALSE(view.collapsed());
}

TEST_F(TimelineViewTest, ExportsPngAndSvg) {
    QTemporaryDir dir;
    const QString png = dir.filePath("t.png");
    const QString svg = dir.filePath("t.svg");
    view.render_png(png, QSize(1000, 300));
    view.render_svg(svg);
    const QImage image(png);
    ASSERT_EQ(image.size(), QSize(1000, 300));
    EXPECT_EQ(image.pixelColor(point_at(view, 1, core::Stream::compute, 0.6)), idle_color());
    QFile file(svg);
    ASSERT_TRUE(file.open(QIODevice::ReadOnly));
    EXPECT_TRUE(file.readAll().contains("class=\"block\""));
    EXPECT_THROW(view.render_png(dir.filePath("missing/dir/t.png")), core::SpecError);
}

TEST_F(TimelineViewTest, HoverDescribesTheEventUnderTheCursor) {
    const TimelineLayout layout = view.layout();
    const std::optional<TimelineHit> hit =
        hit_test(view.model(), layout, point_at(view, 0, core::Stream::pipeline_p2p, 1.1));
    ASSERT_TRUE(hit && hit->event);
    const QString text = describe_event(view.model().event(*hit->event));
    EXPECT_TRUE(text.startsWith("send_activation\nrank 0, pipeline p2p stream"))
        << text.toStdString();
    EXPECT_TRUE(text.contains("micro-batch 0, chunk 0"));
    EXPECT_TRUE(text.contains("1 s → 1.2 s (200 ms)")) << text.toStdString();
    // In a bubble there is no event, only the lane.
    const auto idle = hit_test(view.model(), layout, point_at(view, 1, core::Stream::compute, 0.6));
    ASSERT_TRUE(idle);
    EXPECT_EQ(idle->lane, 1u);
    EXPECT_FALSE(idle->event);
}

TEST(CompareView, SharesOneTimeAxisAndListsLaneDifferences) {
    CompareView compare;
    compare.resize(1000, 800);
    core::Trace measured = two_stage_trace();
    for (auto& event : measured.events) event.end_s *= 1.1, event.start_s *= 1.1; // 10% slower
    compare.set_traces(two_stage_trace(), QStringLiteral("simulated"), measured,
                       QStringLiteral("measured"));
    compare.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&compare));
    // Both span the union of the steps.
    EXPECT_EQ(compare.view_a()->time_range(), compare.view_b()->time_range());
    EXPECT_NEAR(compare.view_a()->time_range().second, 8.5 * 1.1, 1e-9);
    // Zooming one zooms the other.
    compare.view_a()->set_time_range(1.0, 3.0);
    EXPECT_EQ(compare.view_b()->time_range(), std::make_pair(1.0, 3.0));
    compare.view_b()->set_time_range(2.0, 5.0);
    EXPECT_EQ(compare.view_a()->time_range(), std::make_pair(2.0, 5.0));
    compare.view_b()->set_collapsed(true);
    EXPECT_TRUE(compare.view_a()->collapsed());
    // The table: one row per lane; B - A of the end time is 10% of A's.
    ASSERT_EQ(compare.table()->rowCount(), 2);
    EXPECT_EQ(compare.table()->item(1, 0)->text(), "rank 1");
    EXPECT_EQ(compare.table()->item(1, 7)->text(), "7.7 s");
    EXPECT_EQ(compare.table()->item(1, 9)->text(), "+770 ms");
    EXPECT_NEAR(compare.differences()[0].end_b_s, 8.5 * 1.1, 1e-9);

    QTemporaryDir dir;
    compare.render_png(dir.filePath("c.png"), QSize(800, 200));
    EXPECT_EQ(QImage(dir.filePath("c.png")).size(), QSize(800, 400));
}

} // namespace
} // namespace trident::gui
