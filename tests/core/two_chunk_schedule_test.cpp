// ZB-V, DualPipe and DualPipeV: placements, orders against the reference implementations,
// completeness and deadlock freedom for p <= 16 and m <= 64, and activation peaks against the
// papers' tables.
#include "../support/schedule_text.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <gtest/gtest.h>

using namespace trident::core;

using trident::test::compute_order;

namespace {

bool valid_micro_batches(ScheduleKind kind, int p, int m) {
    if (kind == ScheduleKind::dualpipe) return p % 2 == 0 && m % 2 == 0 && m >= 2 * p;
    if (kind == ScheduleKind::dualpipev) return m >= 2 * p;
    return true;
}

constexpr ScheduleKind kTwoChunk[] = {ScheduleKind::zero_bubble_v, ScheduleKind::dualpipe,
                                      ScheduleKind::dualpipev};

} // namespace

TEST(TwoChunkSchedule, PlacementsFoldTheModel) {
    // V: rank 0 holds the first and the last stage; DualPipe: copy 1 runs the other way.
    const Schedule v = make_schedule(ScheduleKind::dualpipev, 4, 2, 8);
    EXPECT_EQ(v.virtual_stages(), 8);
    EXPECT_EQ(v.virtual_stage(0, 0), 0);
    EXPECT_EQ(v.virtual_stage(0, 1), 7);
    EXPECT_EQ(v.virtual_stage(3, 1), 4);
    const Schedule d = make_schedule(ScheduleKind::dualpipe, 4, 2, 8);
    EXPECT_EQ(d.virtual_stages(), 4);
    EXPECT_EQ(d.virtual_stage(0, 1), 3);
    EXPECT_EQ(d.copy_of(3), 0);
    EXPECT_EQ(d.copy_of(4), 1);
    EXPECT_FALSE(d.visits(5, 0));
    for (const Schedule* s : {&v, &d})
        for (int mb = 0; mb < s->microbatches; ++mb)
            for (int vs = 0; vs < s->virtual_stages(); ++vs) {
                const int r = s->rank_of(mb, vs), c = s->chunk_of(mb, vs);
                EXPECT_TRUE(s->visits(mb, c));
                EXPECT_EQ(s->virtual_stage(r, c), vs) << to_string(s->kind) << " mb " << mb;
            }
}

TEST(TwoChunkSchedule, DualPipeVFollowsDeepSeekSteps) {
    // By hand from github.com/deepseek-ai/DualPipe's eight steps, rank 0 of 2, 4 micro-batches:
    // F0 F0 | F0 F1 | B1(zb) W F1 | F0&B1 F1&B0 | B1 F1&B0 | B1 B0(zb) | W B0(zb) | W.
    const Schedule s = make_schedule(ScheduleKind::dualpipev, 2, 2, 4);
    EXPECT_EQ(compute_order(s, 0), "F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 F3.0 B1.1 W1.1 F2.1 B0.0 "
                                   "W0.0 B2.1 W2.1 F3.1 B1.0 W1.0 B3.1 W3.1 B2.0 W2.0 B3.0 W3.0");
    // DualPipe's second half runs the mirror image: rank 3 of 4 starts copy 1.
    const Schedule d = make_schedule(ScheduleKind::dualpipe, 4, 2, 8);
    EXPECT_EQ(compute_order(d, 3).substr(0, 19), "F4.1 F5.1 F6.1 F0.0");
    EXPECT_EQ(compute_order(d, 0).substr(0, 19), "F0.0 F1.0 F2.0 F4.1");
}

TEST(TwoChunkSchedule, ZeroBubbleVFollowsTheVOrder) {
    // By hand from the ZB-V construction (PyTorch's ScheduleZBVZeroBubble), rank 1 of 2, m 3:
    // warm-up 2(p − r) − 1 F0, r × (F1 F0), p − r × (F1 B1 W1), steady F0 B0 W0 F1 B1 W1,
    // cool-down r × (B0 B1), p − r × (B0 W0), then the held W's.
    const Schedule s = make_schedule(ScheduleKind::zero_bubble_v, 2, 2, 3);
    EXPECT_EQ(compute_order(s, 1), "F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 F2.0 B0.0 W0.0 F2.1 B1.1 W1.1 "
                                   "B1.0 B2.1 B2.0 W1.0 W2.1 W2.0");
}

TEST(TwoChunkSchedule, CompleteAndDeadlockFreeUpTo16StagesAnd64MicroBatches) {
    int checked = 0;
    for (ScheduleKind kind : kTwoChunk)
        for (int p = 1; p <= 16; ++p)
            for (int m = 1; m <= 64; ++m) {
                if (!valid_micro_batches(kind, p, m)) continue;
                ASSERT_NO_THROW(check_schedule(make_schedule(kind, p, 2, m)))
                    << to_string(kind) << " p " << p << " m " << m;
                ++checked;
            }
    EXPECT_GT(checked, 1900);
}

TEST(TwoChunkSchedule, ActivationPeaksMatchThePapers) {
    // ZB-V keeps 1F1B's peak: 2p chunk-sized micro-batches, each chunk half a 1F1B stage (Qi et
    // al. 2024, §6). DualPipe and DualPipeV hold PP + 1 stage-sized ones (DeepSeek-V3 report,
    // Table 2; DualPipeV's PP is its 2p stages).
    for (int p = 2; p <= 16; p += 2) {
        const auto peak = [&](ScheduleKind kind, int m) {
            const Schedule s = make_schedule(kind, p, 2, m);
            int most = 0;
            for (int r = 0; r < p; ++r)
                most = std::max(most, max_in_flight(s, r).until_backward_weight);
            return most;
        };
        for (int m : {2 * p, 4 * p, 64}) {
            EXPECT_EQ(peak(ScheduleKind::zero_bubble_v, m), 2 * p) << "p " << p << " m " << m;
            EXPECT_EQ(peak(ScheduleKind::dualpipe, m), p + 1) << "p " << p << " m " << m;
            EXPECT_EQ(peak(ScheduleKind::dualpipev, m), 2 * p + 1) << "p " << p << " m " << m;
        }
    }
}

TEST(TwoChunkSchedule, RejectsImpossibleArguments) {
    EXPECT_THROW(make_schedule(ScheduleKind::dualpipe, 3, 2, 12), SpecError);     // odd pp
    EXPECT_THROW(make_schedule(ScheduleKind::dualpipe, 4, 2, 9), SpecError);      // odd m
    EXPECT_THROW(make_schedule(ScheduleKind::dualpipe, 4, 2, 6), SpecError);      // m < 2p
    EXPECT_THROW(make_schedule(ScheduleKind::dualpipev, 4, 2, 7), SpecError);     // m < 2p
    EXPECT_THROW(make_schedule(ScheduleKind::zero_bubble_v, 4, 1, 8), SpecError); // vpp != 2
    EXPECT_NO_THROW(make_schedule(ScheduleKind::zero_bubble_v, 4, 2, 3));
}
