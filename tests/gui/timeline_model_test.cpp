// TimelineModel: lanes, derived stages, idle time and bubble fraction, and the visible-range
// queries the renderer relies on; compare_lanes over two models.
#include "compare_lanes.h"
#include "timeline_model.h"
#include "timeline_test_traces.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/pipeline_timeline.h"

#include <gtest/gtest.h>
#include <random>

namespace trident::gui {
namespace {

using testing::make_event;
using testing::two_stage_trace;

TEST(TimelineModel, OneLanePerRankWithRowsPerStream) {
    const TimelineModel model(two_stage_trace());
    const auto& lanes = model.lanes(false);
    ASSERT_EQ(lanes.size(), 2u);
    EXPECT_EQ(lanes[0].rank(), 0);
    EXPECT_EQ(lanes[1].rank(), 1);
    ASSERT_EQ(lanes[0].rows.size(), 2u);
    EXPECT_EQ(lanes[0].rows[0].stream, core::Stream::compute);
    EXPECT_EQ(lanes[0].rows[1].stream, core::Stream::pipeline_p2p);
    EXPECT_EQ(lanes[1].rows.size(), 1u);
    EXPECT_DOUBLE_EQ(model.step_start_s(), 0.0);
    EXPECT_DOUBLE_EQ(model.step_end_s(), 8.5);
}

TEST(TimelineModel, IdleIsTheGapsInTheComputeRowInsideTheStep) {
    const TimelineModel model(two_stage_trace());
    const TimelineLane& first = model.lanes(false)[0];
    ASSERT_EQ(first.idle.size(), 1u);
    EXPECT_DOUBLE_EQ(first.idle[0].start_s, 2.0);
    EXPECT_DOUBLE_EQ(first.idle[0].end_s, 4.0);
    EXPECT_DOUBLE_EQ(first.busy_s, 6.5);
    EXPECT_NEAR(first.bubble_fraction, 2.0 / 8.5, 1e-12);
    EXPECT_DOUBLE_EQ(first.end_s, 8.5);

    const TimelineLane& second = model.lanes(false)[1];
    ASSERT_EQ(second.idle.size(), 2u);
    EXPECT_DOUBLE_EQ(second.idle[0].start_s, 0.0);
    EXPECT_DOUBLE_EQ(second.idle[0].end_s, 1.2);
    EXPECT_DOUBLE_EQ(second.idle[1].start_s, 7.7);
    EXPECT_DOUBLE_EQ(second.idle[1].end_s, 8.5);
    EXPECT_NEAR(second.idle_s, 2.0, 1e-12);
    EXPECT_NEAR(second.bubble_fraction, 2.0 / 8.5, 1e-12);
    EXPECT_DOUBLE_EQ(second.end_s, 7.7);
}

TEST(TimelineModel, OverlappingComputeCountsOnce) {
    core::Trace trace;
    trace.events = {make_event(0, core::EventKind::forward, 0, 0.0, 2.0),
                    make_event(0, core::EventKind::recompute, 0, 1.0, 3.0),
                    make_event(0, core::EventKind::forward, 1, 5.0, 6.0)};
    const TimelineModel model(trace);
    const TimelineLane& lane = model.lanes(false)[0];
    EXPECT_DOUBLE_EQ(lane.busy_s, 4.0);
    ASSERT_EQ(lane.idle.size(), 1u);
    EXPECT_DOUBLE_EQ(lane.idle[0].start_s, 3.0);
    EXPECT_DOUBLE_EQ(lane.idle[0].end_s, 5.0);
}

TEST(TimelineModel, StagesComeFromWhenEachRankFirstRunsForward) {
    // Ranks 0..2 are stage 0 and 3..5 stage 1; rank 4 starts a little late (measured jitter).
    core::Trace trace = two_stage_trace(3);
    for (auto& event : trace.events)
        if (event.rank == 4) event.start_s += 0.1, event.end_s += 0.1;
    const TimelineModel model(trace);
    const auto& ranks = model.lanes(false);
    ASSERT_EQ(ranks.size(), 6u);
    for (int r = 0; r < 6; ++r) {
        EXPECT_EQ(ranks[static_cast<std::size_t>(r)].rank(), r);
        EXPECT_EQ(ranks[static_cast<std::size_t>(r)].stage, r < 3 ? 0 : 1) << "rank " << r;
    }
    const auto& stages = model.lanes(true);
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(model.stage_count(), 2);
    EXPECT_EQ(stages[0].ranks, (std::vector<std::int32_t>{0, 1, 2}));
    EXPECT_EQ(stages[1].ranks, (std::vector<std::int32_t>{3, 4, 5}));
    EXPECT_EQ(stages[1].rank(), 3); // the stage's lowest rank stands for it
}

TEST(TimelineModel, StagesComeFromPointToPointStructureWhenTheTraceHasIt) {
    // A measured pp 2 x dp 2 step: ranks 0 and 1 are stage 0 (Megatron numbers the pipeline
    // outermost). Each rank's clock starts at its own step start, so rank 3's first forward
    // starts before stage 0's has ended: timing alone would put it in stage 0.
    using core::EventKind;
    using core::Stream;
    core::Trace trace;
    trace.source = "measured";
    for (std::int32_t rank : {0, 1}) {
        trace.events.push_back(make_event(rank, EventKind::forward, 0, 0.0, 1.0));
        trace.events.push_back(
            make_event(rank, EventKind::send_activation, 0, 1.0, 1.1, Stream::pipeline_p2p));
        trace.events.push_back(
            make_event(rank, EventKind::recv_gradient, 0, 1.1, 3.0, Stream::pipeline_p2p));
        trace.events.push_back(make_event(rank, EventKind::backward_input, 0, 3.0, 5.0));
    }
    for (std::int32_t rank : {3, 2}) {
        const double skew_s = rank == 3 ? -0.9 : 0.0;
        trace.events.push_back(make_event(rank, EventKind::recv_activation, 0, 0.0, 1.1 + skew_s,
                                          Stream::pipeline_p2p));
        trace.events.push_back(make_event(rank, EventKind::forward, 0, 1.1 + skew_s, 2.1 + skew_s));
        trace.events.push_back(
            make_event(rank, EventKind::backward_input, 0, 2.1 + skew_s, 4.0 + skew_s));
        trace.events.push_back(make_event(rank, EventKind::send_gradient, 0, 4.0 + skew_s,
                                          4.1 + skew_s, Stream::pipeline_p2p));
    }
    const TimelineModel model(trace);
    const auto& stages = model.lanes(true);
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages[0].ranks, (std::vector<std::int32_t>{0, 1}));
    EXPECT_EQ(stages[1].ranks, (std::vector<std::int32_t>{2, 3}));
}

TEST(TimelineModel, SimulatedRepresentativeRanksAreOneStageEach) {
    // The simulator writes one rank per stage (0, 64, 128 for 64 ranks per stage) and only
    // sends; stage 0 sends no gradients for chunk 0.
    using core::EventKind;
    core::Trace trace;
    for (int stage = 0; stage < 3; ++stage) {
        const std::int32_t rank = 64 * stage;
        trace.events.push_back(make_event(rank, EventKind::forward, 0, stage, stage + 1.0));
        if (stage > 0)
            trace.events.push_back(make_event(rank, EventKind::send_gradient, 0, 8.0, 8.1,
                                              core::Stream::pipeline_p2p));
    }
    const TimelineModel model(trace);
    ASSERT_EQ(model.stage_count(), 3);
    EXPECT_EQ(model.lanes(false)[2].rank(), 128);
    EXPECT_EQ(model.lanes(false)[2].stage, 2);
}

TEST(TimelineModel, EmptyTraceHasNoLanes) {
    const TimelineModel model{core::Trace{}};
    EXPECT_TRUE(model.lanes(false).empty());
    EXPECT_TRUE(model.lanes(true).empty());
}

TEST(TimelineModel, RejectsAnEventThatEndsBeforeItStarts) {
    core::Trace trace;
    trace.events = {make_event(0, core::EventKind::forward, 0, 2.0, 1.0)};
    try {
        TimelineModel model(trace);
        FAIL() << "accepted end_s < start_s";
    } catch (const core::SpecError& error) {
        EXPECT_EQ(error.field(), "trace.events[0]");
    }
}

TEST(TimelineModel, VisibleEventsAreExactlyTheOverlappingOnes) {
    // Random events on one row, some long ones spanning many short ones, against brute force.
    std::mt19937 random(7);
    std::uniform_real_distribution<double> start(0.0, 100.0);
    std::uniform_real_distribution<double> length(0.0, 1.0);
    core::Trace trace;
    for (int i = 0; i < 2000; ++i) {
        const double s = start(random);
        const double l = i % 97 == 0 ? 20.0 * length(random) : length(random);
        trace.events.push_back(make_event(0, core::EventKind::forward, i, s, s + l));
    }
    trace.events.push_back(make_event(0, core::EventKind::forward, -1, 50.0, 50.0)); // instant
    const TimelineModel model(trace);
    const TimelineRow& row = model.lanes(false)[0].rows[0];
    std::uniform_real_distribution<double> window(-5.0, 110.0);
    for (int q = 0; q < 300; ++q) {
        double t0 = window(random);
        double t1 = t0 + (q % 3 == 0 ? 0.01 : 8.0) * length(random);
        if (q == 0) t0 = 50.0, t1 = 50.5;
        std::vector<std::uint32_t> expected;
        for (std::uint32_t i = 0; i < model.events().size(); ++i) {
            const core::TraceEvent& e = model.event(i);
            const bool overlap =
                e.start_s < t1 && (e.end_s > t0 || (e.end_s == e.start_s && e.start_s >= t0));
            if (overlap) expected.push_back(i);
        }
        std::vector<std::uint32_t> visible = model.visible_events(row, t0, t1);
        std::sort(visible.begin(), visible.end());
        ASSERT_EQ(visible, expected) << "window [" << t0 << ", " << t1 << ")";
    }
}

TEST(TimelineModel, CandidatesAreTheVisibleEventsWhenARowDoesNotOverlapItself) {
    // The usual case (one compute stream runs one thing at a time): the binary searches land
    // exactly on the visible events, so drawing is O(visible).
    const TimelineModel model(testing::dense_trace(20000, 2));
    const TimelineRow& row = model.lanes(false)[0].rows[0];
    for (double t0 : {0.0, 1e-3, 7.77e-3}) {
        const double t1 = t0 + 1e-4;
        EXPECT_EQ(model.candidate_events(row, t0, t1).size(),
                  model.visible_events(row, t0, t1).size());
        EXPECT_GT(model.visible_events(row, t0, t1).size(), 50u);
    }
}

TEST(TimelineModel, VisibleIdleOverlapsTheWindow) {
    const TimelineModel model(two_stage_trace());
    const TimelineLane& second = model.lanes(false)[1];
    EXPECT_EQ(model.visible_idle(second, 0.5, 1.0).size(), 1u);
    EXPECT_EQ(model.visible_idle(second, 1.2, 7.7).size(), 0u);
    EXPECT_EQ(model.visible_idle(second, 1.0, 8.0).size(), 2u);
}

TEST(CompareLanes, MatchesByRankWhenBothHoldTheSameRanks) {
    core::Trace slower = two_stage_trace();
    slower.events.push_back(make_event(1, core::EventKind::optimizer, -1, 7.7, 8.7));
    const auto differences = compare_lanes(TimelineModel(two_stage_trace()), TimelineModel(slower));
    ASSERT_EQ(differences.size(), 2u);
    EXPECT_EQ(differences[1].lane, "rank 1");
    EXPECT_TRUE(differences[1].in_a && differences[1].in_b);
    EXPECT_NEAR(differences[1].busy_b_s - differences[1].busy_a_s, 1.0, 1e-12);
    EXPECT_NEAR(differences[1].end_b_s - differences[1].end_a_s, 1.0, 1e-12);
}

TEST(CompareLanes, MatchesByStageWhenTheRanksDiffer) {
    // A simulated trace (one rank per stage) against a "measured" one with two per stage.
    const auto differences =
        compare_lanes(TimelineModel(two_stage_trace(1)), TimelineModel(two_stage_trace(2)));
    ASSERT_EQ(differences.size(), 2u);
    EXPECT_EQ(differences[0].lane, "stage 0");
    EXPECT_EQ(differences[1].lane, "stage 1");
    EXPECT_DOUBLE_EQ(differences[1].bubble_a, differences[1].bubble_b);
}

TEST(TimelineModel, DualPipeLanesKeepEachRankOnItsStageWithBothChunks) {
    // DualPipe's last rank starts copy 1 at once: by first-forward time alone it would look like
    // stage 0. The simulated trace names each event's stage, and both chunks reach the lanes.
    const core::Schedule s = core::make_schedule(core::ScheduleKind::dualpipe, 4, 2, 8);
    core::Trace trace;
    trace.source = "simulated";
    trace.events = simulator::time_schedule(
                       s, [](std::int32_t, const core::Action&) { return 1.0; },
                       [](std::int32_t, std::int32_t, const core::Action&) { return 0.0; }, true)
                       .events;
    const TimelineModel model(trace);
    ASSERT_EQ(model.stage_count(), 4);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(model.lanes(false)[std::size_t(r)].stage, r);
    bool copy_one_first_on_last_rank = false;
    for (const auto& e : trace.events)
        if (e.rank == 3 && e.start_s == 0.0 && e.stream == core::Stream::compute)
            copy_one_first_on_last_rank = e.chunk == 1;
    EXPECT_TRUE(copy_one_first_on_last_rank);
}

} // namespace
} // namespace trident::gui
