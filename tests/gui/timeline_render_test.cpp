// The timeline picture: block colours where the trace has events, the idle colour inside known
// bubbles, one lane per rank (one per stage collapsed), level of detail on 200 000 events, and
// SVG export that is well-formed with one rect per visible block.
#include "timeline_colors.h"
#include "timeline_display_list.h"
#include "timeline_layout.h"
#include "timeline_render.h"
#include "timeline_test_traces.h"

#include <QImage>
#include <QXmlStreamReader>
#include <algorithm>
#include <gtest/gtest.h>

namespace trident::gui {
namespace {

using testing::two_stage_trace;

// 1000 px wide with a 150 px label column: 850 px for the step [0, 8.5], 100 px per second.
TimelineViewport full_view(bool collapsed = false) {
    return {0.0, 8.5, 1000, 300, collapsed};
}

struct Probe {
    const TimelineModel& model;
    TimelineLayout layout;
    QImage image;

    Probe(const TimelineModel& m, const TimelineViewport& viewport)
        : model(m), layout(layout_timeline(m, viewport)), image(render_timeline(m, viewport)) {}

    // The pixel at time t_s in the middle of `stream`'s row of lane `lane`.
    QColor at(std::size_t lane, core::Stream stream, double t_s) const {
        for (const RowBox& row : layout.lanes.at(lane).rows)
            if (row.row->stream == stream)
                return image.pixelColor(static_cast<int>(layout.x_of(t_s)),
                                        static_cast<int>(row.top_px + 0.5 * row.height_px));
        ADD_FAILURE() << "lane " << lane << " has no such row";
        return {};
    }
};

TEST(TimelineRender, BlocksHaveTheirKindsColour) {
    const TimelineModel model(two_stage_trace());
    const Probe probe(model, full_view());
    ASSERT_EQ(probe.image.size(), QSize(1000, 300));
    // A quarter into each block (its centre carries the micro-batch number).
    EXPECT_EQ(probe.at(0, core::Stream::compute, 0.25), kind_color(core::EventKind::forward));
    EXPECT_EQ(probe.at(0, core::Stream::compute, 4.5), kind_color(core::EventKind::backward_input));
    EXPECT_EQ(probe.at(0, core::Stream::compute, 8.1), kind_color(core::EventKind::optimizer));
    EXPECT_EQ(probe.at(0, core::Stream::pipeline_p2p, 1.05),
              category_color(BlockCategory::communication));
    EXPECT_EQ(probe.at(1, core::Stream::compute, 1.45), kind_color(core::EventKind::forward));
    EXPECT_EQ(probe.at(1, core::Stream::compute, 3.7), kind_color(core::EventKind::backward_input));
    // The block centres: no label on the optimizer (no micro-batch), so its centre is plain.
    EXPECT_EQ(probe.at(1, core::Stream::compute, 7.45), kind_color(core::EventKind::optimizer));
}

TEST(TimelineRender, KnownBubblesAreIdleColoured) {
    const TimelineModel model(two_stage_trace());
    const Probe probe(model, full_view());
    EXPECT_EQ(probe.at(0, core::Stream::compute, 3.0), idle_color()); // [2, 4] on rank 0
    EXPECT_EQ(probe.at(1, core::Stream::compute, 0.6), idle_color()); // [0, 1.2] on rank 1
    EXPECT_EQ(probe.at(1, core::Stream::compute, 8.1), idle_color()); // [7.7, 8.5] on rank 1
    // The shading spans the lane: the p2p row is idle-coloured where compute waits...
    EXPECT_EQ(probe.at(0, core::Stream::pipeline_p2p, 3.0), idle_color());
    // ...and background where compute runs and the p2p row is empty.
    EXPECT_EQ(probe.at(0, core::Stream::pipeline_p2p, 5.0), background_color());
}

TEST(TimelineRender, ColoursAreDistinct) {
    std::vector<QColor> colours = {idle_color(), background_color()};
    for (int c = 0; c < kBlockCategoryCount; ++c)
        colours.push_back(category_color(static_cast<BlockCategory>(c)));
    for (std::size_t i = 0; i < colours.size(); ++i)
        for (std::size_t j = i + 1; j < colours.size(); ++j) EXPECT_NE(colours[i], colours[j]);
}

TEST(TimelineRender, OneLanePerRankAndOnePerStageCollapsed) {
    const TimelineModel model(two_stage_trace(3)); // 6 ranks in 2 stages
    auto lane_labels = [&](bool collapsed) {
        const TimelineDisplayList list =
            build_display_list(model, layout_timeline(model, full_view(collapsed)));
        EXPECT_EQ(list.lane_count, model.lanes(collapsed).size());
        std::vector<QString> labels;
        for (const TextPrimitive& text : list.texts)
            if (text.role == TextRole::lane_label) labels.push_back(text.text);
        return labels;
    };
    const std::vector<QString> ranks = lane_labels(false);
    ASSERT_EQ(ranks.size(), 6u);
    EXPECT_TRUE(ranks[0].startsWith("stage 0 · rank 0"));
    EXPECT_TRUE(ranks[5].startsWith("stage 1 · rank 5"));
    const std::vector<QString> stages = lane_labels(true);
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_TRUE(stages[1].startsWith("stage 1 · 3 ranks"));
    // And in the picture: lanes of rank 3 and stage 1 both show stage 1's bubble at t = 0.6.
    EXPECT_EQ(Probe(model, full_view(false)).at(3, core::Stream::compute, 0.6), idle_color());
    EXPECT_EQ(Probe(model, full_view(true)).at(1, core::Stream::compute, 0.6), idle_color());
    EXPECT_EQ(Probe(model, full_view(true)).at(1, core::Stream::compute, 1.45),
              kind_color(core::EventKind::forward));
}

TEST(TimelineRender, LegendShowsEveryColour) {
    const TimelineModel model(two_stage_trace());
    const TimelineDisplayList list = build_display_list(model, layout_timeline(model, full_view()));
    std::vector<QColor> swatches;
    for (const RectPrimitive& rect : list.rects)
        if (rect.role == RectRole::legend) swatches.push_back(rect.color);
    ASSERT_EQ(swatches.size(), static_cast<std::size_t>(kBlockCategoryCount) + 1);
    EXPECT_EQ(swatches.front(), category_color(BlockCategory::forward));
    EXPECT_EQ(swatches.back(), idle_color());
    // A short canvas has no room for it.
    const TimelineDisplayList short_list =
        build_display_list(model, layout_timeline(model, {0.0, 8.5, 1000, 60, false}));
    for (const RectPrimitive& rect : short_list.rects) EXPECT_NE(rect.role, RectRole::legend);
}

TEST(TimelineRender, LaneLabelsCarryTheBubbleFraction) {
    const TimelineModel model(two_stage_trace());
    const TimelineDisplayList list = build_display_list(model, layout_timeline(model, full_view()));
    int bubbles = 0;
    for (const TextPrimitive& text : list.texts)
        if (text.text.contains("bubble 23.5%")) ++bubbles; // 2 / 8.5
    EXPECT_EQ(bubbles, 2);
}

TEST(TimelineRender, LanesWithSeveralRowsNameTheirStreams) {
    // Rank 0 has compute and p2p rows; rank 1 only compute: its single row needs no name.
    const TimelineModel model(two_stage_trace(1));
    const TimelineLayout layout = layout_timeline(model, full_view(false));
    const TimelineDisplayList list = build_display_list(model, layout);
    std::vector<std::pair<QString, double>> rows; // name, vertical centre
    for (const TextPrimitive& text : list.texts)
        if (text.role == TextRole::row_label) rows.push_back({text.text, text.box.center().y()});
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].first, "compute");
    EXPECT_EQ(rows[1].first, "p2p");
    // Each name sits on its row, left of the plot.
    for (const RowBox& row : layout.lanes[0].rows) {
        const QString want = row.row->stream == core::Stream::compute ? "compute" : "p2p";
        const double centre = row.top_px + 0.5 * row.height_px;
        const auto it =
            std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == want; });
        ASSERT_NE(it, rows.end());
        EXPECT_NEAR(it->second, centre, 0.5);
    }
    for (const TextPrimitive& text : list.texts) {
        if (text.role == TextRole::row_label) {
            EXPECT_LE(text.box.right(), layout.plot.left());
        }
    }
}

TEST(TimelineRender, MicrobatchNumbersOnWideBlocksOnly) {
    const TimelineModel model(two_stage_trace());
    const TimelineDisplayList list = build_display_list(model, layout_timeline(model, full_view()));
    int labels = 0;
    for (const TextPrimitive& text : list.texts)
        if (text.role == TextRole::block_label) ++labels;
    EXPECT_EQ(labels, 9); // forwards, backwards and the 20 px send; not the optimizers
    const TimelineDisplayList narrow =
        build_display_list(model, layout_timeline(model, {0.0, 8.5, 60, 300, false}));
    for (const TextPrimitive& text : narrow.texts) EXPECT_NE(text.role, TextRole::block_label);
}

TEST(TimelineRender, ZoomedViewDrawsOnlyTheVisibleEvents) {
    const TimelineModel model(two_stage_trace());
    const TimelineDisplayList list =
        build_display_list(model, layout_timeline(model, {4.5, 5.5, 1000, 300, false}));
    std::vector<std::int64_t> drawn;
    for (const RectPrimitive& rect : list.rects)
        if (rect.role == RectRole::block) drawn.push_back(rect.event);
    // Rank 0: backward_input mb0 [4, 6]; rank 1: backward mb0 [3.2, 5.2] and mb1 [5.2, 7.2].
    ASSERT_EQ(drawn.size(), 3u);
    for (std::int64_t index : drawn) {
        const core::TraceEvent& e = model.event(static_cast<std::uint32_t>(index));
        EXPECT_EQ(e.kind, core::EventKind::backward_input);
        EXPECT_LT(e.start_s, 5.5);
        EXPECT_GT(e.end_s, 4.5);
    }
}

TEST(TimelineRender, LevelOfDetailCapsPrimitivesFor200kEvents) {
    const TimelineModel model(testing::dense_trace(200000, 8));
    const double end_s = model.step_end_s();
    const TimelineViewport narrow{0.0, end_s, 400, 300, false};
    const TimelineLayout layout = layout_timeline(model, narrow);
    const TimelineDisplayList list = build_display_list(model, layout);
    // At most about one block per two pixel columns per row, whatever the event count.
    std::size_t rows = 0;
    for (const LaneBox& lane : layout.lanes) rows += lane.rows.size();
    EXPECT_EQ(rows, 16u);
    EXPECT_LT(list.primitive_count(), rows * 250 / 2 + 200);
    // Merged blocks still account for every event in view.
    std::size_t events = 0;
    for (const RectPrimitive& rect : list.rects)
        if (rect.role == RectRole::block || rect.role == RectRole::merged_block)
            events += rect.merged_events;
    EXPECT_EQ(events, 200000u);
    // Zoomed in to a few microseconds the events are drawn one by one again.
    const TimelineDisplayList zoomed =
        build_display_list(model, layout_timeline(model, {10e-6, 20e-6, 1600, 900, false}));
    std::size_t single = 0;
    for (const RectPrimitive& rect : zoomed.rects) {
        EXPECT_NE(rect.role, RectRole::merged_block);
        if (rect.role == RectRole::block) ++single;
    }
    EXPECT_GT(single, 40u);
}

TEST(TimelineRender, SvgIsWellFormedWithOneRectPerVisibleBlock) {
    const TimelineModel model(two_stage_trace());
    const TimelineViewport viewport{1.5, 5.0, 1000, 300, false};
    const TimelineDisplayList list = build_display_list(model, layout_timeline(model, viewport),
                                                        {QStringLiteral("A & <B>"), {}, 3.0});
    std::size_t visible = 0;
    for (const TimelineLane& lane : model.lanes(false))
        for (const TimelineRow& row : lane.rows)
            visible += model.visible_events(row, viewport.t0_s, viewport.t1_s).size();
    EXPECT_EQ(visible, 5u);

    const std::string svg = display_list_svg(list);
    QXmlStreamReader xml(QByteArray::fromStdString(svg));
    std::size_t blocks = 0;
    std::size_t idle = 0;
    bool saw_title = false;
    while (!xml.atEnd()) {
        xml.readNext();
        if (xml.isStartElement() && xml.name() == QStringLiteral("rect")) {
            const auto role = xml.attributes().value("class");
            if (role == QStringLiteral("block")) ++blocks;
            if (role == QStringLiteral("idle")) ++idle;
            if (role == QStringLiteral("block")) {
                EXPECT_TRUE(xml.attributes().value("fill").startsWith(QStringLiteral("#")));
            }
        }
        if (xml.isCharacters() && xml.text() == QStringLiteral("A & <B>")) saw_title = true;
    }
    EXPECT_FALSE(xml.hasError()) << xml.errorString().toStdString();
    EXPECT_EQ(blocks, visible);
    EXPECT_EQ(idle, 1u); // only rank 0's [2, 4] is in [1.5, 5]
    EXPECT_TRUE(saw_title);
    EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
}

TEST(TimelineRender, StackedSvgHoldsBothTimelines) {
    const TimelineModel model(two_stage_trace());
    const TimelineDisplayList list = build_display_list(model, layout_timeline(model, full_view()));
    const std::string svg = stacked_svg({list, list});
    QXmlStreamReader xml(QByteArray::fromStdString(svg));
    int svgs = 0;
    while (!xml.atEnd()) {
        xml.readNext();
        if (xml.isStartElement() && xml.name() == QStringLiteral("svg")) ++svgs;
    }
    EXPECT_FALSE(xml.hasError());
    EXPECT_EQ(svgs, 3);
    EXPECT_NE(svg.find("height=\"600\""), std::string::npos);
}

TEST(TimelineRender, FormatsDurations) {
    EXPECT_EQ(format_duration(0.0), "0");
    EXPECT_EQ(format_duration(1.5), "1.5 s");
    EXPECT_EQ(format_duration(0.0125), "12.5 ms");
    EXPECT_EQ(format_duration(850e-6), "850 µs");
}

} // namespace
} // namespace trident::gui
