// What makes a timeline readable at a glance: lanes named by stage with their ranks in the
// tooltip, the second model chunk told apart from the first, idle time that cannot be taken
// for recomputation, a title elided in the middle, and a Help menu with the controls.
#include "main_window.h"
#include "timeline_colors.h"
#include "timeline_display_list.h"
#include "timeline_layout.h"
#include "timeline_render.h"
#include "timeline_test_traces.h"
#include "timeline_view.h"

#include <QMenuBar>
#include <gtest/gtest.h>

namespace trident::gui {
namespace {

using testing::make_event;
using testing::two_stage_trace;

std::vector<QString> texts_of(const TimelineDisplayList& list, TextRole role) {
    std::vector<QString> texts;
    for (const TextPrimitive& t : list.texts)
        if (t.role == role) texts.push_back(t.text);
    return texts;
}

TEST(TimelineReading, LanesAreNamedByStageWithTheirRanksInTheTooltip) {
    const TimelineModel model(two_stage_trace(4)); // stage 0: ranks 0-3, stage 1: ranks 4-7
    const TimelineViewport view{0.0, 8.5, 1000, 900, false};
    const auto names =
        texts_of(build_display_list(model, layout_timeline(model, view)), TextRole::lane_label);
    ASSERT_EQ(names.size(), 8u);
    EXPECT_EQ(names.front(), "stage 0 · rank 0");
    EXPECT_EQ(names.back(), "stage 1 · rank 7");
    const auto stages =
        texts_of(build_display_list(model, layout_timeline(model, {0.0, 8.5, 1000, 300, true})),
                 TextRole::lane_label);
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages[1], "stage 1 · 4 ranks");
    const QString tooltip = describe_lane(model.lanes(true)[1]);
    EXPECT_TRUE(tooltip.startsWith("stage 1: ranks 4, 5, 6, 7\nbusy ")) << tooltip.toStdString();
    // A stage of 40 ranks lists the first and last eight.
    TimelineLane wide;
    wide.stage = 3;
    for (int r = 0; r < 40; ++r) wide.ranks.push_back(100 + r);
    EXPECT_TRUE(describe_lane(wide).startsWith(
        "stage 3: ranks 100, 101, 102, 103, 104, 105, 106, 107, …, 132, 133"))
        << describe_lane(wide).toStdString();
}

TEST(TimelineReading, TheSecondChunkIsALighterShadeOfItsKind) {
    core::Trace trace;
    trace.events.push_back(make_event(0, core::EventKind::forward, 0, 0.0, 1.0));
    core::TraceEvent second = make_event(0, core::EventKind::forward, 0, 1.0, 2.0);
    second.chunk = 1;
    trace.events.push_back(second);
    const TimelineModel model(trace);
    ASSERT_TRUE(model.has_odd_chunks());
    const TimelineViewport view{0.0, 2.0, 1000, 300, false};
    const TimelineLayout layout = layout_timeline(model, view);
    const QImage image = render_timeline(model, view);
    const int y =
        int(layout.lanes.at(0).rows.at(0).top_px + 0.5 * layout.lanes[0].rows[0].height_px);
    const QColor first = image.pixelColor(int(layout.x_of(0.2)), y);
    const QColor lighter = image.pixelColor(int(layout.x_of(1.2)), y);
    EXPECT_EQ(first, kind_color(core::EventKind::forward));
    EXPECT_EQ(lighter, event_color(second));
    EXPECT_EQ(lighter.hue(), first.hue());
    EXPECT_GT(lighter.lightness(), first.lightness() + 40);
    // The key says what the lighter shade means, only when there is one.
    const auto key = texts_of(build_display_list(model, layout), TextRole::legend);
    EXPECT_NE(std::find(key.begin(), key.end(), "lighter: 2nd chunk"), key.end());
    const TimelineModel plain(two_stage_trace());
    EXPECT_FALSE(plain.has_odd_chunks());
    const auto plain_key =
        texts_of(build_display_list(plain, layout_timeline(plain, {0.0, 8.5, 1000, 300, false})),
                 TextRole::legend);
    EXPECT_EQ(std::find(plain_key.begin(), plain_key.end(), "lighter: 2nd chunk"), plain_key.end());
}

TEST(TimelineReading, IdleIsTheOnlyGreyAndFarFromRecompute) {
    EXPECT_EQ(idle_color().hsvSaturation(), 0);
    for (int c = 0; c < kBlockCategoryCount; ++c) {
        const QColor block = category_color(static_cast<BlockCategory>(c));
        EXPECT_GT(block.hsvSaturation(), 80) << kBlockCategoryNames[c];
    }
    const QColor recompute = category_color(BlockCategory::recompute);
    const int distance = std::abs(recompute.red() - idle_color().red()) +
                         std::abs(recompute.green() - idle_color().green()) +
                         std::abs(recompute.blue() - idle_color().blue());
    EXPECT_GT(distance, 150);
}

TEST(TimelineReading, TheTitleLosesItsMiddleNotItsEnd) {
    const TimelineModel model(two_stage_trace());
    DisplayListOptions options;
    options.title = "a-very-long-experiment-name-that-goes-on-and-on-run-17-trace.json";
    const auto titles = texts_of(
        build_display_list(model, layout_timeline(model, {0.0, 8.5, 1000, 300, false}), options),
        TextRole::title);
    ASSERT_EQ(titles.size(), 1u);
    EXPECT_TRUE(titles[0].contains(QChar(0x2026))) << titles[0].toStdString();
    EXPECT_TRUE(titles[0].startsWith("a-")) << titles[0].toStdString();
    EXPECT_TRUE(titles[0].endsWith(".json")) << titles[0].toStdString();
}

TEST(TimelineReading, HelpMenuListsTheControls) {
    MainWindow window;
    QMenu* help = nullptr;
    for (QAction* action : window.menuBar()->actions())
        if (action->text() == "&Help") help = action->menu();
    ASSERT_NE(help, nullptr);
    QStringList items;
    for (QAction* action : help->actions()) items << action->text();
    EXPECT_TRUE(items.contains("Timeline &controls")) << items.join(", ").toStdString();
    EXPECT_TRUE(items.contains("&About Trident"));
    const QString text = timeline_controls_text();
    for (const char* control : {"wheel", "Shift+wheel", "drag", "double-click", "Home or R",
                                "C:", "Page Up / Page Down", "+ or =", "grey: idle", "lighter"})
        EXPECT_TRUE(text.contains(control)) << control;
}

} // namespace
} // namespace trident::gui
