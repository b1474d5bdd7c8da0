#include "../support/schedule_text.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>

using namespace trident::core;

using trident::test::compute_order;

TEST(Schedule, EveryScheduleIsCompleteAndDeadlockFree) {
    // p <= 16, m <= 64, v <= 4, as the simulator and executor will use them.
    int checked = 0;
    for (int p = 1; p <= 16; ++p)
        for (int m = 1; m <= 64; ++m) {
            for (auto kind :
                 {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zero_bubble_h1}) {
                ASSERT_NO_THROW(check_schedule(make_schedule(kind, p, 1, m)))
                    << to_string(kind) << " p " << p << " m " << m;
                ++checked;
            }
            if (m % p != 0) continue;
            for (int v = 1; v <= 4; ++v) {
                ASSERT_NO_THROW(
                    check_schedule(make_schedule(ScheduleKind::interleaved_1f1b, p, v, m)))
                    << "interleaved p " << p << " v " << v << " m " << m;
                ++checked;
            }
        }
    EXPECT_GT(checked, 3000);
}

TEST(Schedule, OneFOneBMatchesMegatronOrder) {
    const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 1, 6);
    EXPECT_EQ(compute_order(s, 0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
    EXPECT_EQ(compute_order(s, 3), "F0 B0 W0 F1 B1 W1 F2 B2 W2 F3 B3 W3 F4 B4 W4 F5 B5 W5");
    // The first rank receives gradients from rank 1 and sends activations to it.
    const auto& r0 = s.ranks[0];
    EXPECT_EQ(r0[0], (Action{ActionKind::forward, 0, 0, -1}));
    EXPECT_EQ(r0[1], (Action{ActionKind::send_activation, 0, 0, 1}));
}

TEST(Schedule, InterleavedMatchesMegatronChunkOrder) {
    // p 2, v 2, m 4: forwards walk chunk 0 for micro-batches 0,1, then chunk 1 for 0,1, ...
    const Schedule s = make_schedule(ScheduleKind::interleaved_1f1b, 2, 2, 4);
    std::string forwards;
    for (const Action& a : s.ranks[0])
        if (a.kind == ActionKind::forward)
            forwards += std::to_string(a.microbatch) + "." + std::to_string(a.chunk) + " ";
    EXPECT_EQ(forwards, "0.0 1.0 0.1 1.1 2.0 3.0 2.1 3.1 ");
    // Chunk 1 of rank 0 receives from rank 1 (virtual stage 1 -> 2) and the last virtual
    // stage (rank 1, chunk 1) sends nothing downstream.
    bool rank0_receives_from_rank1 = false;
    for (const Action& a : s.ranks[0])
        if (a.kind == ActionKind::recv_activation && a.chunk == 1 && a.peer == 1)
            rank0_receives_from_rank1 = true;
    EXPECT_TRUE(rank0_receives_from_rank1);
    for (const Action& a : s.ranks[1])
        EXPECT_FALSE(a.kind == ActionKind::send_activation && a.chunk == 1);
}

TEST(Schedule, ZeroBubbleH1DefersWeightGradients) {
    const Schedule s = make_schedule(ScheduleKind::zero_bubble_h1, 3, 1, 4);
    // The first stage runs 1F1B; the last holds its W's back by p − 1 = 2 micro-batches.
    EXPECT_EQ(compute_order(s, 0), "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3");
    EXPECT_EQ(compute_order(s, 2), "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3");
}

TEST(Schedule, InFlightMicroBatches) {
    for (int p : {1, 2, 4, 8})
        for (int r = 0; r < p; ++r) {
            const int m = 16;
            EXPECT_EQ(max_in_flight(make_schedule(ScheduleKind::one_f_one_b, p, 1, m), r)
                          .until_backward_input,
                      p - r);
            EXPECT_EQ(
                max_in_flight(make_schedule(ScheduleKind::gpipe, p, 1, m), r).until_backward_input,
                m);
            // ZB-H1 keeps 1F1B's activation peak; only W's inputs live longer.
            const InFlight zb =
                max_in_flight(make_schedule(ScheduleKind::zero_bubble_h1, p, 1, m), r);
            EXPECT_EQ(zb.until_backward_input, p - r);
            EXPECT_LE(zb.until_backward_weight, p); // never above the first stage's 1F1B peak
        }
    // Interleaving: the first rank holds 1 + (p−1)/(p·v) times 1F1B's layers (Narayanan et
    // al. 2021): (chunks in flight) · (layers per chunk = L/(p·v)) = L · (1 + (p−1)/(p·v)).
    for (int p : {2, 4, 8})
        for (int v : {2, 3, 4}) {
            const InFlight f =
                max_in_flight(make_schedule(ScheduleKind::interleaved_1f1b, p, v, 8 * p), 0);
            EXPECT_EQ(f.until_backward_input, p * v + p - 1) << "p " << p << " v " << v;
        }
}

TEST(Schedule, CheckerCatchesBrokenSchedules) {
    Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 2);
    // A lost weight-gradient pass.
    Schedule missing = s;
    for (auto it = missing.ranks[1].begin(); it != missing.ranks[1].end(); ++it)
        if (it->kind == ActionKind::backward_weight) {
            missing.ranks[1].erase(it);
            break;
        }
    EXPECT_THROW(check_schedule(missing), ScheduleError);
    // Rank 0 waits for a gradient before sending the activation that produces it.
    Schedule cyclic = s;
    auto& r0 = cyclic.ranks[0];
    auto recv = std::find_if(r0.begin(), r0.end(),
                             [](const Action& a) { return a.kind == ActionKind::recv_gradient; });
    const Action moved = *recv;
    r0.erase(recv);
    r0.insert(r0.begin(), moved);
    try {
        check_schedule(cyclic);
        FAIL() << "deadlock not found";
    } catch (const ScheduleError& e) {
        EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    }
    // A message to the wrong peer.
    Schedule wrong = s;
    for (auto& a : wrong.ranks[0])
        if (a.kind == ActionKind::send_activation) a.peer = 0;
    EXPECT_THROW(check_schedule(wrong), ScheduleError);
}

TEST(Schedule, RejectsImpossibleArguments) {
    EXPECT_THROW(make_schedule(ScheduleKind::interleaved_1f1b, 4, 2, 6), SpecError);
    EXPECT_THROW(make_schedule(ScheduleKind::one_f_one_b, 4, 2, 8), SpecError);
    EXPECT_THROW(make_schedule(ScheduleKind::gpipe, 0, 1, 8), SpecError);
}
